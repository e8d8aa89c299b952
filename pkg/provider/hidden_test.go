package provider_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/events"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// noPermission asserts that InstanceExists keeps n because vCenter
// refused to read its VM's recorded reference, naming the VM.
func noPermission(t *testing.T, ctx context.Context, p *provider.Provider, n *v1.Node, vm vcsim.VM) {
	t.Helper()
	ok, err := p.InstanceExists(ctx, n)
	var np *inventory.NoPermissionError
	if ok || !errors.As(err, &np) {
		t.Fatalf("%s: InstanceExists = %v, %v; want an error with NoPermission", n.Name, ok, err)
	}
	if np.VCenter != vm.VCenter || np.Object != vm.Ref || np.Privilege != "System.Read" {
		t.Errorf("%s: NoPermission names vCenter %q, %s, %s; want %q, %s, System.Read", n.Name, np.VCenter, np.Object, np.Privilege, vm.VCenter, vm.Ref)
	}
}

// hiddenFromLookups waits until n's lookup no longer finds its VM.
func hiddenFromLookups(t *testing.T, ctx context.Context, p *provider.Provider, n *v1.Node) {
	t.Helper()
	poll.True(t, n.Name+"'s VM out of the index", func() bool {
		_, err := p.FindVM(ctx, n)
		return errors.Is(err, inventory.ErrNotFound)
	})
}

// TestHiddenVMIsNotGone: a VM the CCM's user can no longer see (gone from
// views and searches, NoPermission on a direct read of its reference)
// keeps its Node, with an error, a VMNotVisible event and a no_permission
// verdict; once destroyed (ManagedObjectNotFound on its reference), its
// Node is reported gone.
func TestHiddenVMIsNotGone(t *testing.T) {
	e := stretched(t, "", nil)
	p, rec, reg := observed(t, e)

	b := e.fleet.VCenter("vc-b")
	vm := b.VMs[0]
	n := initialized(vm)
	if ok, err := p.InstanceExists(e.ctx, n); !ok || err != nil {
		t.Fatalf("before: InstanceExists = %v, %v", ok, err)
	}
	b.Hide(vm.Ref)
	hiddenFromLookups(t, e.ctx, p, n)
	noPermission(t, e.ctx, p, n, vm)
	if got := events.Drain(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+provider.ReasonVMNotVisible+" ") || !strings.Contains(got[0], vm.Ref.Value) {
		t.Errorf("events %q; want one %s naming %s", got, provider.ReasonVMNotVisible, vm.Ref.Value)
	}
	if v := verdicts(t, reg, provider.VerdictNoPermission); v != 1 {
		t.Errorf("no_permission verdicts: %v, want 1", v)
	}

	// Hidden, then destroyed: vCenter says the reference does not exist.
	destroy(t, e.ctx, b, vm.Ref)
	if ok, err := p.InstanceExists(e.ctx, n); ok || err != nil {
		t.Errorf("after the hidden VM was destroyed: InstanceExists = %v, %v; want false, nil", ok, err)
	}
}

// TestHiddenBeforeStart: a CCM that starts while the VMs of a folder are
// hidden (and so never sees them) keeps their Nodes: its privilege check
// finds System.Read missing on the folder, so no VM is proven absent
// anywhere (a destroyed VM's Node is kept too, with the same error) until
// it is granted again; then the hidden VMs' Nodes are kept by the
// NoPermission on their recorded references, and the destroyed VM's Node
// is gone.
func TestHiddenBeforeStart(t *testing.T) {
	var hidden []vcsim.VM
	var folder types.ManagedObjectReference
	e := stretchedWith(t, "", "", nil, provider.Options{}, func(ctx context.Context, f *vcsim.Fleet) {
		a := f.VCenter("vc-a")
		folders, err := object.NewDatacenter(a.Admin(), a.Datacenter("dc-2")).Folders(ctx)
		must.OK(t, err)
		folder = folders.VmFolder.Reference()
		a.Hide(folder)
		for _, vm := range a.VMs {
			if vm.Datacenter == "dc-2" {
				hidden = append(hidden, vm)
			}
		}
	})
	if len(hidden) == 0 {
		t.Fatal("no VM in vc-a's dc-2")
	}
	a, ix := e.fleet.VCenter("vc-a"), e.p.Inventory().Index("vc-a")
	poll.True(t, "the privilege check", func() bool { return !ix.Privileges().CheckedAt.IsZero() })
	for _, n := range append([]*v1.Node{ghost("gone", absentUUID)}, initialized(hidden[0]), initialized(hidden[1])) {
		hiddenFromLookups(t, e.ctx, e.p, n)
		ok, err := e.p.InstanceExists(e.ctx, n)
		var pe *inventory.PrivilegeError
		if ok || !errors.As(err, &pe) || pe.Missing[0].Object != folder {
			t.Errorf("%s with dc-2's VM folder hidden: InstanceExists = %v, %v; want a PrivilegeError naming %s", n.Name, ok, err, folder)
		}
	}
	// Another VM of the same vCenter is unaffected.
	if ok, err := e.p.InstanceExists(e.ctx, initialized(a.VMs[0])); !ok || err != nil {
		t.Errorf("a visible VM: InstanceExists = %v, %v", ok, err)
	}

	// The folder's permission granted again, its VMs one by one not.
	a.Hide(refsOf(hidden)...)
	a.Unhide(folder)
	ix.CheckPrivileges(e.ctx)
	for _, vm := range hidden {
		noPermission(t, e.ctx, e.p, initialized(vm), vm)
	}
	if ok, err := e.p.InstanceExists(e.ctx, ghost("gone", absentUUID)); ok || err != nil {
		t.Errorf("a destroyed VM: InstanceExists = %v, %v; want false, nil", ok, err)
	}
}

