package nodetopology_test

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	vimtypes "github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/notify"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/events"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// fakeSource answers Observe from a table and sends the name of every
// Node it is asked to observe on a channel, so that tests wait for exactly
// the observations they expect. What the controller does with them is
// seen in its events, metrics and Node writes.
type fakeSource struct {
	changed   notify.Notifier
	recovered notify.Notifier
	observed  chan *v1.Node // the Nodes observed, as the lister gave them
	mu        sync.Mutex
	obs       map[string]provider.Observation
	err       map[string]error
	power     map[string]provider.PowerProof
	liveOn    map[string]bool   // ConfirmPoweredOff finds these powered on
	outside   map[string]error  // InScope's answers
	due       map[string]bool   // RetryDue returns these, once each
	asked     chan []string     // the waiting Nodes of each RetryDue pass
	byName    map[string]string // Preview finds these Nodes' VMs by name: another UUID
}

func newFakeSource() *fakeSource {
	return &fakeSource{obs: map[string]provider.Observation{}, err: map[string]error{}, observed: make(chan *v1.Node, 1000),
		power: map[string]provider.PowerProof{}, liveOn: map[string]bool{}, outside: map[string]error{},
		due: map[string]bool{}, asked: make(chan []string, 100)}
}

func (f *fakeSource) RetryDue(waiting []*v1.Node) []*v1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	var out []*v1.Node
	for _, n := range waiting {
		names = append(names, n.Name)
		if f.due[n.Name] {
			delete(f.due, n.Name)
			out = append(out, n)
		}
	}
	slices.Sort(names)
	f.asked <- names
	return out
}

// retryPass waits for the next RetryDue pass and returns the names of
// the waiting Nodes it was given, stepping clk by the pace until it
// comes (the pass may wait for the pause after the previous one, which
// may not have begun yet).
func (f *fakeSource) retryPass(t *testing.T, clk *clocktesting.FakeClock) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case names := <-f.asked:
			return names
		case <-time.After(10 * time.Millisecond):
			clk.Step(time.Second)
		case <-deadline:
			t.Fatal("no retry pass")
			return nil
		}
	}
}

func (f *fakeSource) Changed() <-chan struct{} { return f.changed.C() }

func (f *fakeSource) Recovered() <-chan struct{} { return f.recovered.C() }

func (f *fakeSource) Observe(_ context.Context, n *v1.Node) (provider.Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observed <- n.DeepCopy()
	return f.obs[n.Name], f.err[n.Name]
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

func (f *fakeSource) ConfirmPoweredOff(_ context.Context, n *v1.Node, _ inventory.VM) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pw := f.power[n.Name]; pw.VM.PowerState != vimtypes.VirtualMachinePowerStatePoweredOff || f.liveOn[n.Name] {
		return errors.New("not powered off now")
	}
	return nil
}

func (f *fakeSource) Preview(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.err[n.Name]; err != nil {
		return nil, err
	}
	if _, ok := f.obs[n.Name]; !ok {
		return nil, fmt.Errorf("node %s: %w", n.Name, inventory.ErrNotFound)
	}
	// The VM found: by the Node's machine UUID, unless byName says another.
	id := "vsphere://" + strings.ToLower(n.Status.NodeInfo.SystemUUID)
	if other, ok := f.byName[n.Name]; ok {
		id = "vsphere://" + other
	}
	return &cloudprovider.InstanceMetadata{ProviderID: id}, nil
}

func (f *fakeSource) InScope(n *v1.Node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outside[n.Name]
}

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

// next waits for the next observation and returns the Node's name.
func (f *fakeSource) next(t *testing.T) string {
	t.Helper()
	return f.nextNode(t).Name
}

// nextNode waits for the next observation and returns the Node observed.
func (f *fakeSource) nextNode(t *testing.T) *v1.Node {
	t.Helper()
	select {
	case n := <-f.observed:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no observation")
		return nil
	}
}

