package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// collector is the server-side state of one sync: a private property
// collector with one filter over container views of the configured
// datacenters (every VM's identity, every object's name and parent:
// inventorySpec) and one over a list view of the VMs of interest (their
// details: detailsSpec). It belongs to one session.
type collector struct {
	session *vcenter.Session
	pc      *property.Collector
	views   []types.ManagedObjectReference // the container views, destroyed with it
	list    *view.ListView                 // nil with allDetails
	details types.ManagedObjectReference
	version string
	staging *data // set during a full read until it is complete
}

// close ends a pending long poll on the server (the client side is
// already cancelled, but a vCenter keeps waiting until maxWait) and
// destroys the collector and its views. Best effort, bounded.
func (st *collector) close(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c := st.session.VIM
	_, _ = methods.CancelWaitForUpdates(cctx, c, &types.CancelWaitForUpdates{This: st.pc.Reference()})
	_ = st.pc.Destroy(cctx)
	st.destroyViews(cctx)
	// Its session may have been replaced: its connections would stay open
	// (a current session only opens a new one when it needs it).
	c.Client.CloseIdleConnections()
}

func (st *collector) destroyViews(ctx context.Context) {
	views := st.views
	if st.list != nil {
		views = append(views, st.list.Reference())
	}
	for _, v := range views {
		_, _ = methods.DestroyView(ctx, st.session.VIM, &types.DestroyView{This: v})
	}
}

// newCollector creates the server-side state of a sync on session s.
// Before the index's first full read it also reads the hosts, clusters,
// folders, datacenters and pools on their own (one request, a few in a
// big vCenter), so that lookups made while the VMs are read can place a
// VM they find by a direct search (see Index.ObjectsKnown).
func (ix *Index) newCollector(ctx context.Context, s *vcenter.Session) (_ *collector, err error) {
	c := s.VIM
	roots, extra, err := ix.scope(ctx, c)
	if err != nil {
		return nil, err
	}
	pc, err := property.DefaultCollector(c).Create(ctx)
	if err != nil {
		return nil, fmt.Errorf("create property collector: %w", err)
	}
	st := &collector{session: s, pc: pc}
	defer func() {
		if err != nil {
			// Not ctx: its deadline may be what failed the setup.
			st.close(ctx)
		}
	}()
	opts := ix.specOptions()
	if opts.customAttributes && c.ServiceContent.CustomFieldsManager != nil {
		extra = append(extra, *c.ServiceContent.CustomFieldsManager)
	}
	if !ix.allDetails {
		if err := ix.followInterest(ctx, st); err != nil {
			return nil, err
		}
	}
	var objectViews, vmViews []types.ManagedObjectReference
	m := view.NewManager(c)
	for _, root := range roots {
		for _, kinds := range [][]string{objectKinds, {"VirtualMachine"}} {
			v, err := m.CreateContainerView(ctx, root, kinds, true)
			if err != nil {
				return nil, fmt.Errorf("create container view: %w", err)
			}
			st.views = append(st.views, v.Reference())
			if kinds[0] == "VirtualMachine" {
				vmViews = append(vmViews, v.Reference())
			} else {
				objectViews = append(objectViews, v.Reference())
			}
		}
	}
	if !ix.HasSynced() {
		// Best effort, within half of what is left of the setup's time:
		// it only spares lookups the wait for the first read.
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			rctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Until(dl)/2))
		}
		err := ix.readObjects(rctx, c, objectsSpec(objectViews, extra, opts))
		cancel()
		if err != nil {
			ix.log.V(1).Info("Hosts, clusters and folders not read ahead of the VMs; lookups wait for the first read", "err", err)
		}
	}
	if _, err := pc.CreateFilter(ctx, types.CreateFilter{Spec: inventorySpec(objectViews, vmViews, extra, opts)}); err != nil {
		return nil, fmt.Errorf("create property filter: %w", err)
	}
	return st, nil
}