func refsOf(vms []vcsim.VM) []types.ManagedObjectReference {
	out := make([]types.ManagedObjectReference, len(vms))
	for i, vm := range vms {
		out[i] = vm.Ref
	}
	return out
}

// TestUnrecordedIsKept: a Node whose VM no view or search finds, and that
// carries no record of its VM's reference (initialized by another CCM,
// its VM deleted before this CCM ever saw it), is kept, with an error, a
// VMReferenceUnrecorded event and an unrecorded verdict.
func TestUnrecordedIsKept(t *testing.T) {
	e := stretched(t, "", nil)
	p, rec, reg := observed(t, e)
	n := ghost("switched", absentUUID)
	delete(n.Labels, provider.LabelVM)
	ok, err := p.InstanceExists(e.ctx, n)
	var ue *provider.UnrecordedError
	if ok || !errors.As(err, &ue) {
		t.Fatalf("InstanceExists = %v, %v; want an UnrecordedError", ok, err)
	}
	if got := events.Drain(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+provider.ReasonVMReferenceUnrecorded+" ") {
		t.Errorf("events %q; want one %s", got, provider.ReasonVMReferenceUnrecorded)
	}
	if v := verdicts(t, reg, provider.VerdictUnrecorded); v != 1 {
		t.Errorf("unrecorded verdicts: %v, want 1", v)
	}
}

// TestRecordedReference: the record of a Node's VM is set at
// initialization and kept current by the node-topology controller's
// observation, on a Node another CCM initialized too.
func TestRecordedReference(t *testing.T) {
	e := stretched(t, "", nil)
	vm := e.fleet.VCenter("vc-b").VMs[1]
	md, err := e.p.InstanceMetadata(e.ctx, node(vm))
	must.OK(t, err)
	if got := md.AdditionalLabels[provider.LabelVM]; got != vm.Ref.Value {
		t.Errorf("initialization: %s = %q, want %q", provider.LabelVM, got, vm.Ref.Value)
	}
	byReference := node(vm) // initialized by the reference CCM: a providerID, none of this CCM's labels
	byReference.Spec.ProviderID = "vsphere://" + vm.UUID
	obs, err := e.p.Observe(e.ctx, byReference)
	must.OK(t, err)
	want := map[string]string{provider.LabelVM: vm.Ref.Value, provider.LabelVCenter: "vc-b"}
	got := map[string]string{}
	for _, d := range obs.PlacementLabels {
		got[d.Label] = d.Now
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("observation of a Node the reference initialized: %s = %q, want %q (all: %v)", k, got[k], v, obs.PlacementLabels)
		}
	}
	// Its topology cannot be resolved (two zone tags on its cluster): the
	// record is written all the same.
	c := e.fleet.VCenter("vc-c")
	must.OK(t, c.Tag(e.ctx, "k8s-zone", "zone-other", c.VMs[0].ClusterRef))
	conflicted := node(c.VMs[0])
	conflicted.Spec.ProviderID = "vsphere://" + c.VMs[0].UUID
	p, err := provider.New(e.p.Config(), provider.Options{}) // reads the tags afresh
	must.OK(t, err)
	must.OK(t, p.Start(e.ctx, nil))
	defer p.Close()
	must.OK(t, p.WaitForSync(e.ctx))
	obs, err = p.Observe(e.ctx, conflicted)
	if err == nil {
		t.Error("a tag conflict: no error")
	}
	if got := map[string]string{}; err != nil {
		for _, d := range obs.PlacementLabels {
			got[d.Label] = d.Now
		}
		if got[provider.LabelVM] != c.VMs[0].Ref.Value || got[provider.LabelVCenter] != "vc-c" || len(got) != 2 {
			t.Errorf("a VM whose topology cannot be resolved: record %v, want %s in vc-c and nothing else (%v)", got, c.VMs[0].Ref.Value, err)
		}
	}
	// Recorded: nothing more to write.
	obs, err = e.p.Observe(e.ctx, initialized(vm))
	must.OK(t, err)
	for _, d := range obs.PlacementLabels {
		if d.Label == provider.LabelVM || d.Label == provider.LabelVCenter {
			t.Errorf("a recorded Node: %s to be written again: %+v", d.Label, d)
		}
	}
}

