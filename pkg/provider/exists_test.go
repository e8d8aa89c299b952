package provider_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/events"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
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
	byProviderID := ghost("gone", absentUUID)
	bareUUID := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: v1.NodeSpec{ProviderID: absentUUID}}
	existing := node(e.fleet.VCenter("vc-b").VMs[0])
	existingBare := node(e.fleet.VCenter("vc-b").VMs[1])
	existingBare.Spec.ProviderID = strings.ToUpper(e.fleet.VCenter("vc-b").VMs[1].UUID)

	cases := []struct {
		name     string
		node     *v1.Node
		want     bool
		unproven bool
	}{
		{"a miss by VM name alone is no proof", byName, false, true},
		{"no providerID: not this provider's Node, whatever its systemUUID (bare metal in a hybrid cluster)", bySystemUUID, false, true},
		{"providerID absent everywhere is proof", byProviderID, false, false},
		{"a bare-UUID providerID is read, but never proof", bareUUID, false, true},
		{"an existing VM exists", existing, true, false},
		{"an existing VM exists by a bare-UUID providerID, as the reference reads it", existingBare, true, false},
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
	for _, n := range []*v1.Node{byProviderID, existing} {
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

// TestSkipNodeDeletion: with SKIP_NODE_DELETION set (any value), a
// proven-gone VM is an error, as the reference answers, so its Node is
// kept; a VM that exists still exists.
func TestSkipNodeDeletion(t *testing.T) {
	e := stretched(t, "", nil)
	cfg, _, err := config.Parse("test.yaml", []byte(e.fleet.Config("labels:\n  zone: k8s-zone\n", nil)),
		config.Options{Env: []string{"SKIP_NODE_DELETION=false"}})
	must.OK(t, err)
	p, err := provider.New(cfg, provider.Options{})
	must.OK(t, err)
	must.OK(t, p.Start(e.ctx, nil))
	defer p.Close()
	must.OK(t, p.WaitForSync(e.ctx))
	gone := ghost("gone", absentUUID)
	if ok, err := p.InstanceExists(e.ctx, gone); ok || err == nil || !strings.Contains(err.Error(), "SKIP_NODE_DELETION") {
		t.Errorf("gone with SKIP_NODE_DELETION: InstanceExists = %v, %v; want false and an error naming it", ok, err)
	}
	if ok, err := p.InstanceExists(e.ctx, node(e.fleet.VMs()[0])); !ok || err != nil {
		t.Errorf("existing VM: InstanceExists = %v, %v", ok, err)
	}
}

// TestDeletionNever: with nodes.deletion never, a proven-gone VM keeps
// its Node.
func TestDeletionNever(t *testing.T) {
	e := stretched(t, "labels:\n  zone: k8s-zone\n  region: k8s-region\nnodes:\n  deletion: never\n", nil)
	n := ghost("gone", absentUUID)
	if ok, err := e.p.InstanceExists(e.ctx, n); !ok || err != nil {
		t.Errorf("InstanceExists = %v, %v; want true, nil", ok, err)
	}
}

// unproven asserts that InstanceExists keeps the Node: an error, never
// (false, nil). It returns the error.
func unproven(t *testing.T, e *env, n *v1.Node) error {
	t.Helper()
	ok, err := e.p.InstanceExists(e.ctx, n)
	if err == nil {
		t.Fatalf("%s: InstanceExists = %v, nil; want an error (the Node must be kept)", n.Name, ok)
	}
	return err
}

// TestUnreadableIdentityProvesNothing: a VM whose identity cannot be read
// (config unset, as vSphere reports a VM whose files are unreachable; or
// its connection state inaccessible, orphaned or invalid) may be any
// Node's VM: its vCenter cannot prove absence, the metric counts it and
// topology explain says so.
func TestUnreadableIdentityProvesNothing(t *testing.T) {
	m := provider.NewMetrics()
	reg := registry(t, m)
	e := stretchedWith(t, "", "", nil, provider.Options{Metrics: m})
	b := e.fleet.VCenter("vc-b")
	vm := b.VMs[0]
	n := node(vm)
	n.Spec.ProviderID = "vsphere://" + vm.UUID
	if ok, err := e.p.InstanceExists(e.ctx, n); !ok || err != nil {
		t.Fatalf("before: InstanceExists = %v, %v", ok, err)
	}
	ix := e.p.Inventory().Index("vc-b")

	b.SetUUID(vm.Ref, "") // config.uuid unset: its files are unreachable
	poll.True(t, "the VM counted as unreadable", func() bool { return len(ix.Unreadable()) == 1 })
	ue := unproven(t, e, n)
	var ur *inventory.UnreadableError
	if !errors.As(ue, &ur) || ur.VCenter != "vc-b" || ur.VMs[0].Name != vm.Name || ur.VMs[0].Reason != inventory.UnreadableNoUUID {
		t.Errorf("the error does not name the unreadable VM: %v", ue)
	}
	m.Refresh(e.p)
	if got := gauge(t, reg, "vsphere_ccm_inventory_unreadable_vms", "vc-b"); got != 1 {
		t.Errorf("vsphere_ccm_inventory_unreadable_vms{vcenter=vc-b} = %v, want 1", got)
	}
	if ex := e.p.Explain(e.ctx, provider.ExplainOptions{}); len(ex.Unprovable) != 1 || !strings.Contains(ex.Unprovable[0], vm.Name) {
		t.Errorf("explain: unprovable = %q", ex.Unprovable)
	}

	// Its identity back: the VM exists again.
	b.SetUUID(vm.Ref, vm.UUID)
	poll.True(t, "the VM readable again", func() bool { return len(ix.Unreadable()) == 0 })
	if ok, err := e.p.InstanceExists(e.ctx, n); !ok || err != nil {
		t.Fatalf("identity back: InstanceExists = %v, %v", ok, err)
	}

	// Another VM of vc-b inaccessible: no UUID is proven absent anywhere.
	gone := ghost("gone", absentUUID)
	for _, st := range []types.VirtualMachineConnectionState{types.VirtualMachineConnectionStateInaccessible,
		types.VirtualMachineConnectionStateOrphaned, types.VirtualMachineConnectionStateInvalid} {
		b.SetConnectionState(b.VMs[1].Ref, st)
		poll.True(t, "the VM counted as unreadable", func() bool { return len(ix.Unreadable()) == 1 })
		unproven(t, e, gone)
	}
	b.SetConnectionState(b.VMs[1].Ref, types.VirtualMachineConnectionStateConnected)
	poll.True(t, "the VM readable again", func() bool { return len(ix.Unreadable()) == 0 })
	if ok, err := e.p.InstanceExists(e.ctx, gone); ok || err != nil {
		t.Errorf("all readable: InstanceExists = %v, %v; want false, nil", ok, err)
	}
}

// TestVCenterNotConfigured: a Node whose labels name a vCenter, or a
// datacenter of a vCenter, that is not (or no longer) in the config is
// never proven gone: its VM may still be there. An event says why.
func TestVCenterNotConfigured(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	e := stretchedWith(t, "", "", map[string][]string{"vc-a": {"datacenters: [dc-1]"}}, provider.Options{Events: eventsTo(rec)})
	cases := []struct {
		name   string
		labels map[string]string
	}{
		{"vCenter removed from the config", map[string]string{provider.LabelVCenter: "vc-removed", provider.LabelDatacenter: "dc-1"}},
		{"datacenter removed from the vCenter's list", map[string]string{provider.LabelVCenter: "vc-a", provider.LabelDatacenter: "dc-2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-" + c.labels[provider.LabelVCenter], Labels: c.labels},
				Spec: v1.NodeSpec{ProviderID: "vsphere://" + absentUUID}}
			ue := unproven(t, e, n)
			var nc *provider.NotConfiguredError
			if !errors.As(ue, &nc) {
				t.Errorf("want a NotConfiguredError: %v", ue)
			}
			if got := events.Drain(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+provider.ReasonVCenterNotConfigured+" ") {
				t.Errorf("events = %q, want one %s", got, provider.ReasonVCenterNotConfigured)
			}
		})
	}
	// Labels naming a configured vCenter and datacenter: proven as before.
	n := ghost("n", absentUUID)
	n.Labels[provider.LabelDatacenter] = "dc-1"
	if ok, err := e.p.InstanceExists(e.ctx, n); ok || err != nil {
		t.Errorf("configured vCenter and datacenter: InstanceExists = %v, %v; want false, nil", ok, err)
	}
}

