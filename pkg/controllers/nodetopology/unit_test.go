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

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/notify"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
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
}

type report struct {
	node       string
	drift      int
	relabelled bool
}

func newFakeSource() *fakeSource {
	return &fakeSource{obs: map[string]provider.Observation{}, err: map[string]error{},
		reports: make(chan report, 100), forgot: make(chan string, 10)}
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
	start(t, src, relabel, "n1")
	if r := src.next(t); r.relabelled || r.drift != 1 {
		t.Errorf("failed patch: %+v, want drift reported", r)
	}
	if r := src.next(t); !r.relabelled {
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
