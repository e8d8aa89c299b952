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
	rec := record.NewFakeRecorder(10)
	m := provider.NewMetrics()
	reg := registry(t, m)
	p, err := provider.New(e.p.Config(), provider.Options{Events: eventsTo(rec), Metrics: m})
	must.OK(t, err)
	must.OK(t, p.Start(e.ctx, nil))
	defer p.Close()
	must.OK(t, p.WaitForSync(e.ctx))

	b := e.fleet.VCenter("vc-b")
	vm := b.VMs[0]
	n := initialized(vm)
	if ok, err := p.InstanceExists(e.ctx, n); !ok || err != nil {
		t.Fatalf("before: InstanceExists = %v, %v", ok, err)
	}
	b.Hide(vm.Ref)
	hiddenFromLookups(t, e.ctx, p, n)
	noPermission(t, e.ctx, p, n, vm)
	if got := drainEvents(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+provider.ReasonVMNotVisible+" ") || !strings.Contains(got[0], vm.Ref.Value) {
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
// hidden (and so never sees them) keeps their Nodes by the reference
// recorded by an earlier process.
func TestHiddenBeforeStart(t *testing.T) {
	var hidden []vcsim.VM
	e := stretchedWith(t, "", "", nil, provider.Options{}, func(ctx context.Context, f *vcsim.Fleet) {
		a := f.VCenter("vc-a")
		folders, err := object.NewDatacenter(a.Admin(), a.Datacenter("dc-2")).Folders(ctx)
		must.OK(t, err)
		a.Hide(folders.VmFolder.Reference())
		for _, vm := range a.VMs {
			if vm.Datacenter == "dc-2" {
				hidden = append(hidden, vm)
			}
		}
	})
	if len(hidden) == 0 {
		t.Fatal("no VM in vc-a's dc-2")
	}
	for _, vm := range hidden {
		n := initialized(vm)
		hiddenFromLookups(t, e.ctx, e.p, n)
		noPermission(t, e.ctx, e.p, n, vm)
	}
	// Another VM of the same vCenter is unaffected, found or gone.
	if ok, err := e.p.InstanceExists(e.ctx, initialized(e.fleet.VCenter("vc-a").VMs[0])); !ok || err != nil {
		t.Errorf("a visible VM: InstanceExists = %v, %v", ok, err)
	}
	if ok, err := e.p.InstanceExists(e.ctx, ghost("gone", absentUUID)); ok || err != nil {
		t.Errorf("a destroyed VM: InstanceExists = %v, %v; want false, nil", ok, err)
	}
}

// TestUnrecordedIsKept: a Node whose VM no view or search finds, and that
// carries no record of its VM's reference (initialized by another CCM,
// its VM deleted before this CCM ever saw it), is kept, with an error, a
// VMReferenceUnrecorded event and an unrecorded verdict.
func TestUnrecordedIsKept(t *testing.T) {
	e := stretched(t, "", nil)
	rec := record.NewFakeRecorder(10)
	m := provider.NewMetrics()
	reg := registry(t, m)
	p, err := provider.New(e.p.Config(), provider.Options{Events: eventsTo(rec), Metrics: m})
	must.OK(t, err)
	must.OK(t, p.Start(e.ctx, nil))
	defer p.Close()
	must.OK(t, p.WaitForSync(e.ctx))
	n := ghost("switched", absentUUID)
	delete(n.Labels, provider.LabelVM)
	ok, err := p.InstanceExists(e.ctx, n)
	var ue *provider.UnrecordedError
	if ok || !errors.As(err, &ue) {
		t.Fatalf("InstanceExists = %v, %v; want an UnrecordedError", ok, err)
	}
	if got := drainEvents(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+provider.ReasonVMReferenceUnrecorded+" ") {
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
	// Recorded: nothing more to write.
	obs, err = e.p.Observe(e.ctx, initialized(vm))
	must.OK(t, err)
	for _, d := range obs.PlacementLabels {
		if d.Label == provider.LabelVM || d.Label == provider.LabelVCenter {
			t.Errorf("a recorded Node: %s to be written again: %+v", d.Label, d)
		}
	}
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

func drainEvents(rec *record.FakeRecorder) []string {
	var got []string
	for {
		select {
		case ev := <-rec.Events:
			got = append(got, ev)
		default:
			return got
		}
	}
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