// TestLiveCheckBeforeGone: a VM the indexes do not show (here: in a
// datacenter outside the config) but vCenter has keeps its Node.
func TestLiveCheckBeforeGone(t *testing.T) {
	e := stretchedWith(t, "", "", map[string][]string{"vc-a": {"datacenters: [dc-1]"}}, provider.Options{})
	var outside vcsim.VM
	for _, vm := range e.fleet.VCenter("vc-a").VMs {
		if vm.Datacenter == "dc-2" {
			outside = vm
		}
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "moved"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + outside.UUID}}
	ue := unproven(t, e, n)
	var ee *inventory.ExistsError
	if !errors.As(ue, &ee) || ee.Ref != outside.Ref.Value {
		t.Errorf("want an ExistsError naming %s: %v", outside.Ref.Value, ue)
	}
}

// TestSilentVCenter: a vCenter that stops answering on its open
// connections (TCP kept, nothing comes back) stops proving absence within
// the inventory's staleness bound, long before the request timeout.
func TestSilentVCenter(t *testing.T) {
	e := stretchedWith(t, "global:\n  connectTimeout: 5s\n  requestTimeout: 10m\n", "", nil,
		provider.Options{InventoryMaxWait: time.Second})
	gone := ghost("gone", absentUUID)
	if ok, err := e.p.InstanceExists(e.ctx, gone); ok || err != nil {
		t.Fatalf("before: InstanceExists = %v, %v; want false, nil", ok, err)
	}
	b := e.fleet.VCenter("vc-b")
	must.OK(t, b.SetMode(vcsim.Silent))
	// The Node's VM moves into vc-b (here: gets the UUID) while vc-b is
	// silent: at once, before the index is stale, the live check keeps it.
	b.SetUUID(b.VMs[0].Ref, absentUUID)
	unproven(t, e, gone)
	ix := e.p.Inventory().Index("vc-b")
	poll.True(t, "vc-b's index stale", func() bool {
		_, _, err := ix.Status()
		return errors.Is(err, inventory.ErrStale)
	})
	cb, _ := e.p.Pool().Client("vc-b")
	if h := cb.Health(); h.State == vcenter.Down {
		t.Errorf("vc-b is %s: the staleness bound, not the request timeout, must notice a silent vCenter", h.State)
	}
	unproven(t, e, gone)
	must.OK(t, b.SetMode(vcsim.Up))
	poll.True(t, "vc-b current again", func() bool {
		ok, _, _ := ix.Status()
		return ok
	})
	// The VM is there: found (a real vCenter re-sends the change from the
	// collector's version), or, where the index missed it (the simulator
	// drops changes whose long-poll answer was lost), kept by the live
	// check. Never reported gone.
	if ok, err := e.p.InstanceExists(e.ctx, gone); !ok && err == nil {
		t.Errorf("vc-b answering again: InstanceExists = false, nil; its VM is there")
	}
}