// observed is a second provider on e's fleet whose events and metrics
// the test reads.
func observed(t *testing.T, e *env) (*provider.Provider, *record.FakeRecorder, metrics.KubeRegistry) {
	t.Helper()
	rec := record.NewFakeRecorder(10)
	m := provider.NewMetrics()
	reg := registry(t, m)
	p, err := provider.New(e.p.Config(), provider.Options{Events: eventsTo(rec), Metrics: m})
	must.OK(t, err)
	must.OK(t, p.Start(e.ctx, nil))
	t.Cleanup(p.Close)
	must.OK(t, p.WaitForSync(e.ctx))
	return p, rec, reg
}

// verdicts is the count of one verdict of vsphere_ccm_vm_absence_verdicts_total.
func verdicts(t *testing.T, reg metrics.KubeRegistry, verdict string) float64 {
	t.Helper()
	families, err := reg.Gather()
	must.OK(t, err)
	for _, f := range families {
		if f.GetName() != "vsphere_ccm_vm_absence_verdicts_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "verdict" && l.GetValue() == verdict {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

func destroy(t *testing.T, ctx context.Context, v *vcsim.VCenter, ref types.ManagedObjectReference) {
	t.Helper()
	vm := object.NewVirtualMachine(v.Admin(), ref)
	if task, err := vm.PowerOff(ctx); err == nil {
		_ = task.Wait(ctx)
	}
	task, err := vm.Destroy(ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(ctx))
}

// TestPrivilegeCheck: the check of the CCM user's privileges names a
// datacenter folder whose permission was removed (the folder itself is
// hidden, so it is named from its datacenter), the metric counts it, and
// while it is missing no VM of that vCenter is proven absent; granted
// again, the check is clean and a destroyed VM's Node is gone again.
func TestPrivilegeCheck(t *testing.T) {
	m := provider.NewMetrics()
	reg := registry(t, m)
	e := stretchedWith(t, "", "", nil, provider.Options{Metrics: m})
	a := e.fleet.VCenter("vc-a")
	ix := e.p.Inventory().Index("vc-a")
	if p := ix.CheckPrivileges(e.ctx); p.Err != nil || len(p.Missing) != 0 || p.CheckedAt.IsZero() {
		t.Fatalf("before: %+v; want a clean check", p)
	}
	folders, err := object.NewDatacenter(a.Admin(), a.Datacenter("dc-2")).Folders(e.ctx)
	must.OK(t, err)
	vmFolder := folders.VmFolder.Reference()
	a.Hide(vmFolder)
	p := ix.CheckPrivileges(e.ctx)
	if p.Err != nil || len(p.Missing) != 1 || p.Missing[0].Object != vmFolder || p.Missing[0].Name != "dc-2/vm" || p.Missing[0].Privilege != "System.Read" {
		t.Fatalf("with dc-2's VM folder hidden: %+v; want System.Read missing on it (dc-2/vm)", p)
	}
	m.Refresh(e.p)
	if got := gauge(t, reg, "vsphere_ccm_vcenter_missing_privileges", "vc-a"); got != 1 {
		t.Errorf("vsphere_ccm_vcenter_missing_privileges{vcenter=vc-a} = %v, want 1", got)
	}
	if ex := e.p.Explain(e.ctx, provider.ExplainOptions{}); len(ex.MissingPrivileges) != 1 || !strings.Contains(ex.MissingPrivileges[0], "vc-a: System.Read on folder dc-2/vm") {
		t.Errorf("explain: missing privileges %q", ex.MissingPrivileges)
	}
	ue := unproven(t, e, ghost("gone", absentUUID))
	var pe *inventory.PrivilegeError
	if !errors.As(ue, &pe) || pe.VCenter != "vc-a" || !strings.Contains(ue.Error(), "dc-2/vm") {
		t.Errorf("with a privilege missing: %v; want a PrivilegeError naming dc-2/vm", ue)
	}

	a.Unhide(vmFolder)
	if p := ix.CheckPrivileges(e.ctx); p.Err != nil || len(p.Missing) != 0 {
		t.Fatalf("granted again: %+v; want a clean check", p)
	}
	if ok, err := e.p.InstanceExists(e.ctx, ghost("gone", absentUUID)); ok || err != nil {
		t.Errorf("granted again: InstanceExists = %v, %v; want false, nil", ok, err)
	}
}