func drift(node string) []provider.Drift {
	return []provider.Drift{{Node: node, VCenter: "vc-a", Label: v1.LabelTopologyZone, Labelled: "a", Now: "b"}}
}

// env is a running controller's surroundings.
type env struct {
	kube *fake.Clientset
	clk  *clocktesting.FakeClock
	ev   *events.Recorder // what the shared recorder sent
	reg  metrics.KubeRegistry
}

// drifted is the drift gauge of vc-a.
func (e env) drifted(t *testing.T) string {
	t.Helper()
	return metricValue(t, e.reg, "vsphere_ccm_nodes_topology_drifted", "vc-a")
}

// metricValue is a series' value as text ("" when absent).
func metricValue(t *testing.T, reg metrics.KubeRegistry, name string, labels ...string) string {
	t.Helper()
	families, err := reg.Gather()
	must.OK(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i, l := range m.GetLabel() {
				if i >= len(labels) || l.GetValue() != labels[i] {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return fmt.Sprint(c.GetValue())
			}
			return fmt.Sprint(m.GetGauge().GetValue())
		}
	}
	return ""
}

// controllerOptions are the Options tests start with: the shared
// recorder sending to a test recorder, and metrics in a registry.
func controllerOptions(t *testing.T, o nodetopology.Options) (nodetopology.Options, *events.Recorder, metrics.KubeRegistry) {
	t.Helper()
	rec := events.NewRecorder(1000)
	ev := nodeevents.New(nil)
	ev.SetSink(rec)
	m := nodetopology.NewMetrics()
	reg := metrics.NewKubeRegistry()
	for _, c := range m.Collectors() {
		reg.MustRegister(c)
	}
	o.Events, o.Metrics, o.VCenters = ev, m, []string{"vc-a"}
	return o, rec, reg
}

// start runs a controller on a fake API with the given Nodes; the resync
// ticks only when the fake clock is stepped.
func start(t *testing.T, src *fakeSource, relabel func(context.Context, kubernetes.Interface, []provider.Drift) error, nodes ...string) env {
	t.Helper()
	return startWith(t, src, nodetopology.Options{Relabel: relabel}, nodes...)
}

// startWith is start with options (Resync, Clock set by it).
func startWith(t *testing.T, src *fakeSource, o nodetopology.Options, nodes ...string) env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	kube := fake.NewClientset()
	for _, n := range nodes {
		// Initialized Nodes, as the framework leaves them.
		if _, err := kube.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	o.Resync, o.Clock = time.Minute, clk
	opts, rec, reg := controllerOptions(t, o)
	factory := informers.NewSharedInformerFactory(kube, 0)
	c, err := nodetopology.New(kube, factory.Core().V1().Nodes(), src, opts)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return env{kube: kube, clk: clk, ev: rec, reg: reg}
}

// TestObservedOnChange: each Node is observed once at start, again on every
// change notification and every resync tick, and not otherwise; drift is
// an event and counts in the gauge until it is gone.
func TestObservedOnChange(t *testing.T) {
	src := newFakeSource()
	e := start(t, src, nil, "n1", "n2")
	seen := map[string]bool{}
	for range 2 {
		seen[src.next(t)] = true
	}
	if !seen["n1"] || !seen["n2"] {
		t.Fatalf("at start: %v", seen)
	}
	src.set("n1", provider.Observation{Drift: drift("n1")}, nil)
	src.changed.Notify()
	for range 2 {
		src.next(t)
	}
	if ev := e.ev.Wait(t, "n1", nodetopology.ReasonTopologyDrift); ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, "labels.onDrift: keep") {
		t.Errorf("drift event %+v", ev)
	}
	poll.True(t, "the drift gauge at 1", func() bool { return e.drifted(t) == "1" })
	// The resync: a minute on the fake clock. The drift is gone by then.
	src.set("n1", provider.Observation{}, nil)
	poll.True(t, "the resync timer set", e.clk.HasWaiters)
	e.clk.Step(time.Minute)
	for range 2 {
		src.next(t)
	}
	poll.True(t, "the drift gauge back at 0", func() bool { return e.drifted(t) == "0" })
	e.ev.None(t)
}