// TestAbsenceWithNodesElsewhere: while any Node is labelled with a vCenter
// that is not configured, no VM is proven absent: the VM not found may
// have moved there (a cross-vCenter vMotion, then that vCenter removed
// from the config: found by the fault soak). Once no such Node remains,
// absence is proven again.
func TestAbsenceWithNodesElsewhere(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 1})
	must.OK(t, err)
	defer f.Close()
	cfg, _, err := config.Parse("t.yaml", []byte(f.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 3s\n", nil)), config.Options{})
	must.OK(t, err)
	gone := ghost("gone", "4211aaaa-0000-4000-8000-0000000000ff")
	elsewhere := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Labels: map[string]string{provider.LabelVCenter: "vc-removed"}}}
	kube := fake.NewClientset(gone, elsewhere)
	p, err := provider.New(cfg, provider.Options{})
	must.OK(t, err)
	must.OK(t, p.Start(ctx, kube))
	defer p.Close()
	must.OK(t, p.WaitForSync(ctx))

	ok, err := p.InstanceExists(ctx, gone)
	var nc *provider.NotConfiguredError
	if ok || !errors.As(err, &nc) || !nc.Other || nc.VCenter != "vc-removed" {
		t.Fatalf("with a Node labelled with an unconfigured vCenter: InstanceExists = %v, %v; want an unproven absence naming it", ok, err)
	}
	must.OK(t, kube.CoreV1().Nodes().Delete(ctx, "elsewhere", metav1.DeleteOptions{}))
	if ok, err := p.InstanceExists(ctx, gone); ok || err != nil {
		t.Errorf("no such Node left: InstanceExists = %v, %v; want false, nil (gone)", ok, err)
	}
}