// scope returns the roots of the container views (the configured
// datacenters, or the root folder) and the objects above them that no
// view holds (the datacenters' folders and the root folder).
func (ix *Index) scope(ctx context.Context, c *vim25.Client) (roots, extra []types.ManagedObjectReference, err error) {
	vc := ix.client.Config()
	if len(vc.Datacenters) == 0 {
		// A view holds what is below its root, not the root: the root
		// folder is read on its own (a tag on it is on every host chain).
		root := c.ServiceContent.RootFolder
		ix.scopeRoots.Store(&[]types.ManagedObjectReference{root})
		return []types.ManagedObjectReference{root}, []types.ManagedObjectReference{root}, nil
	}
	f := find.NewFinder(c, false)
	var names []string
	defer func() {
		if err == nil {
			ix.scopeNames.Store(&names)
			ix.scopeRoots.Store(&roots)
		}
	}()
	for _, name := range vc.Datacenters {
		dc, err := f.Datacenter(ctx, name)
		if err != nil {
			var nf *find.NotFoundError
			if errors.As(err, &nf) {
				return nil, nil, fmt.Errorf("datacenter %q (vcenter.%s.datacenters) does not exist in vCenter %q: fix the name or remove it", name, vc.Name, vc.Name)
			}
			return nil, nil, fmt.Errorf("find datacenter %q: %w", name, err)
		}
		roots = append(roots, dc.Reference())
		names = append(names, dc.Name()) // by ID or path, its name
		r := dc.Reference()
		for r.Value != "" && r != c.ServiceContent.RootFolder {
			extra = append(extra, r)
			var e mo.ManagedEntity
			if err := property.DefaultCollector(c).RetrieveOne(ctx, r, []string{"parent"}, &e); err != nil {
				return nil, nil, fmt.Errorf("read the parent of %s: %w", r, err)
			}
			if e.Parent == nil {
				break
			}
			r = *e.Parent
		}
		extra = append(extra, c.ServiceContent.RootFolder)
	}
	return roots, extra, nil
}

// followInterest creates st's list view with the VMs of interest so far
// (those asked for from now on are added once the collector is current)
// and the filter over it.
func (ix *Index) followInterest(ctx context.Context, st *collector) error {
	c := st.session.VIM
	wanted := ix.interest.restart()
	// Created empty, then filled: CreateListView fails on a reference
	// that no longer exists (a VM deleted while no collector followed
	// it), ModifyListView returns such references instead.
	var err error
	if st.list, err = view.NewManager(c).CreateListView(ctx, nil); err != nil {
		return fmt.Errorf("create list view: %w", err)
	}
	if len(wanted) > 0 {
		gone, err := st.list.Add(ctx, wanted)
		if err != nil {
			return fmt.Errorf("add %d VMs to the list view: %w", len(wanted), err)
		}
		ix.interest.added(nil, gone, ix.clock.Now())
	}
	f, err := st.pc.CreateFilter(ctx, types.CreateFilter{Spec: detailsSpec(st.list.Reference(), ix.specOptions())})
	if err != nil {
		return fmt.Errorf("create property filter: %w", err)
	}
	st.details = f.Reference()
	return nil
}

// readObjects reads the objects of spec in one request (continued in
// pages) and, while the index has never completed a full read, makes
// them its objects: lookups during the first read of the VMs can then
// place a VM they find directly. The full read replaces them. Only the
// sync loop calls it, as it installs full reads: synced cannot change
// between the check and the write.
func (ix *Index) readObjects(ctx context.Context, c *vim25.Client, spec types.PropertyFilterSpec) error {
	res, err := mo.RetrievePropertiesEx(ctx, c, types.RetrievePropertiesEx{
		This: c.ServiceContent.PropertyCollector, SpecSet: []types.PropertyFilterSpec{spec}})
	if err != nil {
		return fmt.Errorf("read hosts, clusters and folders: %w", err)
	}
	d := newData()
	updates := make([]types.ObjectUpdate, len(res))
	for i, oc := range res {
		updates[i] = types.ObjectUpdate{Kind: types.ObjectUpdateKindEnter, Obj: oc.Obj, ChangeSet: assignments(oc.PropSet)}
	}
	d.applyIdentity(&applied{changesOnly: true}, updates, specOptions{})
	if ix.status.hasSynced() {
		return nil
	}
	ix.store.write(func(data *data) bool {
		data.objects = d.objects
		return true
	})
	ix.status.objectsReadAhead()
	return nil
}