// TestRelabel: with the relabel policy a drifted Node is patched, with a
// TopologyRelabelled event; a failed patch is a TopologyDrift event and is
// retried on the controller's clock.
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
	e := start(t, src, relabel, "n1")
	e.ev.Wait(t, "n1", nodetopology.ReasonTopologyDrift)
	// The retry's back-off runs on the controller's clock.
	var got events.Event
	poll.True(t, "the retry", func() bool {
		e.clk.Step(time.Second)
		select {
		case got = <-e.ev.C:
			return true
		default:
			return false
		}
	})
	if got.Object != "n1" || got.Reason != nodetopology.ReasonTopologyRelabelled || got.Type != v1.EventTypeNormal {
		t.Errorf("retry: %+v, want n1 relabelled", got)
	}
	poll.True(t, "the drift gauge at 0 after the relabel", func() bool { return e.drifted(t) == "0" })
}

// TestLookupErrorsLeftToTheFramework: a Node whose VM cannot be found
// gets no event from the controller (the framework's controllers report
// lookup errors); a deleted Node's drift is forgotten.
func TestLookupErrorsLeftToTheFramework(t *testing.T) {
	src := newFakeSource()
	src.set("n1", provider.Observation{}, errors.New("vCenter down"))
	src.set("n2", provider.Observation{Drift: drift("n2")}, nil)
	e := start(t, src, nil, "n1", "n2")
	if ev := e.ev.Wait(t, "n2", nodetopology.ReasonTopologyDrift); ev.Object != "n2" {
		t.Errorf("event %+v", ev)
	}
	poll.True(t, "the drift gauge at 1", func() bool { return e.drifted(t) == "1" })
	if err := e.kube.CoreV1().Nodes().Delete(context.Background(), "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the deleted Node's drift forgotten", func() bool { return e.drifted(t) == "0" })
	e.ev.None(t)
}

// TestRetryWaiting: when a vCenter is back (or a first read has read
// another page), the provider is asked which of the Nodes still waiting
// for initialization (the framework's uninitialized taint) are due, and
// only those are annotated, so that the framework's node controller
// retries them at once; an initialized Node is not even asked about. A
// pass comes after the pace (RetryPace, on the controller's clock) when
// a signal came during the pause; an annotation that could not be
// written is tried again at the next pass, without a signal. A Node
// waiting for initialization is not observed.
func TestRetryWaiting(t *testing.T) {
	src := newFakeSource()
	_, ctx := ktesting.NewTestContext(t)
	e := start(t, src, nil)
	taint := []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}
	for _, n := range []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "waits"}, Spec: v1.NodeSpec{Taints: taint}},
		{ObjectMeta: metav1.ObjectMeta{Name: "not-due"}, Spec: v1.NodeSpec{Taints: taint}},
		{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Spec: v1.NodeSpec{ProviderID: "vsphere://done"}},
	} {
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Only the initialized Node is observed.
	if got := src.next(t); got != "done" {
		t.Fatalf("observed %s, want only the initialized Node", got)
	}
	src.mu.Lock()
	src.due["waits"] = true
	src.mu.Unlock()
	// Passes until the controller's lister has both waiting Nodes (each
	// signal after the first waits for the pace: the clock is stepped).
	var got []string
	for !slices.Equal(got, []string{"not-due", "waits"}) {
		src.recovered.Notify()
		got = src.retryPass(t, e.clk)
	}
	poll.True(t, "the retry annotation", func() bool {
		n, err := e.kube.CoreV1().Nodes().Get(ctx, "waits", metav1.GetOptions{})
		return err == nil && n.Annotations[nodetopology.AnnotationRetry] != ""
	})
	for _, name := range []string{"done", "not-due"} {
		if n, err := e.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil || n.Annotations[nodetopology.AnnotationRetry] != "" {
			t.Errorf("%s was annotated: %v %v", name, err, n.Annotations)
		}
	}
	// A Node due later whose annotation cannot be written at first: asked
	// for again at the next pass, which needs no signal.
	var failures atomic.Int32
	failures.Store(1)
	e.kube.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.(k8stesting.PatchAction).GetName() == "not-due" && failures.Add(-1) >= 0 {
			return true, nil, errors.New("injected: the API server is busy")
		}
		return false, nil, nil
	})
	src.mu.Lock()
	src.due["not-due"] = true
	src.mu.Unlock()
	src.recovered.Notify()
	src.retryPass(t, e.clk)
	src.retryPass(t, e.clk) // no signal: the unsent annotation alone
	poll.True(t, "the second Node's retry annotation", func() bool {
		n, err := e.kube.CoreV1().Nodes().Get(ctx, "not-due", metav1.GetOptions{})
		return err == nil && n.Annotations[nodetopology.AnnotationRetry] != ""
	})
}