func TestErrorsNeverMeanGone(t *testing.T) {
	e := stretched(t, "", nil)
	a, b, c := e.fleet.VCenter("vc-a"), e.fleet.VCenter("vc-b"), e.fleet.VCenter("vc-c")

	// Duplicate BIOS UUID in two vCenters: an error naming both, never a pick.
	dup := a.VMs[0]
	b.SetUUID(b.VMs[1].Ref, dup.UUID)
	n := node(dup)
	n.Spec.ProviderID = "vsphere://" + dup.UUID
	poll.True(t, "ambiguity", func() bool {
		_, err := e.p.InstanceMetadata(e.ctx, n)
		return errors.Is(err, inventory.ErrAmbiguous)
	})
	if ok, err := e.p.InstanceExists(e.ctx, n); ok || err == nil || !strings.Contains(err.Error(), "vc-b/dc-1/"+b.VMs[1].Name) {
		t.Errorf("InstanceExists on a duplicate: %v, %v", ok, err)
	}

	// Conflicting zone tags: an error naming the object and the tags.
	must.OK(t, c.Tag(e.ctx, "k8s-zone", "zone-other", c.VMs[0].ClusterRef))
	must.OK(t, e.p.Topology().Cache("vc-c").Refresh(e.ctx))
	_, err := e.p.InstanceMetadata(e.ctx, node(c.VMs[0]))
	if err == nil || !strings.Contains(err.Error(), "zone-other") || !strings.Contains(err.Error(), c.VMs[0].Cluster) {
		t.Errorf("conflicting tags: %v", err)
	}

	// vc-a goes down: its nodes error, never "gone"; the others work.
	must.OK(t, a.SetMode(vcsim.Down))
	ca, _ := e.p.Pool().Client("vc-a")
	poll.True(t, "vc-a down", func() bool {
		_, _ = e.p.InstanceExists(e.ctx, ghost("probe", "4299ffff-0000-4000-8000-000000000000"))
		return ca.Health().State == vcenter.Down
	})
	for _, vm := range e.fleet.VMs() {
		if vm.Name == dup.Name || vm.Ref == b.VMs[1].Ref && vm.VCenter == "vc-b" {
			continue
		}
		n := node(vm)
		n.Spec.ProviderID = "vsphere://" + vm.UUID
		ok, err := e.p.InstanceExists(e.ctx, n)
		if vm.VCenter == "vc-a" {
			// Known but not askable: an error, never "gone", never stale data.
			if err == nil || ok || !errors.Is(err, vcenter.ErrUnavailable) {
				t.Errorf("%s of the down vCenter: %v, %v; want an ErrUnavailable error", vm.Name, ok, err)
			}
			if _, err := e.p.InstanceMetadata(e.ctx, n); err == nil {
				t.Errorf("%s: metadata served while its vCenter is down", vm.Name)
			}
			continue
		}
		if !ok || err != nil {
			t.Errorf("%s during vc-a's outage: %v, %v", vm.Name, ok, err)
		}
	}
	gone := ghost("gone", "4299ffff-0000-4000-8000-000000000001")
	if ok, err := e.p.InstanceExists(e.ctx, gone); ok || err == nil || !errors.Is(err, vcenter.ErrUnavailable) {
		t.Errorf("unknown VM while vc-a is down: %v, %v; want an error, never false", ok, err)
	}
	must.OK(t, a.SetMode(vcsim.Up))
	poll.True(t, "definitive answer after recovery", func() bool {
		ok, err := e.p.InstanceExists(e.ctx, gone)
		return !ok && err == nil
	})
}
