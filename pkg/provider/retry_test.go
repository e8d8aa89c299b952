package provider_test

import (
	"slices"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestRetryDue: a Node is due for a retry of its initialization only
// after InstanceMetadata failed for it, and only once its VM can be
// looked up: not while its vCenter is down (its VM is known there, but
// the vCenter cannot answer), at once when the vCenter is back. Each
// failure is returned once; a Node never tried, or whose initialization
// succeeded, is never due; a Node whose VM exists nowhere is not due
// until the inventories make progress; a Node no longer waiting is
// forgotten.
func TestRetryDue(t *testing.T) {
	e := stretched(t, "", nil)
	a, b := e.fleet.VCenter("vc-a"), e.fleet.VCenter("vc-b")
	inA, inB, notTried := node(a.VMs[0]), node(b.VMs[0]), node(b.VMs[1])
	nowhere := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nowhere"}, Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: absentUUID}}}
	if _, err := e.p.InstanceMetadata(e.ctx, nowhere); err == nil {
		t.Fatal("InstanceMetadata of a Node whose VM exists nowhere succeeded")
	}
	waiting := []*v1.Node{inA, inB, notTried, nowhere}
	due := func() []string {
		var out []string
		for _, n := range e.p.RetryDue(waiting) {
			out = append(out, n.Name)
		}
		return out
	}

	must.OK(t, b.SetMode(vcsim.Down))
	cb, err := e.p.Pool().Client("vc-b")
	must.OK(t, err)
	poll.True(t, "vc-b down", func() bool { return cb.Health().State == vcenter.Down })
	if _, err := e.p.InstanceMetadata(e.ctx, inB); err == nil {
		t.Fatal("InstanceMetadata of a Node in a vCenter that is down succeeded")
	}
	if _, err := e.p.InstanceMetadata(e.ctx, inA); err != nil {
		t.Fatalf("InstanceMetadata of a Node in vc-a: %v", err)
	}
	if got := due(); len(got) != 0 {
		t.Errorf("due while vc-b is down: %v, want none (%s: no progress since it failed)", got, nowhere.Name)
	}

	must.OK(t, b.SetMode(vcsim.Up))
	var got []string
	poll.True(t, "the Node of vc-b due once vc-b is back", func() bool {
		got = due()
		return len(got) > 0
	})
	if !slices.Equal(got, []string{inB.Name, nowhere.Name}) {
		t.Errorf("due once vc-b is back: %v, want %s and %s (%s succeeded, %s was never tried)", got, inB.Name, nowhere.Name, inA.Name, notTried.Name)
	}
	if again := due(); len(again) != 0 {
		t.Errorf("due again without a new failure: %v", again)
	}
	if _, err := e.p.InstanceMetadata(e.ctx, inB); err != nil {
		t.Errorf("InstanceMetadata once vc-b is back: %v", err)
	}

	// A failure of a Node that is no longer waiting is forgotten.
	must.OK(t, b.SetMode(vcsim.Down))
	poll.True(t, "vc-b down again", func() bool { return cb.Health().State == vcenter.Down })
	if _, err := e.p.InstanceMetadata(e.ctx, inB); err == nil {
		t.Fatal("InstanceMetadata succeeded with vc-b down")
	}
	waiting = []*v1.Node{inA}
	_ = due()
	waiting = []*v1.Node{inA, inB}
	must.OK(t, b.SetMode(vcsim.Up))
	poll.True(t, "vc-b current again", func() bool {
		ok, _, _ := e.p.Inventory().Index("vc-b").Status()
		return ok
	})
	if got := due(); len(got) != 0 {
		t.Errorf("due after it stopped waiting: %v, want none", got)
	}
}

// TestRetryDueWhenItsVMAppears: a Node whose VM existed nowhere when its
// initialization failed is due once a VM with its BIOS UUID enters a
// vCenter's scope (created after the Node registered, or moved into the
// configured datacenters), not only at the next inventory progress of
// another kind; its initialization then succeeds.
func TestRetryDueWhenItsVMAppears(t *testing.T) {
	e := stretched(t, "", nil)
	a := e.fleet.VCenter("vc-a")
	late := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: absentUUID}}}
	waiting := []*v1.Node{late}
	failQuietly(t, e, late)
	// (That another VM entering does not make it due is TestFailedInitsTake's
	// and finds'; here the start's own progress could not be told apart.)
	ref, err := a.Clone(e.ctx, a.VMs[0].Ref, "late", absentUUID)
	must.OK(t, err)
	poll.True(t, "the Node due once its VM entered vc-a", func() bool { return len(e.p.RetryDue(waiting)) == 1 })
	// Its guest reports its host name and address once VMware Tools runs.
	a.SetGuest(ref, "late", []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{"10.99.0.1"}, Connected: true,
		DeviceConfigId: 4000, MacAddress: "00:50:56:99:00:01"}})
	var md *cloudprovider.InstanceMetadata
	poll.True(t, "InstanceMetadata once its VM exists", func() bool {
		md, err = e.p.InstanceMetadata(e.ctx, late)
		return err == nil
	})
	if want := "vsphere://" + absentUUID; md.ProviderID != want {
		t.Errorf("providerID %q, want %q", md.ProviderID, want)
	}
}

