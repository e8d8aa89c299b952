package inventory_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// TestFollowInterval: while lookups keep asking for new VMs, the list
// view of followed VMs changes at most once per interval: the first VM is
// followed at once, the next ones together when the interval has passed
// (one ModifyListView for all of them). Every lookup is answered at once
// all the same (its VM's details are read directly).
func TestFollowInterval(t *testing.T) {
	e := setup(t)
	fc := clocktesting.NewFakeClock(time.Now())
	inv := newInventory(t, e, inventory.Options{MaxWait: time.Second, StaleAfter: time.Hour, EagerDetailsMax: -1, FollowInterval: time.Minute, Clock: fc})
	vc := e.fleet.VCenter("vc-a")
	ix := inv.Index("vc-a")
	vms := vc.VMs
	if len(vms) < 4 {
		t.Fatalf("%d VMs in vc-a, want 4", len(vms))
	}
	vc.RecordRequests()
	modifies := func() int { return calls(vc, "ModifyListView") }
	followed := func(vm int) func() bool {
		return func() bool {
			d, ok := ix.VM(vms[vm].Ref)
			return ok && d.PowerState == types.VirtualMachinePowerStatePoweredOff
		}
	}
	powerOff := func(vm int) {
		task, err := object.NewVirtualMachine(vc.Admin(), vms[vm].Ref).PowerOff(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Wait(e.ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The first VM asked for is followed at once.
	if _, err := inv.FindByUUID(e.ctx, vms[0].UUID); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "first VM in the list view", func() bool { return modifies() == 1 })
	powerOff(0)
	poll.True(t, "first VM followed", followed(0))

	// Three more within the interval: answered at once, followed together.
	for _, vm := range vms[1:4] {
		got, err := inv.FindByUUID(e.ctx, vm.UUID)
		if err != nil || got.PowerState != types.VirtualMachinePowerStatePoweredOn {
			t.Fatalf("lookup of %s within the interval: %+v, %v", vm.Name, got, err)
		}
	}
	// The sync point: the interval's end is all that is waited for (a
	// poll that ends on its own adds nothing before it either).
	poll.True(t, "waiting for the interval", fc.HasWaiters)
	if n := modifies(); n != 1 {
		t.Errorf("%d list view changes within the interval, want 1", n)
	}
	fc.Step(time.Minute)
	poll.True(t, "the three added in one change", func() bool { return modifies() == 2 })
	for _, i := range []int{1, 2, 3} {
		powerOff(i)
		poll.True(t, vms[i].Name+" followed", followed(i))
	}
	if n := modifies(); n != 2 {
		t.Errorf("%d list view changes, want 2", n)
	}
}

// TestListViewEnterIsNoChange: a VM looked up has its details read
// directly, then joins the list view of followed VMs, whose enter brings
// the same details: no change, so Changed does not fire (the node-topology
// controller re-observes every Node on a change, and a registration storm
// grows the list view again and again). A change of the VM afterwards
// fires it.
func TestListViewEnterIsNoChange(t *testing.T) {
	e := setup(t)
	inv := newInventory(t, e, inventory.Options{MaxWait: time.Second, StaleAfter: time.Hour, EagerDetailsMax: -1})
	vc := e.fleet.VCenter("vc-a")
	ix := inv.Index("vc-a")
	vm := vc.VMs[0]
	vc.RecordRequests()
	changed := ix.Changed()
	if _, err := inv.FindByUUID(e.ctx, vm.UUID); err != nil {
		t.Fatal(err)
	}
	// The sync point: the first long poll after the list view changed
	// returns the enter; the one after it starts once it is applied.
	pollsAfterModify := func() int {
		n, seen := 0, false
		for _, r := range vc.Requests() {
			switch {
			case bytes.Contains(r.Body, []byte("<ModifyListView")):
				seen = true
			case seen && bytes.Contains(r.Body, []byte("<WaitForUpdatesEx")):
				n++
			}
		}
		return n
	}
	poll.True(t, "the list view's enter applied", func() bool { return pollsAfterModify() >= 2 })
	select {
	case <-changed:
		t.Fatal("Changed fired for the list view's enter of details already read")
	default:
	}
	task, err := object.NewVirtualMachine(vc.Admin(), vm.Ref).PowerOff(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(e.ctx); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "Changed fired for the power-off", func() bool {
		select {
		case <-changed:
			return true
		default:
			return false
		}
	})
	if got, ok := ix.VM(vm.Ref); !ok || got.PowerState != types.VirtualMachinePowerStatePoweredOff {
		t.Errorf("after the change: %+v, %v; want powered off", got, ok)
	}
}

// TestEagerFollowsATemplateMadeAVM: where every VM's details are followed
// (a vCenter of at most EagerDetailsMax VMs), a template is not, and once
// it is made a VM it is, without any lookup asking for it: its details
// arrive with the collector's updates.
func TestEagerFollowsATemplateMadeAVM(t *testing.T) {
	e := setup(t)
	vc := e.fleet.VCenter("vc-a")
	tmpl, other := vc.VMs[0], vc.VMs[1]
	vc.SetTemplate(tmpl.Ref, true)
	inv := newInventory(t, e, inventory.Options{MaxWait: time.Second, StaleAfter: time.Hour, FollowInterval: time.Millisecond})
	ix := inv.Index("vc-a")
	poll.True(t, "the details of a VM followed", func() bool { _, ok := ix.VM(other.Ref); return ok })
	// The index holds it as a template (no lookup finds it): not followed.
	if found, settled := inv.Peek(config.LookupUUID, tmpl.UUID); found || !settled {
		t.Fatalf("the template: found %v, settled %v; want not found, settled", found, settled)
	}
	vc.SetTemplate(tmpl.Ref, false)
	poll.True(t, "the details of the template made a VM followed", func() bool { _, ok := ix.VM(tmpl.Ref); return ok })
}
