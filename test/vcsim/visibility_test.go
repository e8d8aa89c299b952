package vcsim

import (
	"context"
	"testing"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// watcher follows every VM of a container view on the root folder through
// its own property collector, as the inventory does.
type watcher struct {
	c       *vim25.Client
	pc      *property.Collector
	version string
	in      map[types.ManagedObjectReference]bool
}

func watch(ctx context.Context, t *testing.T, c *vim25.Client, root types.ManagedObjectReference) *watcher {
	t.Helper()
	cv, err := view.NewManager(c).CreateContainerView(ctx, root, []string{"VirtualMachine"}, true)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := property.DefaultCollector(c).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spec := types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{Obj: cv.Reference(), Skip: types.NewBool(true), SelectSet: []types.BaseSelectionSpec{
			&types.TraversalSpec{Type: "ContainerView", Path: "view"}}}},
		PropSet: []types.PropertySpec{{Type: "VirtualMachine", PathSet: []string{"name"}}},
	}
	if _, err := pc.CreateFilter(ctx, types.CreateFilter{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	w := &watcher{c: c, pc: pc, in: map[types.ManagedObjectReference]bool{}}
	w.next(ctx, t)
	return w
}

// next applies one WaitForUpdatesEx answer (waiting at most 5 s).
func (w *watcher) next(ctx context.Context, t *testing.T) {
	t.Helper()
	res, err := methods.WaitForUpdatesEx(ctx, w.c, &types.WaitForUpdatesEx{This: w.pc.Reference(), Version: w.version,
		Options: &types.WaitOptions{MaxWaitSeconds: types.NewInt32(5)}})
	if err != nil {
		t.Fatal(err)
	}
	set := res.Returnval
	if set == nil {
		return
	}
	w.version = set.Version
	for _, fs := range set.FilterSet {
		for _, u := range fs.ObjectSet {
			w.in[u.Obj] = u.Kind != types.ObjectUpdateKindLeave
		}
	}
}

// loggedIn starts one vCenter with vms VMs per cluster and logs in as
// the system under test (whose sight Hide limits).
func loggedIn(t *testing.T, vms int) (context.Context, *VCenter, *vim25.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f, err := Start(ctx, Spec{Name: "vc-a", VMs: vms})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenter("vc-a")
	c, err := login(ctx, t, vc, vc.User, vc.Password)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, vc, c
}

func TestHideAndUnhide(t *testing.T) {
	ctx, vc, c := loggedIn(t, 3)
	w := watch(ctx, t, c, vc.RootFolder())
	hidden, other := vc.VMs[0], vc.VMs[1]
	if !w.in[hidden.Ref] || !w.in[other.Ref] {
		t.Fatalf("the view holds %v before Hide", w.in)
	}

	vc.Hide(hidden.Ref)
	w.next(ctx, t)
	if w.in[hidden.Ref] {
		t.Error("a hidden VM did not leave the view")
	}
	if !w.in[other.Ref] {
		t.Error("another VM left the view")
	}
	si := object.NewSearchIndex(c)
	if r, err := si.FindByUuid(ctx, nil, hidden.UUID, true, nil); err != nil || r != nil {
		t.Errorf("FindByUuid of a hidden VM: %v, %v; want nothing", r, err)
	}
	if r, err := si.FindByUuid(ctx, nil, other.UUID, true, nil); err != nil || r == nil {
		t.Errorf("FindByUuid of a visible VM: %v, %v", r, err)
	}
	var vm mo.VirtualMachine
	err := property.DefaultCollector(c).RetrieveOne(ctx, hidden.Ref, []string{"name"}, &vm)
	var np *types.NoPermission
	if _, ok := fault.As(err, &np); !ok || np.PrivilegeId != "System.Read" || np.Object == nil || *np.Object != hidden.Ref {
		t.Errorf("a direct read of a hidden VM: %v; want NoPermission (System.Read) on %s", err, hidden.Ref)
	}
	// A view made after Hide leaves it out too; the helper sees it.
	if w2 := watch(ctx, t, c, vc.RootFolder()); w2.in[hidden.Ref] || !w2.in[other.Ref] {
		t.Errorf("a view made after Hide holds %v", w2.in)
	}
	if r, err := object.NewSearchIndex(vc.Admin()).FindByUuid(ctx, nil, hidden.UUID, true, nil); err != nil || r == nil {
		t.Errorf("the helper's FindByUuid of a hidden VM: %v, %v", r, err)
	}

	vc.Unhide(hidden.Ref)
	w.next(ctx, t)
	if !w.in[hidden.Ref] {
		t.Error("an unhidden VM did not enter the view again")
	}
	if err := property.DefaultCollector(c).RetrieveOne(ctx, hidden.Ref, []string{"name"}, &vm); err != nil {
		t.Errorf("a direct read after Unhide: %v", err)
	}

	// Hidden, then destroyed: a direct read is ManagedObjectNotFound.
	vc.Hide(hidden.Ref)
	destroy(ctx, t, vc, hidden.Ref)
	err = property.DefaultCollector(c).RetrieveOne(ctx, hidden.Ref, []string{"name"}, &vm)
	if !fault.Is(err, &types.ManagedObjectNotFound{}) {
		t.Errorf("a direct read of a destroyed hidden VM: %v; want ManagedObjectNotFound", err)
	}
}

func TestHideFolder(t *testing.T) {
	ctx, vc, c := loggedIn(t, 2)
	dc := object.NewDatacenter(vc.Admin(), vc.Datacenter(vc.VMs[0].Datacenter))
	folders, err := dc.Folders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := watch(ctx, t, c, vc.RootFolder())
	vc.Hide(folders.VmFolder.Reference())
	w.next(ctx, t)
	for _, vm := range vc.VMs {
		if w.in[vm.Ref] {
			t.Errorf("VM %s under a hidden folder is still in the view", vm.Name)
		}
		var m mo.VirtualMachine
		if err := property.DefaultCollector(c).RetrieveOne(ctx, vm.Ref, []string{"name"}, &m); !fault.Is(err, &types.NoPermission{}) {
			t.Errorf("a direct read of VM %s under a hidden folder: %v; want NoPermission", vm.Name, err)
		}
	}
}

func destroy(ctx context.Context, t *testing.T, vc *VCenter, ref types.ManagedObjectReference) {
	t.Helper()
	vm := object.NewVirtualMachine(vc.Admin(), ref)
	if task, err := vm.PowerOff(ctx); err == nil {
		_ = task.Wait(ctx)
	}
	task, err := vm.Destroy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestUnhideKeepsLeaves: a VM destroyed while no poll is under way, then
// another VM given back by Unhide before the next poll: that poll reports
// both, the destroyed VM's leave and the other's enter. (The simulator
// re-reads a filter's objects when its view changes and drops the leaves
// pending for objects no longer there: Unhide must not make it.)
func TestUnhideKeepsLeaves(t *testing.T) {
	ctx, vc, c := loggedIn(t, 3)
	w := watch(ctx, t, c, vc.RootFolder())
	hidden, destroyed := vc.VMs[0], vc.VMs[1]
	vc.Hide(hidden.Ref)
	w.next(ctx, t)
	if w.in[hidden.Ref] {
		t.Fatal("a hidden VM did not leave the view")
	}
	destroy(ctx, t, vc, destroyed.Ref)
	vc.Unhide(hidden.Ref)
	for range 3 { // the two may come in one answer or two
		w.next(ctx, t)
		if !w.in[destroyed.Ref] && w.in[hidden.Ref] {
			return
		}
	}
	t.Errorf("after the destruction and Unhide: destroyed VM in the view %v (want false), unhidden VM %v (want true)",
		w.in[destroyed.Ref], w.in[hidden.Ref])
}

// TestCloneKeepsLeaves: a VM destroyed and another cloned between two
// polls: the next polls report both, the leave and the enter.
func TestCloneKeepsLeaves(t *testing.T) {
	ctx, vc, c := loggedIn(t, 3)
	w := watch(ctx, t, c, vc.RootFolder())
	destroyed := vc.VMs[1]
	destroy(ctx, t, vc, destroyed.Ref)
	clone, err := vc.Clone(ctx, vc.VMs[0].Ref, "clone-1", "42a1b2c3-0000-4000-8000-0000000000c1")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the two may come in one answer or two
		w.next(ctx, t)
		if !w.in[destroyed.Ref] && w.in[clone] {
			return
		}
	}
	t.Errorf("after a destruction and a clone: destroyed VM in the view %v (want false), clone %v (want true)",
		w.in[destroyed.Ref], w.in[clone])
}
