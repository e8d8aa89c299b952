package provider_test

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