// TestRetryDueDecides: after inventory progress, a failed Node is due
// when its lookup can be answered, found or settled; after VMs became
// findable and nothing else, only when its lookup found no VM (found
// nowhere, or a vCenter could not answer) and now finds one: a Node whose VM exists nowhere is not retried at
// every VM created elsewhere, and one that failed with its VM found
// (ambiguous, no address, no zone) is not retried for VMs at all. A Node
// no lookup of this provider can answer (another cloud's providerID) is
// never due.
func TestRetryDueDecides(t *testing.T) {
	e := stretched(t, "", nil)
	a, b := e.fleet.VCenter("vc-a"), e.fleet.VCenter("vc-b")
	withID := func(name, id string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: id}}
	}
	for _, c := range []struct {
		node *v1.Node
		// due after progress; after arrivals only, had its lookup found no
		// VM, and had it failed otherwise
		afterProgress, afterOnlyMissed, afterOnlyOther bool
	}{
		{node(a.VMs[0]), true, true, false},
		{withID("by-id", "vsphere://"+b.VMs[1].UUID), true, true, false},
		{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nowhere"}, Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: absentUUID}}}, true, false, false},
		{withID("gone", "vsphere://"+absentUUID), true, false, false},
		{withID("foreign", "aws:///us-east-1a/i-0123456789abcdef0"), false, false, false},
	} {
		if got := e.p.Due(c.node, true, false); got != c.afterProgress {
			t.Errorf("%s after progress: due %v, want %v", c.node.Name, got, c.afterProgress)
		}
		if got := e.p.Due(c.node, false, true); got != c.afterOnlyMissed {
			t.Errorf("%s after arrivals only, its lookup having found no VM: due %v, want %v", c.node.Name, got, c.afterOnlyMissed)
		}
		if got := e.p.Due(c.node, false, false); got != c.afterOnlyOther {
			t.Errorf("%s after arrivals only, failed otherwise: due %v, want %v", c.node.Name, got, c.afterOnlyOther)
		}
	}
}

// failQuietly fails node's initialization (its VM is found nowhere) until
// no inventory progress followed the failure: the start's progress (first
// reads, tags) may come after it, and make it due once.
func failQuietly(t *testing.T, e *env, node *v1.Node) {
	t.Helper()
	for i := 0; ; i++ {
		if _, err := e.p.InstanceMetadata(e.ctx, node); err == nil {
			t.Fatalf("InstanceMetadata of %s succeeded; its VM should be found nowhere", node.Name)
		}
		if len(e.p.RetryDue([]*v1.Node{node})) == 0 {
			return
		}
		if i == 100 {
			t.Fatal("the inventories never stopped making progress")
		}
	}
}

// TestRetryDueWhenItsVMBecomesFindable: a Node whose VM could not be
// found when its initialization failed is due as soon as its vCenter
// reports a VM it now finds, though no VM entered the scope: a template
// made a VM again, a VM renamed to the Node's name (nodes.lookupOrder
// ends with vmName). Not after the next resync, or the node
// controller's back-off. Its initialization then succeeds.
func TestRetryDueWhenItsVMBecomesFindable(t *testing.T) {
	for _, c := range []struct {
		name   string
		hide   func(a *vcsim.VCenter, vm vcsim.VM) *v1.Node // makes vm unfindable for the Node it returns
		reveal func(t *testing.T, e *env, a *vcsim.VCenter, vm vcsim.VM)
	}{
		{"template made a VM",
			func(a *vcsim.VCenter, vm vcsim.VM) *v1.Node { a.SetTemplate(vm.Ref, true); return node(vm) },
			func(_ *testing.T, _ *env, a *vcsim.VCenter, vm vcsim.VM) { a.SetTemplate(vm.Ref, false) }},
		{"VM renamed to the Node's name",
			func(*vcsim.VCenter, vcsim.VM) *v1.Node {
				return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "renamed"}, Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: absentUUID}}}
			},
			func(t *testing.T, e *env, a *vcsim.VCenter, vm vcsim.VM) {
				task, err := object.NewVirtualMachine(a.Admin(), vm.Ref).Rename(e.ctx, "renamed")
				must.OK(t, err)
				must.OK(t, task.Wait(e.ctx))
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := stretched(t, "", nil)
			a := e.fleet.VCenter("vc-a")
			vm := a.VMs[1]
			n := c.hide(a, vm)
			poll.True(t, "the VM not found", func() bool {
				_, err := e.p.InstanceMetadata(e.ctx, n)
				return err != nil
			})
			failQuietly(t, e, n)
			c.reveal(t, e, a, vm)
			// Other progress (tags read again) may make it due before its
			// VM is findable: it then fails again, and is due again once
			// the VM is.
			var md *cloudprovider.InstanceMetadata
			poll.True(t, "the Node due, and initialized, once its VM is findable", func() bool {
				if len(e.p.RetryDue([]*v1.Node{n})) == 0 {
					return false
				}
				var err error
				md, err = e.p.InstanceMetadata(e.ctx, n)
				return err == nil
			})
			if want := "vsphere://" + vm.UUID; md.ProviderID != want {
				t.Errorf("providerID %q, want %q", md.ProviderID, want)
			}
		})
	}
}
