package inventory_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// TestDetailsOnlyForVMsAskedFor: the index knows every VM by identity but
// keeps details (placement, addresses, power state) only for the VMs a
// lookup asked for; those are then followed without being asked again,
// also across a new session.
func TestDetailsOnlyForVMsAskedFor(t *testing.T) {
	e := setup(t)
	c := e.fleet.VCenter("vc-c")
	ix := e.inv.Index("vc-c")
	if ix.Len() != len(c.VMs) || len(ix.VMs()) != 0 {
		t.Fatalf("before any lookup: %d identities (want %d), %d with details (want 0)", ix.Len(), len(c.VMs), len(ix.VMs()))
	}

	target := c.VMs[0]
	got, err := e.inv.FindByUUID(e.ctx, target.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Datacenter == "" || got.Host != target.HostRef || len(got.NICs) == 0 || got.PowerState != types.VirtualMachinePowerStatePoweredOn {
		t.Errorf("the lookup returned no details: %+v", got)
	}
	if n := len(ix.VMs()); n != 1 {
		t.Errorf("%d VMs with details after one lookup, want 1", n)
	}

	// Followed: a change arrives without another lookup.
	vm := object.NewVirtualMachine(c.Admin(), target.Ref)
	runTask(t, e.ctx, vm.PowerOff)
	poll.True(t, "power state followed", func() bool {
		d, ok := ix.VM(target.Ref)
		return ok && d.PowerState == types.VirtualMachinePowerStatePoweredOff
	})

	// A new session: the new collector follows the same VMs.
	if n, err := c.TerminateSessions(e.ctx); err != nil || n == 0 {
		t.Fatalf("terminate sessions: %d, %v", n, err)
	}
	runTask(t, e.ctx, vm.PowerOn)
	poll.True(t, "followed after a new session", func() bool {
		d, ok := ix.VM(target.Ref)
		complete, _, _ := ix.Status()
		return complete && ok && d.PowerState == types.VirtualMachinePowerStatePoweredOn
	})
	if n := len(ix.VMs()); n != 1 {
		t.Errorf("%d VMs with details after the new session, want 1", n)
	}
}

// TestSmallVCenterKeepsEveryDetail: with the default options a vCenter of
// moderate size has every VM's details after its first read (asked for in
// one request), so lookups never wait for them.
func TestSmallVCenterKeepsEveryDetail(t *testing.T) {
	e := setup(t)
	var clients []inventory.Client
	for _, c := range e.pool.Clients() {
		clients = append(clients, c)
	}
	inv := inventory.New(clients, inventory.Options{MaxWait: time.Second})
	ctx, stop := context.WithCancel(e.ctx)
	inv.Start(ctx)
	t.Cleanup(func() { stop(); inv.Wait() })
	if err := inv.WaitForSync(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, v := range e.fleet.VCenters {
		ix := inv.Index(v.Name)
		poll.True(t, "every VM of "+v.Name+" with details", func() bool { return len(ix.VMs()) == len(v.VMs) })
	}
}

// TestLookupReadsDetailsItself: the first lookup of a VM whose details
// are not kept reads them directly (one request), without waiting for the
// collector to add the VM to its list view: here the collector cannot
// (every ModifyListView fails) and the lookup still answers with the
// details. Once the collector can again, the VM is followed.
func TestLookupReadsDetailsItself(t *testing.T) {
	e := setup(t)
	c := e.fleet.VCenter("vc-b")
	ix := e.inv.Index("vc-b")
	target := c.VMs[1]
	if _, ok := ix.VM(target.Ref); ok {
		t.Fatal("details kept before any lookup")
	}
	faults := c.Model.Service.FaultInjector()
	faults.AddRule(&simulator.FaultInjectionRule{MethodName: "ModifyListView", ObjectType: "*", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeGeneric, Message: "list views are broken", Enabled: true})
	defer faults.ClearRules()

	got, err := e.inv.FindByUUID(e.ctx, target.UUID)
	if err != nil {
		t.Fatalf("lookup while the collector cannot add the VM: %v", err)
	}
	if got.Host != target.HostRef || got.PowerState != types.VirtualMachinePowerStatePoweredOn || len(got.NICs) == 0 || got.Datacenter == "" {
		t.Errorf("the lookup returned no details: %+v", got)
	}
	if d, ok := ix.VM(target.Ref); !ok || d.Host != target.HostRef {
		t.Errorf("the details read are not kept: %+v, %v", d, ok)
	}

	faults.ClearRules()
	vm := object.NewVirtualMachine(c.Admin(), target.Ref)
	runTask(t, e.ctx, vm.PowerOff)
	poll.True(t, "the VM followed once the collector recovered", func() bool {
		d, ok := ix.VM(target.Ref)
		return ok && d.PowerState == types.VirtualMachinePowerStatePoweredOff
	})
}

// TestLookupOfDeletedVMDetails: a VM deleted after the index saw it is not
// returned with made-up details: the direct read finds it gone.
func TestLookupOfDeletedVMDetails(t *testing.T) {
	e := setup(t)
	c := e.fleet.VCenter("vc-c")
	target := c.VMs[0]
	faults := c.Model.Service.FaultInjector()
	// Keep the collector from seeing the deletion before the lookup does.
	faults.AddRule(&simulator.FaultInjectionRule{MethodName: "WaitForUpdatesEx", ObjectType: "*", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeGeneric, Message: "no updates", Enabled: true})
	defer faults.ClearRules()
	// A long poll made before the rule may still be under way and would
	// bring the deletion: wait until one made after it has failed.
	ix := e.inv.Index("vc-c")
	poll.True(t, "a long poll refused", func() bool { _, _, err := ix.Status(); return err != nil })
	// Task.Wait would use WaitForUpdatesEx: wait by reading the task.
	vm := object.NewVirtualMachine(c.Admin(), target.Ref)
	for _, op := range []func(context.Context) (*object.Task, error){vm.PowerOff, vm.Destroy} {
		task, err := op(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		poll.True(t, "task done", func() bool {
			var tk mo.Task
			err := property.DefaultCollector(c.Admin()).RetrieveOne(e.ctx, task.Reference(), []string{"info"}, &tk)
			return err == nil && tk.Info.State == types.TaskInfoStateSuccess
		})
	}
	_, err := e.inv.FindByUUID(e.ctx, target.UUID)
	if err == nil {
		t.Fatal("a deleted VM was found")
	}
	if errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("a VM the index still lists is 'not found' (only a current index or a search may say so): %v", err)
	}
}

// TestLookupDuringFirstRead: a vCenter's hosts, clusters, folders and
// datacenters are read ahead of its VMs, so a lookup made while the VMs
// are still being read (here: never, every WaitForUpdatesEx fails) finds
// its VM by a direct search and gets it placed (host, datacenter, the
// ancestry a zone comes from) instead of waiting for the read. A miss
// during the first read is "cannot tell", never "not found". Once the
// read completes, the VM found is followed.
func TestLookupDuringFirstRead(t *testing.T) {
	e := setup(t)
	c := e.fleet.VCenter("vc-b")
	faults := c.Model.Service.FaultInjector()
	faults.AddRule(&simulator.FaultInjectionRule{MethodName: "WaitForUpdatesEx", ObjectType: "*", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeGeneric, Message: "no updates", Enabled: true})
	defer faults.ClearRules()

	client, err := e.pool.Client("vc-b")
	if err != nil {
		t.Fatal(err)
	}
	inv := inventory.New([]inventory.Client{client}, inventory.Options{MaxWait: time.Second, EagerDetailsMax: -1})
	ctx, stop := context.WithCancel(e.ctx)
	inv.Start(ctx)
	t.Cleanup(func() { stop(); inv.Wait() })
	ix := inv.Index("vc-b")
	poll.True(t, "hosts, clusters and folders read", ix.ObjectsKnown)
	if ix.HasSynced() || ix.Len() != 0 {
		t.Fatalf("the VMs were read although every WaitForUpdatesEx fails: synced %v, %d VMs", ix.HasSynced(), ix.Len())
	}

	target := c.VMs[1]
	got, err := inv.FindByUUID(e.ctx, target.UUID)
	if err != nil {
		t.Fatalf("lookup during the first read: %v", err)
	}
	if got.Ref != target.Ref || got.Host != target.HostRef || got.Datacenter == "" || len(got.NICs) == 0 {
		t.Errorf("the lookup returned %+v, want %s on host %s with its datacenter and NICs", got, target.Ref, target.HostRef)
	}
	var kinds []string
	for _, o := range ix.Ancestors(got.Host) {
		kinds = append(kinds, inventory.Kind(o.Ref))
	}
	if !slices.Contains(kinds, "datacenter") {
		t.Errorf("the host's ancestry during the first read is %v: no datacenter, so no zone", kinds)
	}

	_, err = inv.FindByUUID(e.ctx, "4211aaaa-0000-4000-8000-00000000dead")
	var ie *inventory.IncompleteError
	if !errors.As(err, &ie) || errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("a miss during the first read: err = %v, want an IncompleteError that is not ErrNotFound", err)
	}

	faults.ClearRules()
	poll.True(t, "the VM found is followed once the read completes", func() bool {
		_, ok := ix.VM(target.Ref)
		return ix.HasSynced() && ok
	})
}