// TestRetryInProcess: with the framework's node controller in this
// process (Options.Retry hands it the Node), a due Node is handed back
// without any Node write, and counted as such; when Retry cannot (the node
// controller runs elsewhere), the Node is annotated instead.
func TestRetryInProcess(t *testing.T) {
	src := newFakeSource()
	_, ctx := ktesting.NewTestContext(t)
	var inProcess atomic.Bool
	inProcess.Store(true)
	handed := make(chan string, 10)
	e := startWith(t, src, nodetopology.Options{Retry: func(n *v1.Node) bool {
		if !inProcess.Load() {
			return false
		}
		handed <- n.Name
		return true
	}}, "done")
	// Started: the initialized Node is observed.
	if got := src.next(t); got != "done" {
		t.Fatalf("observed %s, want done", got)
	}
	var patches atomic.Int32
	e.kube.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		patches.Add(1)
		return false, nil, nil
	})
	taint := []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}
	for _, name := range []string{"a", "b"} {
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: taint}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	src.mu.Lock()
	src.due["a"] = true
	src.mu.Unlock()
	for got := []string(nil); !slices.Equal(got, []string{"a", "b"}); {
		src.recovered.Notify()
		got = src.retryPass(t, e.clk)
	}
	if got := <-handed; got != "a" {
		t.Fatalf("handed back %s, want a", got)
	}
	if n := patches.Load(); n != 0 {
		t.Errorf("%d Node patches, want none: the retry needs no write", n)
	}
	// Counted right after the hand-back returns.
	poll.True(t, "one retry counted via informer", func() bool {
		return metricValue(t, e.reg, "vsphere_ccm_node_initialization_retries_total", "informer") == "1"
	})

	// The node controller elsewhere: the annotation.
	inProcess.Store(false)
	src.mu.Lock()
	src.due["b"] = true
	src.mu.Unlock()
	src.recovered.Notify()
	src.retryPass(t, e.clk)
	poll.True(t, "b's retry annotation", func() bool {
		n, err := e.kube.CoreV1().Nodes().Get(ctx, "b", metav1.GetOptions{})
		return err == nil && n.Annotations[nodetopology.AnnotationRetry] != ""
	})
	poll.True(t, "one retry counted via annotation", func() bool {
		return metricValue(t, e.reg, "vsphere_ccm_node_initialization_retries_total", "annotation") == "1"
	})
	if n, err := e.kube.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{}); err != nil || n.Annotations[nodetopology.AnnotationRetry] != "" {
		t.Errorf("a was annotated: %v %v", err, n.Annotations)
	}
}

