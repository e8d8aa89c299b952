package nodetopology_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	vimtypes "github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/notify"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// fakeSource answers Observe from a table and records every Report on a
// channel, so that tests wait for exactly what they expect.
type fakeSource struct {
	changed   notify.Notifier
	recovered notify.Notifier
	waiting   []string
	mu        sync.Mutex
	obs       map[string]provider.Observation
	err       map[string]error
	reports   chan report
	forgot    chan string
	power     map[string]provider.PowerProof
	liveOn    map[string]bool // ConfirmPoweredOff finds these powered on
	oos       chan oosReport
}

type oosReport struct {
	node     string
	added    bool
	unproven bool
}

type report struct {
	node       string
	drift      int
	relabelled bool
}

func newFakeSource() *fakeSource {
	return &fakeSource{obs: map[string]provider.Observation{}, err: map[string]error{},
		reports: make(chan report, 100), forgot: make(chan string, 10),
		power: map[string]provider.PowerProof{}, liveOn: map[string]bool{}, oos: make(chan oosReport, 100)}
}

func (f *fakeSource) Changed() <-chan struct{} { return f.changed.C() }

func (f *fakeSource) Observe(_ context.Context, n *v1.Node) (provider.Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.obs[n.Name], f.err[n.Name]
}

func (f *fakeSource) Report(n *v1.Node, obs provider.Observation, relabelled bool) {
	f.reports <- report{node: n.Name, drift: len(obs.Drift), relabelled: relabelled}
}

func (f *fakeSource) Forget(node string) { f.forgot <- node }

func (f *fakeSource) Recovered() <-chan struct{} { return f.recovered.C() }

func (f *fakeSource) Waiting() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.waiting...)
}

func (f *fakeSource) Initialized(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waiting = slices.DeleteFunc(f.waiting, func(n string) bool { return n == node })
}

func (f *fakeSource) Power(_ context.Context, n *v1.Node) (provider.PowerProof, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pw, ok := f.power[n.Name]
	if !ok {
		return pw, errors.New("no such VM")
	}
	return pw, nil
}

func (f *fakeSource) ReportOutOfService(n *v1.Node, added bool, _ string) {
	f.oos <- oosReport{node: n.Name, added: added}
}

func (f *fakeSource) ReportOutOfServiceUnproven(n *v1.Node, _ string) {
	select {
	case f.oos <- oosReport{node: n.Name, unproven: true}:
	default: // the resync repeats it; tests read only the first
	}
}

func (f *fakeSource) ConfirmPoweredOff(_ context.Context, n *v1.Node, _ inventory.VM) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pw := f.power[n.Name]; pw.VM.PowerState != vimtypes.VirtualMachinePowerStatePoweredOff || f.liveOn[n.Name] {
		return errors.New("not powered off now")
	}
	return nil
}

func (f *fakeSource) TrackOutOfService(string, bool) {}

func (f *fakeSource) setPower(node string, pw provider.PowerProof) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.power[node] = pw
}

func (f *fakeSource) set(node string, obs provider.Observation, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.obs[node], f.err[node] = obs, err
}

func (f *fakeSource) next(t *testing.T) report {
	t.Helper()
	select {
	case r := <-f.reports:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no report")
		return report{}
	}
}

func drift(node string) []provider.Drift {
	return []provider.Drift{{Node: node, Label: v1.LabelTopologyZone, Labelled: "a", Now: "b"}}
}

