package vcsim

import (
	"reflect"
	"slices"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The simulator has no permissions: every user sees every object. A real
// vCenter shows a user only the objects on which it holds System.Read
// (directly or propagated from a parent folder): others are left out of
// container and list views, searches (SearchIndex) answer as if they did
// not exist, and a direct read of their reference is refused with
// NoPermission, while a read of a reference that no longer exists is
// ManagedObjectNotFound. visibility models that for every login but the
// helper's own (the system under test, whatever its credential mode):
// Hide takes an entity (a VM, or a folder and everything under it) out of
// their sight, Unhide gives it back.
//
// What it models, through the simulator's method hook (Registry.Handler)
// and per-session stand-ins for the SearchIndex, the ViewManager and list
// views:
//   - container and list views of a hidden entity leave it out, and
//     property collectors that held it get an update of kind leave (as the
//     simulator sends for a destroyed VM); Unhide puts it back (the
//     simulator then re-sends the view as enters);
//   - SearchIndex methods do not return it;
//   - RetrieveProperties, RetrievePropertiesEx and CreateFilter naming it
//     directly fail with NoPermission (System.Read on it); a destroyed VM's
//     reference is ManagedObjectNotFound as before;
//   - HasPrivilegeOnEntities grants no privilege on it.
//
// What it does not model: permissions propagated through resource pools,
// hosts or clusters (only the folder hierarchy, Parent); entities created
// under a hidden folder after Hide (they show until Hide is called again);
// properties of visible objects that name hidden ones.
type visibility struct {
	vc *VCenter

	mu      sync.Mutex
	hidden  map[types.ManagedObjectReference]bool
	wrapped map[string]bool // session keys with stand-ins installed
	// What the sessions under test hold: the collectors that wait for
	// updates, their container views, and their list views.
	collectors map[*simulator.PropertyCollector]bool
	containers []*simulator.ContainerView
	lists      []*hidingListView
}

func newVisibility(vc *VCenter) *visibility {
	return &visibility{vc: vc, hidden: map[types.ManagedObjectReference]bool{}, wrapped: map[string]bool{},
		collectors: map[*simulator.PropertyCollector]bool{}}
}

// Hide takes entities out of the sight of every login but the helper's:
// a VM, or a folder with everything under it, as when the CCM user's
// permission on it is removed.
func (v *VCenter) Hide(refs ...types.ManagedObjectReference) {
	vis := v.visibility
	vis.mu.Lock()
	for _, r := range refs {
		vis.hidden[r] = true
	}
	containers, lists := slices.Clone(vis.containers), slices.Clone(vis.lists)
	vis.mu.Unlock()

	ctx := v.Model.Service.Context
	var gone []types.ManagedObjectReference
	for _, cv := range containers {
		for _, r := range viewOf(ctx, cv) {
			if vis.isHidden(ctx, r) {
				cv.RemoveObject(ctx, r) // no update: the collectors are told below
				gone = append(gone, r)
			}
		}
	}
	for _, lv := range lists {
		gone = append(gone, lv.prune(ctx, vis)...)
	}
	// The collectors known now, after the views changed: one that
	// started after this read the views without the hidden objects.
	for _, pc := range vis.collectorsNow() {
		for _, r := range gone {
			pc.RemoveObject(ctx, r) // an update of kind leave where a filter holds r
		}
	}
}

// Unhide gives hidden entities back: they are in views again (the
// simulator re-sends each view that changes), found by searches and
// readable.
func (v *VCenter) Unhide(refs ...types.ManagedObjectReference) {
	vis := v.visibility
	vis.mu.Lock()
	for _, r := range refs {
		delete(vis.hidden, r)
	}
	containers, lists := slices.Clone(vis.containers), slices.Clone(vis.lists)
	vis.mu.Unlock()

	ctx := v.Model.Service.Context
	var back []mo.Reference
	for _, obj := range ctx.Map.All("") {
		ref := obj.Reference()
		if vis.isHidden(ctx, ref) {
			continue
		}
		for _, cv := range containers {
			// Not cv.PutObject: see addToView.
			if addToView(ctx, cv, obj) {
				back = append(back, obj)
			}
		}
	}
	vis.announce(ctx, back...)
	for _, lv := range lists {
		lv.restore(ctx, vis)
	}
}

// holds tells whether a container view holds obj by its definition: of
// one of its types, and below its root (a child of it, when not
// recursive).
func holds(ctx *simulator.Context, cv *simulator.ContainerView, obj mo.Reference) bool {
	var root types.ManagedObjectReference
	var kinds []string
	var recursive bool
	ctx.WithLock(cv, func() { root, kinds, recursive = cv.Container, cv.Type, cv.Recursive })
	if len(kinds) > 0 && !slices.Contains(kinds, obj.Reference().Type) {
		return false
	}
	for cur := obj; ; {
		e, ok := cur.(mo.Entity)
		if !ok || e.Entity().Parent == nil {
			return false
		}
		parent := *e.Entity().Parent
		if parent == root {
			return true
		}
		if !recursive {
			return false
		}
		if cur = ctx.Map.Get(parent); cur == nil {
			return false
		}
	}
}

// viewOf is a copy of a container view's objects, read under its lock
// (the simulator changes them under it as objects come and go).
func viewOf(ctx *simulator.Context, cv *simulator.ContainerView) []types.ManagedObjectReference {
	var out []types.ManagedObjectReference
	ctx.WithLock(cv, func() { out = slices.Clone(cv.View) })
	return out
}

// isHidden: ref or a parent of it is hidden, and it exists (a destroyed
// object's reference is not found, whatever its permissions were).
func (vis *visibility) isHidden(ctx *simulator.Context, ref types.ManagedObjectReference) bool {
	vis.mu.Lock()
	defer vis.mu.Unlock()
	if len(vis.hidden) == 0 {
		return false
	}
	for depth := 0; depth < 64; depth++ {
		obj := ctx.Map.Get(ref)
		if obj == nil {
			return false
		}
		if vis.hidden[ref] {
			return true
		}
		e, ok := obj.(mo.Entity)
		if !ok || e.Entity().Parent == nil {
			return false
		}
		ref = *e.Entity().Parent
	}
	return false
}

// restricted: a session of the system under test (any login but the
// helper's).
func (vis *visibility) restricted(ctx *simulator.Context) bool {
	return ctx.Session != nil && ctx.Session.UserName != adminUser
}

// handle is the simulator's method hook (Registry.Handler): it runs
// before every method. It installs the session's stand-ins, records the
// collectors that wait for updates, and refuses direct reads of hidden
// objects.
func (vis *visibility) handle(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	if !vis.restricted(ctx) {
		return nil, nil
	}
	vis.install(ctx)
	switch m.Name {
	case "WaitForUpdatesEx", "WaitForUpdates", "CheckForUpdates":
		if pc, ok := ctx.Session.Get(m.This).(*simulator.PropertyCollector); ok {
			vis.mu.Lock()
			vis.collectors[pc] = true
			vis.mu.Unlock()
		}
	case "RetrieveProperties", "RetrievePropertiesEx", "CreateFilter":
		for _, spec := range specSets(m.Body) {
			for _, o := range spec.ObjectSet {
				if vis.isHidden(ctx, o.Obj) {
					obj := o.Obj
					return nil, &types.NoPermission{Object: &obj, PrivilegeId: "System.Read"}
				}
			}
		}
	}
	return nil, nil
}

func specSets(body any) []types.PropertyFilterSpec {
	switch r := body.(type) {
	case *types.RetrieveProperties:
		return r.SpecSet
	case *types.RetrievePropertiesEx:
		return r.SpecSet
	case *types.CreateFilter:
		return []types.PropertyFilterSpec{r.Spec}
	}
	return nil
}

// install puts the session's stand-ins for the SearchIndex and the
// ViewManager in its registry, which the simulator asks before its own.
func (vis *visibility) install(ctx *simulator.Context) {
	vis.mu.Lock()
	done := vis.wrapped[ctx.Session.Key]
	vis.wrapped[ctx.Session.Key] = true
	vis.mu.Unlock()
	if done {
		return
	}
	content := vis.vc.Model.ServiceContent
	if si, ok := ctx.Map.Get(content.SearchIndex.Reference()).(*simulator.SearchIndex); ok {
		ctx.Session.Registry.Put(&hidingSearchIndex{SearchIndex: si, vis: vis})
	}
	if vm, ok := ctx.Map.Get(content.ViewManager.Reference()).(*simulator.ViewManager); ok {
		ctx.Session.Registry.Put(&hidingViewManager{ViewManager: vm, vis: vis})
	}
	if content.AuthorizationManager != nil {
		if am, ok := ctx.Map.Get(*content.AuthorizationManager).(*simulator.AuthorizationManager); ok {
			ctx.Session.Registry.Put(&hidingAuthorizationManager{AuthorizationManager: am, vis: vis})
		}
	}
}

// hidingAuthorizationManager answers the session's privilege checks: no
// privilege on a hidden object (the simulator grants every privilege on
// everything).
type hidingAuthorizationManager struct {
	*simulator.AuthorizationManager
	vis *visibility
}

func (m *hidingAuthorizationManager) HasPrivilegeOnEntities(ctx *simulator.Context, req *types.HasPrivilegeOnEntities) soap.HasFault {
	body := m.AuthorizationManager.HasPrivilegeOnEntities(req)
	if b, ok := body.(*methods.HasPrivilegeOnEntitiesBody); ok && b.Res != nil {
		for i := range b.Res.Returnval {
			e := &b.Res.Returnval[i]
			if m.vis.isHidden(ctx, e.Entity) {
				for j := range e.PrivAvailability {
					e.PrivAvailability[j].IsGranted = false
				}
			}
		}
	}
	return body
}

// hidingViewManager creates views without hidden objects and remembers
// them, so that Hide and Unhide can change them.
type hidingViewManager struct {
	*simulator.ViewManager
	vis *visibility
}

func (m *hidingViewManager) CreateContainerView(ctx *simulator.Context, req *types.CreateContainerView) soap.HasFault {
	body := m.ViewManager.CreateContainerView(ctx, req)
	res, ok := body.(*methods.CreateContainerViewBody)
	if !ok || res.Res == nil {
		return body
	}
	if cv, ok := ctx.Session.Get(res.Res.Returnval).(*simulator.ContainerView); ok {
		for _, r := range viewOf(ctx, cv) {
			if m.vis.isHidden(ctx, r) {
				cv.RemoveObject(ctx, r)
			}
		}
		m.vis.mu.Lock()
		m.vis.containers = append(m.vis.containers, cv)
		m.vis.mu.Unlock()
		ctx.Map.AddHandler(&viewKeeper{cv: cv, vis: m.vis}) // in place of the view's own handler
	}
	return body
}

// viewKeeper keeps a container view's objects as objects come and go,
// in place of the simulator's own handler, whose update of the view when
// an object is created makes it re-read its filters' objects at the next
// poll and drop the leaves pending for objects destroyed meanwhile (a VM
// cloned and another destroyed between two polls: the destroyed one
// never leaves the client's view). A real vCenter reports both. The
// collectors are told of a new object directly (an update of kind enter,
// after it is in the view).
type viewKeeper struct {
	cv  *simulator.ContainerView
	vis *visibility
}

func (k *viewKeeper) Reference() types.ManagedObjectReference { return k.cv.Reference() }

func (k *viewKeeper) PutObject(ctx *simulator.Context, obj mo.Reference) {
	if !k.vis.isHidden(ctx, obj.Reference()) && addToView(ctx, k.cv, obj) {
		k.vis.announce(ctx, obj)
	}
}

// addToView adds obj to a container view that holds it by its definition
// and does not list it yet; it reports whether it did. Not the view's own
// PutObject: its update of the view makes the simulator re-read its
// filters' objects at the next poll, which drops the leaves pending for
// objects gone since (a VM destroyed while no poll was under way), where
// a real vCenter reports them. The caller tells the collectors
// (announce).
func addToView(ctx *simulator.Context, cv *simulator.ContainerView, obj mo.Reference) bool {
	ref := obj.Reference()
	if slices.Contains(viewOf(ctx, cv), ref) || !holds(ctx, cv, obj) {
		return false
	}
	ctx.WithLock(cv, func() { cv.View = append(cv.View, ref) })
	return true
}

// announce tells every collector that waits for updates that objs entered
// (an update of kind enter: the next poll reads the views again for them).
func (vis *visibility) announce(ctx *simulator.Context, objs ...mo.Reference) {
	for _, pc := range vis.collectorsNow() {
		for _, obj := range objs {
			pc.PutObject(ctx, obj)
		}
	}
}

func (k *viewKeeper) RemoveObject(ctx *simulator.Context, ref types.ManagedObjectReference) {
	k.cv.RemoveObject(ctx, ref)
}

func (k *viewKeeper) UpdateObject(*simulator.Context, mo.Reference, []types.PropertyChange) {}

func (m *hidingViewManager) CreateListView(ctx *simulator.Context, req *types.CreateListView) soap.HasFault {
	visible, hidden := m.vis.split(ctx, req.Obj)
	r := *req
	r.Obj = visible
	body := m.ViewManager.CreateListView(ctx, &r)
	res, ok := body.(*methods.CreateListViewBody)
	if !ok || res.Res == nil {
		return body
	}
	if lv, ok := ctx.Session.Get(res.Res.Returnval).(*simulator.ListView); ok {
		w := &hidingListView{ListView: lv, vis: m.vis, pruned: hidden}
		ctx.Session.Registry.Put(w)
		m.vis.mu.Lock()
		m.vis.lists = append(m.vis.lists, w)
		m.vis.mu.Unlock()
	}
	return body
}

func (vis *visibility) split(ctx *simulator.Context, refs []types.ManagedObjectReference) (visible, hidden []types.ManagedObjectReference) {
	for _, r := range refs {
		if vis.isHidden(ctx, r) {
			hidden = append(hidden, r)
		} else {
			visible = append(visible, r)
		}
	}
	return visible, hidden
}

// hidingListView is a list view that never holds a hidden object: one
// added is answered as unresolved (as a reference the user cannot see)
// and kept aside until Unhide.
type hidingListView struct {
	*simulator.ListView
	vis *visibility

	mu     sync.Mutex
	pruned []types.ManagedObjectReference
}

func (l *hidingListView) ModifyListView(ctx *simulator.Context, req *types.ModifyListView) soap.HasFault {
	visible, hidden := l.vis.split(ctx, req.Add)
	r := *req
	r.Add = visible
	l.mu.Lock()
	l.pruned = slices.DeleteFunc(append(l.pruned, hidden...), func(ref types.ManagedObjectReference) bool { return slices.Contains(req.Remove, ref) })
	l.mu.Unlock()
	body := l.ListView.ModifyListView(ctx, &r)
	if res, ok := body.(*methods.ModifyListViewBody); ok && res.Res != nil {
		res.Res.Returnval = append(res.Res.Returnval, hidden...)
	}
	return body
}

func (l *hidingListView) ResetListView(ctx *simulator.Context, req *types.ResetListView) soap.HasFault {
	visible, hidden := l.vis.split(ctx, req.Obj)
	r := *req
	r.Obj = visible
	l.mu.Lock()
	l.pruned = hidden
	l.mu.Unlock()
	body := l.ListView.ResetListView(ctx, &r)
	if res, ok := body.(*methods.ResetListViewBody); ok && res.Res != nil {
		res.Res.Returnval = append(res.Res.Returnval, hidden...)
	}
	return body
}

// prune takes hidden objects out of the view (without an update: the
// caller sends leaves) and returns them.
func (l *hidingListView) prune(ctx *simulator.Context, vis *visibility) []types.ManagedObjectReference {
	var gone []types.ManagedObjectReference
	ctx.WithLock(l.ListView, func() {
		l.View = slices.DeleteFunc(l.View, func(r types.ManagedObjectReference) bool {
			if vis.isHidden(ctx, r) {
				gone = append(gone, r)
				return true
			}
			return false
		})
	})
	l.mu.Lock()
	l.pruned = append(l.pruned, gone...)
	l.mu.Unlock()
	return gone
}

// restore puts back what prune took that is visible again.
func (l *hidingListView) restore(ctx *simulator.Context, vis *visibility) {
	l.mu.Lock()
	var back []types.ManagedObjectReference
	l.pruned = slices.DeleteFunc(l.pruned, func(r types.ManagedObjectReference) bool {
		if !vis.isHidden(ctx, r) {
			back = append(back, r)
			return true
		}
		return false
	})
	l.mu.Unlock()
	if len(back) == 0 {
		return
	}
	var view []types.ManagedObjectReference
	ctx.WithLock(l.ListView, func() {
		l.View = append(l.View, back...)
		view = slices.Clone(l.View)
	})
	ctx.Update(l.ListView, []types.PropertyChange{{Name: "view", Val: view}})
}

// hidingSearchIndex answers searches as if hidden objects did not exist.
type hidingSearchIndex struct {
	*simulator.SearchIndex
	vis *visibility
}

// filtered takes hidden objects out of a SearchIndex answer: its
// Res.Returnval, one reference or a list of them.
func (s *hidingSearchIndex) filtered(ctx *simulator.Context, body soap.HasFault) soap.HasFault {
	res := reflect.ValueOf(body).Elem().FieldByName("Res")
	if !res.IsValid() || res.IsNil() {
		return body
	}
	switch r := res.Elem().FieldByName("Returnval").Addr().Interface().(type) {
	case **types.ManagedObjectReference:
		if *r != nil && s.vis.isHidden(ctx, **r) {
			*r = nil
		}
	case *[]types.ManagedObjectReference:
		*r = slices.DeleteFunc(*r, func(ref types.ManagedObjectReference) bool { return s.vis.isHidden(ctx, ref) })
	}
	return body
}

func (s *hidingSearchIndex) FindByUuid(ctx *simulator.Context, req *types.FindByUuid) soap.HasFault {
	return s.filtered(ctx, s.SearchIndex.FindByUuid(ctx, req))
}

func (s *hidingSearchIndex) FindAllByUuid(ctx *simulator.Context, req *types.FindAllByUuid) soap.HasFault {
	return s.filtered(ctx, s.SearchIndex.FindAllByUuid(ctx, req))
}

func (s *hidingSearchIndex) FindByDnsName(ctx *simulator.Context, req *types.FindByDnsName) soap.HasFault {
	return s.filtered(ctx, s.SearchIndex.FindByDnsName(ctx, req))
}

func (s *hidingSearchIndex) FindAllByDnsName(ctx *simulator.Context, req *types.FindAllByDnsName) soap.HasFault {
	return s.filtered(ctx, s.SearchIndex.FindAllByDnsName(ctx, req))
}

func (s *hidingSearchIndex) FindByIp(ctx *simulator.Context, req *types.FindByIp) soap.HasFault {
	return s.filtered(ctx, s.SearchIndex.FindByIp(ctx, req))
}

func (s *hidingSearchIndex) FindAllByIp(ctx *simulator.Context, req *types.FindAllByIp) soap.HasFault {
	return s.filtered(ctx, s.SearchIndex.FindAllByIp(ctx, req))
}

func (s *hidingSearchIndex) FindByInventoryPath(ctx *simulator.Context, req *types.FindByInventoryPath) soap.HasFault {
	return s.filtered(ctx, s.SearchIndex.FindByInventoryPath(ctx, req))
}

func (s *hidingSearchIndex) FindChild(ctx *simulator.Context, req *types.FindChild) soap.HasFault {
	return s.filtered(ctx, s.SearchIndex.FindChild(ctx, req))
}

// collectorsNow are the collectors that wait for updates, as known now.
func (vis *visibility) collectorsNow() []*simulator.PropertyCollector {
	vis.mu.Lock()
	defer vis.mu.Unlock()
	out := make([]*simulator.PropertyCollector, 0, len(vis.collectors))
	for pc := range vis.collectors {
		out = append(out, pc)
	}
	return out
}