// TestRetryRefused: a retry annotation the API server refuses for a
// reason that will not pass (403) is backed off per Node, not tried at
// every pass, and reported once as an event and a count; once accepted
// it is written.
func TestRetryRefused(t *testing.T) {
	src := newFakeSource()
	_, ctx := ktesting.NewTestContext(t)
	e := start(t, src, nil)
	taint := []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "refused"}, Spec: v1.NodeSpec{Taints: taint}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Passes until the controller's lister has the Node (not due yet:
	// nothing written); the fake API is then idle for the reactor.
	// signalled is the next pass, signalled until it comes (a signal
	// before the loop took its channel is not seen).
	signalled := func() []string {
		deadline := time.After(30 * time.Second)
		for {
			src.recovered.Notify()
			select {
			case names := <-src.asked:
				return names
			case <-time.After(10 * time.Millisecond):
				e.clk.Step(time.Second)
			case <-deadline:
				t.Fatal("no retry pass")
			}
		}
	}
	for !slices.Contains(signalled(), "refused") {
	}
	var attempts, refuse atomic.Int32
	refuse.Store(1)
	e.kube.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		attempts.Add(1)
		if refuse.Load() == 1 {
			return true, nil, apierrors.NewForbidden(v1.Resource("nodes"), action.(k8stesting.PatchAction).GetName(), errors.New("injected: no patch on nodes"))
		}
		return false, nil, nil
	})
	src.mu.Lock()
	src.due["refused"] = true
	src.mu.Unlock()
	// The next pass tries once and is refused.
	for attempts.Load() == 0 {
		signalled()
	}
	if ev := e.ev.Wait(t, "refused", "RetryRequestRefused"); ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, "Forbidden") {
		t.Errorf("event %+v", ev)
	}
	// Twenty more passes (the refused Node alone brings them, a pace
	// apart; the fake clock moves about a second each): without back-off
	// twenty patches, with it (1 s doubling) a handful.
	refusedAt := e.clk.Now()
	for range 20 {
		src.retryPass(t, e.clk)
	}
	// Back-off from 1 s doubling: within s seconds at most 1+log2(s+1)
	// more tries, however far the clock moved per pass.
	most := int32(2 + bits.Len(uint(e.clk.Since(refusedAt)/time.Second)))
	if n := attempts.Load(); n < 2 || n > most || n >= 21 {
		t.Errorf("%d patches in 21 passes over %v, want 2 to %d (backed off, still retried)", n, e.clk.Since(refusedAt), most)
	}
	e.ev.None(t) // reported once
	if v := metricValue(t, e.reg, "vsphere_ccm_node_retry_requests_refused_total", "Forbidden"); v != "1" {
		t.Errorf("refusals counted: %s", v)
	}
	// Accepted again (the RBAC fixed): written at a later pass.
	refuse.Store(0)
	// (A pass that writes it is the last: nothing is unsent after it, so
	// the clock is moved and the annotation looked for, without waiting
	// for a pass.)
	poll.True(t, "the retry annotation", func() bool {
		select {
		case <-src.asked:
		default:
		}
		e.clk.Step(time.Second)
		n, err := e.kube.CoreV1().Nodes().Get(ctx, "refused", metav1.GetOptions{})
		return err == nil && n.Annotations[nodetopology.AnnotationRetry] != ""
	})
}