// start runs a controller on a fake API with the given Nodes; the resync
// ticks only when the fake clock is stepped.
func start(t *testing.T, src *fakeSource, relabel func(context.Context, kubernetes.Interface, []provider.Drift) error, nodes ...string) (*fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var objs []any
	for _, n := range nodes {
		objs = append(objs, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	kube := fake.NewClientset()
	for _, o := range objs {
		if _, err := kube.CoreV1().Nodes().Create(ctx, o.(*v1.Node), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	factory := informers.NewSharedInformerFactory(kube, 0)
	c, err := nodetopology.New(kube, factory.Core().V1().Nodes(), src, nodetopology.Options{Resync: time.Minute, Clock: clk, Relabel: relabel})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return kube, clk
}

// TestObservedOnChange: each Node is observed once at start, again on every
// change notification and every resync tick, and not otherwise.
func TestObservedOnChange(t *testing.T) {
	src := newFakeSource()
	_, clk := start(t, src, nil, "n1", "n2")
	seen := map[string]bool{}
	for range 2 {
		seen[src.next(t).node] = true
	}
	if !seen["n1"] || !seen["n2"] {
		t.Fatalf("at start: %v", seen)
	}
	src.set("n1", provider.Observation{Drift: drift("n1")}, nil)
	src.changed.Notify()
	got := map[string]int{}
	for range 2 {
		r := src.next(t)
		got[r.node] = r.drift
	}
	if got["n1"] != 1 || got["n2"] != 0 {
		t.Errorf("after a change: drift per node %v", got)
	}
	// The resync: a minute on the fake clock.
	poll.True(t, "the resync timer set", clk.HasWaiters)
	clk.Step(time.Minute)
	for range 2 {
		src.next(t)
	}
}

// TestRelabel: with the relabel policy a drifted Node is patched, then
// reported as relabelled; a failed patch is reported as drift and retried.
func TestRelabel(t *testing.T) {
	src := newFakeSource()
	src.set("n1", provider.Observation{Drift: drift("n1"), Relabel: true}, nil)
	var mu sync.Mutex
	calls := 0
	relabel := func(_ context.Context, _ kubernetes.Interface, list []provider.Drift) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return errors.New("conflict")
		}
		return nil
	}
	_, clk := start(t, src, relabel, "n1")
	if r := src.next(t); r.relabelled || r.drift != 1 {
		t.Errorf("failed patch: %+v, want drift reported", r)
	}
	// The retry's back-off runs on the controller's clock.
	var r report
	poll.True(t, "the retry", func() bool {
		clk.Step(time.Second)
		select {
		case r = <-src.reports:
			return true
		default:
			return false
		}
	})
	if !r.relabelled {
		t.Errorf("retry: %+v, want relabelled", r)
	}
}

// TestLookupErrorsLeftToTheFramework: a Node whose VM cannot be found is
// not reported (the framework's controllers report lookup errors); a
// deleted Node is forgotten.
func TestLookupErrorsLeftToTheFramework(t *testing.T) {
	src := newFakeSource()
	src.set("n1", provider.Observation{}, errors.New("vCenter down"))
	kube, _ := start(t, src, nil, "n1", "n2")
	if r := src.next(t); r.node != "n2" {
		t.Errorf("reported %+v, want only n2", r)
	}
	if err := kube.CoreV1().Nodes().Delete(context.Background(), "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-src.forgot:
		if n != "n2" {
			t.Errorf("forgot %s", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("deleted Node not forgotten")
	}
	select {
	case r := <-src.reports:
		t.Errorf("unexpected report %+v", r)
	default:
	}
}

// TestRetryWaiting: when a vCenter is back, the Nodes waiting for
// initialization whose lookup failed are annotated (the framework's node
// controller then retries them at once); an initialized Node leaves the
// waiting list untouched.
func TestRetryWaiting(t *testing.T) {
	src := newFakeSource()
	src.waiting = []string{"waits", "done"}
	_, ctx := ktesting.NewTestContext(t)
	kube, _ := start(t, src, nil)
	for _, n := range []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "waits"}, Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "done"}},
	} {
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Both observed once: the informer has them.
	for range 2 {
		src.next(t)
	}
	src.recovered.Notify()
	// One pass over the waiting list does both, in no particular order.
	poll.True(t, "the retry annotation, and the initialized Node off the waiting list", func() bool {
		n, err := kube.CoreV1().Nodes().Get(ctx, "waits", metav1.GetOptions{})
		return err == nil && n.Annotations[provider.AnnotationRetry] != "" && slices.Equal(src.Waiting(), []string{"waits"})
	})
	if n, err := kube.CoreV1().Nodes().Get(ctx, "done", metav1.GetOptions{}); err != nil || n.Annotations[provider.AnnotationRetry] != "" {
		t.Errorf("the initialized Node was annotated: %v %v", err, n.Annotations)
	}
}

// oosStart is when the out-of-service tests' fake clock starts and their
// Nodes became NotReady.
var oosStart = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// notReadyNode is an initialized Node NotReady since oosStart.
func notReadyNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + name},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionUnknown, LastTransitionTime: metav1.NewTime(oosStart)}}}}
}

