package provider_test

import (
	"context"
	"errors"
	"testing"

	"github.com/vmware/govmomi/vim25/methods"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// absentUUID is a BIOS UUID no simulated VM has.
const absentUUID = "4299ffff-0000-4000-8000-0000000000aa"

// TestDeletionOnlyOnProof: a Node is reported gone only when its BIOS UUID
// is in no vCenter and every vCenter is connected and fully read.
func TestDeletionOnlyOnProof(t *testing.T) {
	e := stretched(t, "", nil)
	byName := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "renamed-vm"}} // no providerID, no systemUUID yet
	bySystemUUID := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "renamed-vm-2"},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: absentUUID}}}
	byProviderID := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + absentUUID}}
	existing := node(e.fleet.VCenter("vc-b").VMs[0])

	cases := []struct {
		name     string
		node     *v1.Node
		want     bool
		unproven bool
	}{
		{"a miss by VM name alone is no proof", byName, false, true},
		{"systemUUID absent everywhere is proof", bySystemUUID, false, false},
		{"providerID absent everywhere is proof", byProviderID, false, false},
		{"an existing VM exists", existing, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, err := e.p.InstanceExists(e.ctx, c.node)
			var ue *provider.UnprovenAbsenceError
			switch {
			case c.unproven && !errors.As(err, &ue):
				t.Errorf("InstanceExists = %v, %v; want an UnprovenAbsenceError", ok, err)
			case !c.unproven && (ok != c.want || err != nil):
				t.Errorf("InstanceExists = %v, %v; want %v, nil", ok, err, c.want)
			}
		})
	}

	// One vCenter down: nothing is proven, nothing is deleted.
	b := e.fleet.VCenter("vc-b")
	if err := b.SetMode(vcsim.Down); err != nil {
		t.Fatal(err)
	}
	cb, _ := e.p.Pool().Client("vc-b")
	poll.True(t, "vc-b down", func() bool {
		_ = cb.Do(e.ctx, func(ctx context.Context, s *vcenter.Session) error {
			_, err := methods.GetCurrentTime(ctx, s.VIM)
			return err
		})
		return cb.Health().State == vcenter.Down
	})
	for _, n := range []*v1.Node{byProviderID, bySystemUUID, existing} {
		if ok, err := e.p.InstanceExists(e.ctx, n); err == nil {
			t.Errorf("%s with vc-b down: InstanceExists = %v, nil; want an error (nothing is proven)", n.Name, ok)
		}
	}
	if err := b.SetMode(vcsim.Up); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "vc-b usable again", func() bool {
		complete, _, _ := e.p.Inventory().Index("vc-b").Status()
		return complete
	})
	if ok, err := e.p.InstanceExists(e.ctx, byProviderID); ok || err != nil {
		t.Errorf("after vc-b returned: InstanceExists = %v, %v; want false, nil", ok, err)
	}
}

// TestDeletionNever: with nodes.deletion never, a proven-gone VM keeps
// its Node.
func TestDeletionNever(t *testing.T) {
	e := stretched(t, "labels:\n  zone: k8s-zone\n  region: k8s-region\nnodes:\n  deletion: never\n", nil)
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + absentUUID}}
	if ok, err := e.p.InstanceExists(e.ctx, n); !ok || err != nil {
		t.Errorf("InstanceExists = %v, %v; want true, nil", ok, err)
	}
}