// TestDeletionsHeld: Nodes labelled with a vCenter or datacenter that is
// not configured are counted by vCenter and datacenter, and the series
// goes when no Node names it.
func TestDeletionsHeld(t *testing.T) {
	src := newFakeSource()
	src.outside["old-1"] = &provider.NotConfiguredError{Node: "old-1", VCenter: "vc-old"}
	src.outside["old-2"] = &provider.NotConfiguredError{Node: "old-2", VCenter: "vc-old"}
	src.outside["dc"] = &provider.NotConfiguredError{Node: "dc", VCenter: "vc-a", Datacenter: "dc-9"}
	e := start(t, src, nil, "old-1", "old-2", "dc", "fine")
	held := func(vc, dc string) string {
		return metricValue(t, e.reg, "vsphere_ccm_node_deletions_held_nodes", dc, vc) // labels sorted by name
	}
	poll.True(t, "the held deletions counted", func() bool { return held("vc-old", "") == "2" && held("vc-a", "dc-9") == "1" })
	// The vCenter is configured again (a restart with the new config
	// asks again; here the next change does).
	src.mu.Lock()
	delete(src.outside, "old-1")
	delete(src.outside, "old-2")
	src.mu.Unlock()
	src.changed.Notify()
	poll.True(t, "the vCenter's series gone", func() bool { return held("vc-old", "") == "" && held("vc-a", "dc-9") == "1" })
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
func startOutOfService(t *testing.T, kube *fake.Clientset, src *fakeSource) (context.Context, *clocktesting.FakeClock, *events.Recorder) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	clk := clocktesting.NewFakeClock(oosStart)
	opts, rec, _ := controllerOptions(t, nodetopology.Options{Resync: time.Hour, Clock: clk,
		OutOfService: config.OutOfService{Enabled: true, NotReadyFor: time.Minute, PoweredOffFor: 30 * time.Second}})
	factory := informers.NewSharedInformerFactory(kube, 0)
	c, err := nodetopology.New(kube, factory.Core().V1().Nodes(), src, opts)
	must.OK(t, err)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return ctx, clk, rec
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
	ctx, clk, rec := startOutOfService(t, kube, src)

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
	got := rec.WaitAll(t, "off/"+nodetopology.ReasonOutOfServiceTaintAdded, "blind/"+nodetopology.ReasonOutOfServiceUnproven)
	if ev := got["off/"+nodetopology.ReasonOutOfServiceTaintAdded]; ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, "powered off") {
		t.Errorf("taint event %+v", ev)
	}
	if tainted("blind") {
		t.Errorf("a Node whose VM's power state is unproven was tainted")
	}

	// Powered on: the taint goes (an inventory change brings the Node back).
	src.setPower("off", powerProof("vm-1", vimtypes.VirtualMachinePowerStatePoweredOn, true))
	src.changed.Notify()
	poll.True(t, "the taint removed", func() bool { return !tainted("off") })
	if ev := rec.Wait(t, "off", nodetopology.ReasonOutOfServiceTaintRemoved); ev.Type != v1.EventTypeNormal {
		t.Errorf("removal event %+v", ev)
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
	ctx, clk, rec := startOutOfService(t, kube, src)

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
		case e := <-rec.C:
			return e.Object == "stale" && e.Reason == nodetopology.ReasonOutOfServiceUnproven && strings.Contains(e.Message, "live check")
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
	kube := start(t, src, nil, "n1").kube
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
	kube := start(t, src, nil, "n1").kube
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

	// The operator accepts the move: removes the taint.
	n := get()
	n.Spec.Taints = nil
	n.Annotations["test/operator"] = "removed the taint" // marks the operator's version
	_, err := kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	must.OK(t, err)
	// The controller looks at the Node again (its taints changed): wait
	// for the observation of the operator's version; a Node is never
	// synced by two workers at once, so once the next observation starts,
	// the decision about the operator's change is made.
	for n := src.nextNode(t); n.Annotations["test/operator"] == "" || len(n.Spec.Taints) > 0; n = src.nextNode(t) {
	}
	src.changed.Notify()
	src.next(t)
	if n := get(); tainted(n) || n.Annotations[nodetopology.AnnotationZoneMoved] == "" {
		t.Errorf("after the operator removed the taint: taints %v, annotations %v; want no taint, the move recorded", n.Spec.Taints, n.Annotations)
	}
	// The VM moved back: no drift, the record goes.
	src.set("n1", provider.Observation{Taint: true}, nil)
	src.changed.Notify()
	poll.True(t, "the record removed", func() bool { _, ok := get().Annotations[nodetopology.AnnotationZoneMoved]; return !ok })
}