// powerProof is a VM of vc-a in the given power state.
func powerProof(ref string, st vimtypes.VirtualMachinePowerState, proven bool) provider.PowerProof {
	return provider.PowerProof{Proven: proven, VM: inventory.VM{VCenter: "vc-a", Name: ref,
		Ref: vimtypes.ManagedObjectReference{Type: "VirtualMachine", Value: ref}, PowerState: st}}
}

// startOutOfService runs a controller with the out-of-service policy
// (NotReady 1 minute, powered off 30 s) on kube, its clock at oosStart.
func startOutOfService(t *testing.T, kube *fake.Clientset, src *fakeSource) (context.Context, *clocktesting.FakeClock) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	clk := clocktesting.NewFakeClock(oosStart)
	factory := informers.NewSharedInformerFactory(kube, 0)
	c, err := nodetopology.New(kube, factory.Core().V1().Nodes(), src, nodetopology.Options{Resync: time.Hour, Clock: clk,
		OutOfService: config.OutOfService{Enabled: true, NotReadyFor: time.Minute, PoweredOffFor: 30 * time.Second}})
	must.OK(t, err)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return ctx, clk
}

// TestOutOfService drives the out-of-service policy with a fake clock: a
// NotReady Node whose VM is proven powered off is tainted once both grace
// periods have passed on the clock, and untainted when the VM powers on
// again; an unproven power state (a vCenter outage) adds nothing.
func TestOutOfService(t *testing.T) {
	kube := fake.NewClientset(notReadyNode("off"), notReadyNode("blind"))
	src := newFakeSource()
	src.setPower("off", powerProof("vm-1", vimtypes.VirtualMachinePowerStatePoweredOff, true))
	src.setPower("blind", powerProof("vm-2", vimtypes.VirtualMachinePowerStatePoweredOff, false))
	ctx, clk := startOutOfService(t, kube, src)

	tainted := func(name string) bool {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		must.OK(t, err)
		return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool {
			return t.Key == v1.TaintNodeOutOfService && t.Value == "nodeshutdown" && t.Effect == v1.TaintEffectNoExecute
		}) && n.Annotations[nodetopology.AnnotationOutOfService] != ""
	}
	// The clock moves only when stepped: until a minute has passed on it
	// nothing may be tainted, then "off" is (its re-check is queued on the
	// clock), and "blind" is reported unproven instead.
	poll.True(t, "the taint added once the grace periods passed", func() bool {
		if tainted("off") && clk.Since(oosStart) < time.Minute {
			t.Fatalf("tainted after %v on the clock, before notReadyFor", clk.Since(oosStart))
		}
		clk.Step(5 * time.Second)
		return tainted("off")
	})
	got := map[oosReport]bool{}
	for len(got) < 2 {
		select {
		case r := <-src.oos:
			got[r] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("reports so far: %v", got)
		}
	}
	if !got[oosReport{node: "off", added: true}] || !got[oosReport{node: "blind", unproven: true}] {
		t.Errorf("reports %v, want off added and blind unproven", got)
	}
	if tainted("blind") {
		t.Errorf("a Node whose VM's power state is unproven was tainted")
	}

	// Powered on: the taint goes (an inventory change brings the Node back).
	src.setPower("off", powerProof("vm-1", vimtypes.VirtualMachinePowerStatePoweredOn, true))
	src.changed.Notify()
	poll.True(t, "the taint removed", func() bool { return !tainted("off") })
	for r := range src.oos {
		if r == (oosReport{node: "off"}) {
			break
		}
	}
}

// TestOutOfServiceSafety: the live check before the taint overrules the
// index (a VM powered on since: no taint, reported unproven), and removing
// the CCM's taint leaves an operator's out-of-service taint in place.
func TestOutOfServiceSafety(t *testing.T) {
	stale := notReadyNode("stale")
	operator := notReadyNode("operator")
	ours, theirs := metav1.NewTime(oosStart.Add(-time.Hour)), metav1.NewTime(oosStart.Add(-time.Minute))
	operator.Annotations = map[string]string{nodetopology.AnnotationOutOfService: ours.UTC().Format(time.RFC3339)}
	operator.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute, TimeAdded: &theirs}}
	kube := fake.NewClientset(stale, operator)
	src := newFakeSource()
	src.setPower("stale", powerProof("vm-1", vimtypes.VirtualMachinePowerStatePoweredOff, true))
	src.liveOn["stale"] = true
	src.setPower("operator", powerProof("vm-2", vimtypes.VirtualMachinePowerStatePoweredOn, true))
	ctx, clk := startOutOfService(t, kube, src)

	get := func(name string) *v1.Node {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		must.OK(t, err)
		return n
	}
	poll.True(t, "the annotation of the CCM's (gone) taint removed", func() bool {
		_, ok := get("operator").Annotations[nodetopology.AnnotationOutOfService]
		return !ok
	})
	if n := get("operator"); len(n.Spec.Taints) != 1 || !n.Spec.Taints[0].TimeAdded.Equal(&theirs) {
		t.Errorf("the operator's taint was touched: %+v", n.Spec.Taints)
	}
	// stale: the index says off, vCenter says on: the clock passes both
	// grace periods, the live check refuses, and it is reported.
	poll.True(t, "the live check's refusal reported", func() bool {
		clk.Step(5 * time.Second)
		select {
		case r := <-src.oos:
			return r == oosReport{node: "stale", unproven: true}
		default:
			return false
		}
	})
	if n := get("stale"); len(n.Spec.Taints) != 0 {
		t.Errorf("tainted although vCenter said the VM is on: %+v", n.Spec.Taints)
	}
}

// TestPlacementPatched: placement labels that no longer match the VM are
// patched, whatever labels.onDrift says; an empty value removes the label.
func TestPlacementPatched(t *testing.T) {
	src := newFakeSource()
	src.set("n1", provider.Observation{PlacementLabels: []provider.Drift{
		{Node: "n1", Label: provider.LabelHost, Labelled: "esx-1", Now: "esx-2"},
		{Node: "n1", Label: provider.LabelHostGroup, Labelled: "site-a", Now: ""}}}, nil)
	kube, _ := start(t, src, nil, "n1")
	_, err := kube.CoreV1().Nodes().Patch(context.Background(), "n1", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"vsphere.vsphere-ccm.io/host":"esx-1","vsphere.vsphere-ccm.io/host-group":"site-a"}}}`), metav1.PatchOptions{})
	must.OK(t, err)
	poll.True(t, "the placement labels patched", func() bool {
		n, err := kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		_, group := n.Labels[provider.LabelHostGroup]
		return err == nil && n.Labels[provider.LabelHost] == "esx-2" && !group
	})
}

// TestZoneMoveTaint: with labels.onDrift: taint a drifted Node is tainted
// NoSchedule; once an operator removes the taint it is not added again for
// the same move; when the drift is gone the record goes too.
func TestZoneMoveTaint(t *testing.T) {
	src := newFakeSource()
	src.set("n1", provider.Observation{Drift: drift("n1"), Taint: true}, nil)
	kube, _ := start(t, src, nil, "n1")
	get := func() *v1.Node {
		n, err := kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		must.OK(t, err)
		return n
	}
	tainted := func(n *v1.Node) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool {
			return t.Key == nodetopology.TaintZoneMoved && t.Effect == v1.TaintEffectNoSchedule
		})
	}
	poll.True(t, "the zone-move taint", func() bool { return tainted(get()) })
	for len(src.reports) > 0 {
		<-src.reports
	}
	// The operator accepts the move: removes the taint.
	n := get()
	n.Spec.Taints = nil
	_, err := kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	must.OK(t, err)
	// The controller looks at the Node again (its taints changed) and
	// reports: by then it has decided.
	poll.True(t, "the Node checked after the operator's change", func() bool {
		select {
		case <-src.reports:
			return true
		default:
			return false
		}
	})
	if n := get(); tainted(n) || n.Annotations[nodetopology.AnnotationZoneMoved] == "" {
		t.Errorf("after the operator removed the taint: taints %v, annotations %v; want no taint, the move recorded", n.Spec.Taints, n.Annotations)
	}
	// The VM moved back: no drift, the record goes.
	src.set("n1", provider.Observation{Taint: true}, nil)
	src.changed.Notify()
	poll.True(t, "the record removed", func() bool { _, ok := get().Annotations[nodetopology.AnnotationZoneMoved]; return !ok })
}
