package servingcsr

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// switchFacts are Facts that can be changed while the controller runs.
type switchFacts struct {
	mu    sync.Mutex
	facts fakeFacts
}

func (s *switchFacts) set(f fakeFacts) { s.mu.Lock(); s.facts = f; s.mu.Unlock() }

func (s *switchFacts) NodeVM(ctx context.Context, n *v1.Node) (VM, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.facts.NodeVM(ctx, n)
}

func (s *switchFacts) IPOwners(ctx context.Context, ip netip.Addr) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.facts.IPOwners(ctx, ip)
}

func (s *switchFacts) IPHolders(ctx context.Context, ip netip.Addr, notBefore time.Time) ([]Holder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.facts.IPHolders(ctx, ip, notBefore)
}

// notices fire on demand.
type notices struct {
	mu                 sync.Mutex
	changed, recovered chan struct{}
}

func newNotices() *notices {
	return &notices{changed: make(chan struct{}), recovered: make(chan struct{})}
}

func (n *notices) Changed() <-chan struct{} { n.mu.Lock(); defer n.mu.Unlock(); return n.changed }
func (n *notices) Recovered() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.recovered
}

func (n *notices) recover() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.recovered)
	n.recovered = make(chan struct{})
}

// TestController: requests that exist before the controller starts are
// decided (a list, not only new events); another signer's and decided
// requests are never written; a proven request is approved through the
// approval subresource, a disproven one denied, each with an event on
// the request and a count; one that cannot be told waits, unwritten,
// and is approved as soon as a vCenter recovers.
func TestController(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	node := func(name string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-00000000000" + name[len(name)-1:]}}
	}
	for_ := func(name, nodeName string, ip string, mut func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
		tmpl := template()
		tmpl.Subject.CommonName = "system:node:" + nodeName
		tmpl.DNSNames = []string{nodeName}
		tmpl.IPAddresses = []net.IP{net.ParseIP(ip)}
		return csrOf(t, tmpl, func(c *certificatesv1.CertificateSigningRequest) {
			c.Name, c.UID = name, types.UID("uid-"+name)
			c.Spec.Username = "system:node:" + nodeName
			if mut != nil {
				mut(c)
			}
		})
	}
	objs := []runtime.Object{
		node("worker-1"), node("worker-2"), node("worker-3"),
		for_("proven", "worker-1", "10.0.0.5", nil),
		for_("other-signer", "worker-1", "10.0.0.5", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
		}),
		for_("decided", "worker-1", "10.0.0.6", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue}}
		}),
		for_("another-nodes-ip", "worker-1", "10.0.0.6", nil),
		for_("waits", "worker-2", "10.0.0.6", func(c *certificatesv1.CertificateSigningRequest) {
			c.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC))
		}),
		// The request worker-2's kubelet made before: superseded.
		for_("waits-older", "worker-2", "10.0.0.6", func(c *certificatesv1.CertificateSigningRequest) {
			c.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
		}),
		for_("not-a-node", "worker-3", "10.0.0.7", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username, c.Spec.Groups = "system:serviceaccount:kube-system:evil", []string{"system:serviceaccounts"}
		}),
	}
	kube := fake.NewClientset(objs...)
	vms := map[string]VM{
		"worker-1": vmOf("vc-a/vm-1", "worker-1", "", "10.0.0.5"),
		"worker-2": vmOf("vc-b/vm-2", "worker-2", "", "10.0.0.6"),
	}
	owners := map[netip.Addr][]string{netip.MustParseAddr("10.0.0.5"): {"vc-a/vm-1"}, netip.MustParseAddr("10.0.0.6"): {"vc-b/vm-2"}}
	facts := &switchFacts{}
	// worker-2's vCenter is down: its request must wait.
	facts.set(fakeFacts{vms: vms, owners: owners})
	down := &downFor{node: "worker-2", facts: facts}
	n := newNotices()
	events := record.NewFakeRecorder(100)
	m := NewMetrics()
	inf := informers.NewSharedInformerFactory(kube, 0)
	cluster, err := NewClusterIndex(kube, inf.Core().V1().Nodes(), ClusterOptions{ServiceCIDRAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(kube, inf.Certificates().V1().CertificateSigningRequests(), inf.Core().V1().Nodes(), cluster, down, n,
		Options{Recorder: events, Metrics: m, RetryMin: time.Hour, RetryMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	inf.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 2) }()
	defer func() { cancel(); <-done }()

	condition := func(name string) (certificatesv1.RequestConditionType, string) {
		csr, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(csr.Status.Conditions) == 0 {
			return "", ""
		}
		last := csr.Status.Conditions[len(csr.Status.Conditions)-1]
		return last.Type, last.Reason
	}
	poll.True(t, "proven approved", func() bool { ty, _ := condition("proven"); return ty == certificatesv1.CertificateApproved })
	poll.True(t, "another Node's IP denied", func() bool {
		ty, r := condition("another-nodes-ip")
		return ty == certificatesv1.CertificateDenied && r == "IPNotNodes"
	})
	poll.True(t, "not a Node denied", func() bool {
		ty, r := condition("not-a-node")
		return ty == certificatesv1.CertificateDenied && r == "NotANode"
	})
	poll.True(t, "worker-2's request waits", func() bool { return c.Pending()["waits"] == "VMUnknown" })
	// One request waits per Node: its newest.
	if p := c.Pending(); len(p) != 1 {
		t.Errorf("pending %v, want worker-2's newest request only", p)
	}
	if ty, _ := condition("waits"); ty != "" {
		t.Errorf("a request that cannot be told was decided: %s", ty)
	}

	// vCenter back: the waiting request is approved without waiting for
	// its back-off (an hour here).
	down.up()
	n.recover()
	poll.True(t, "approved once its vCenter is back", func() bool { ty, _ := condition("waits"); return ty == certificatesv1.CertificateApproved })
	// The approval is written before the worker forgets the request.
	poll.True(t, "nothing pending once approved", func() bool { return len(c.Pending()) == 0 })
	// Each request's spec read once, however often it was retried: the
	// five of this signer not yet decided.
	if n := c.parses.Load(); n != 5 {
		t.Errorf("%d specs read, want 5 (one per request)", n)
	}

	// Never written: another signer's request and a decided one.
	for _, a := range kube.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			name := u.GetObject().(*certificatesv1.CertificateSigningRequest).Name
			if name == "other-signer" || name == "decided" {
				t.Errorf("%s written: %s %s", name, a.GetVerb(), a.GetSubresource())
			}
			if a.GetSubresource() != "approval" {
				t.Errorf("%s written through %q, not the approval subresource", name, a.GetSubresource())
			}
		}
	}
	var got []string
	for len(events.Events) > 0 {
		got = append(got, <-events.Events)
	}
	for _, want := range []string{"Warning ServingCertificateDenied IPNotNodes",
		"Warning ServingCertificateDenied NotANode", "Normal ServingCertificatePending VMUnknown"} {
		if !containsPrefix(got, want) {
			t.Errorf("no event %q in %q", want, got)
		}
	}
	// An approval is its condition, not an event (thousands at once would
	// cost two event writes each).
	if containsPrefix(got, "Normal ServingCertificateApproved") {
		t.Errorf("an approval sent an event: %q", got)
	}
}

// downFor answers "cannot be told now" for one Node until up.
type downFor struct {
	mu    sync.Mutex
	node  string
	isUp  bool
	facts Facts
}

func (d *downFor) up() { d.mu.Lock(); d.isUp = true; d.mu.Unlock() }

func (d *downFor) NodeVM(ctx context.Context, n *v1.Node) (VM, error) {
	d.mu.Lock()
	up := d.isUp
	d.mu.Unlock()
	if !up && n.Name == d.node {
		return VM{}, fmt.Errorf("vCenter vc-b is down: %w", ErrUnknown)
	}
	return d.facts.NodeVM(ctx, n)
}

func (d *downFor) IPOwners(ctx context.Context, ip netip.Addr) ([]string, error) {
	return d.facts.IPOwners(ctx, ip)
}

func (d *downFor) IPHolders(ctx context.Context, ip netip.Addr, notBefore time.Time) ([]Holder, error) {
	return d.facts.IPHolders(ctx, ip, notBefore)
}

func containsPrefix(list []string, p string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func (n *notices) change() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.changed)
	n.changed = make(chan struct{})
}

// countingFacts counts NodeVM calls: one per decision.
type countingFacts struct {
	Facts
	mu sync.Mutex
	n  int
}

func (c *countingFacts) NodeVM(ctx context.Context, n *v1.Node) (VM, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Facts.NodeVM(ctx, n)
}

func (c *countingFacts) calls() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// TestRetryPace: inventory signals retry every pending request at once,
// at most once per RetryPace: a storm of signals costs one pass per pace.
func TestRetryPace(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tmpl := template()
	kube := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-000000000001"}},
		csrOf(t, tmpl, func(c *certificatesv1.CertificateSigningRequest) { c.Name = "waits" }))
	facts := &countingFacts{Facts: fakeFacts{vmErr: fmt.Errorf("vc-a down: %w", ErrUnknown)}}
	n := newNotices()
	clk := testingclock.NewFakeClock(time.Now())
	inf := informers.NewSharedInformerFactory(kube, 0)
	cluster, err := NewClusterIndex(kube, inf.Core().V1().Nodes(), ClusterOptions{ServiceCIDRAPI: true})
	must.OK(t, err)
	c, err := New(kube, inf.Certificates().V1().CertificateSigningRequests(), inf.Core().V1().Nodes(), cluster, facts, n,
		Options{Recorder: record.NewFakeRecorder(100), RetryMin: time.Hour, RetryMax: time.Hour, RetryPace: time.Second, Clock: clk})
	must.OK(t, err)
	inf.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 1) }()
	defer func() { cancel(); <-done }()

	poll.True(t, "the request waits", func() bool { return c.Pending()["waits"] == "VMUnknown" })
	if got := facts.calls(); got != 1 {
		t.Fatalf("decided %d times, want 1", got)
	}
	n.change()
	poll.True(t, "retried at the signal", func() bool { return facts.calls() == 2 })
	// The signal loop now waits out the pace on the fake clock (it can
	// act on nothing before the clock moves); signals meanwhile are held,
	// not lost.
	n.change()
	n.change()
	if got := facts.calls(); got != 2 {
		t.Fatalf("decided %d times within the pace, want 2", got)
	}
	// Moved a pace at a time (the loop may reach its wait after a step).
	poll.True(t, "retried after the pace", func() bool { clk.Step(time.Second); return facts.calls() >= 3 })
	// One more signal, one more pass: the two signals within the pace
	// were one pass, not two.
	n.change()
	poll.True(t, "retried at the next signal", func() bool { clk.Step(time.Second); return facts.calls() >= 4 })
	if got := facts.calls(); got != 4 {
		t.Fatalf("decided %d times, want 4: two signals within a pace are one pass", got)
	}
}

// TestWaiters: the requests that wait are found by their Node, a newer
// request of a Node supersedes the older, and an inventory change
// retries only the requests that wait for something other than their own
// Node (a Node not registered or not initialized yet waits for its Node's
// change, not for vCenter).
func TestWaiters(t *testing.T) {
	c, _ := idleController(t)
	queued := func() []string {
		var out []string
		for c.queue.Len() > 0 {
			name, _ := c.queue.Get()
			c.queue.Done(name)
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	node := func(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

	c.wait("a", "worker-1", t0, "NodeNotInitialized")
	c.wait("b", "worker-2", t0, "VMUnknown")
	c.wait("c", "worker-3", t0, "NodeNotFound")
	c.retryPending()
	if got := queued(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("an inventory change queued %v, want [b]: a and c wait for their own Nodes", got)
	}
	c.enqueueNode(node("worker-1"))
	c.enqueueNode(node("worker-9"))
	if got := queued(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("worker-1's and worker-9's changes queued %v, want [a]", got)
	}

	if _, superseded := c.wait("a2", "worker-1", t0.Add(time.Second), "NodeNotInitialized"); superseded {
		t.Fatal("the newer request of worker-1 superseded")
	}
	if _, superseded := c.wait("a", "worker-1", t0, "NodeNotInitialized"); !superseded {
		t.Error("the older request of worker-1 not superseded by the newer")
	}
	want := map[string]string{"a2": "NodeNotInitialized", "b": "VMUnknown", "c": "NodeNotFound"}
	if got := c.Pending(); !maps.Equal(got, want) {
		t.Errorf("pending %v, want %v", got, want)
	}
	c.settle("a2")
	c.enqueueNode(node("worker-1"))
	if got := queued(); len(got) != 0 {
		t.Errorf("worker-1's change queued %v once its request was settled, want nothing", got)
	}
	c.wait("b", "worker-2", t0, "IPOwnersUnknown") // the same request, a new reason: still worker-2's waiter
	c.enqueueNode(node("worker-2"))
	if got := queued(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("worker-2's change queued %v, want [b]", got)
	}
}

// TestNodeChangedSince: a request that waits for its own Node is queued
// again when the Node changed between the read its decision used and the
// moment it was recorded as waiting (that change's event found no waiter
// to queue).
func TestNodeChangedSince(t *testing.T) {
	c, inf := idleController(t)
	store := inf.Core().V1().Nodes().Informer().GetIndexer()
	at := func(rv string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name       string
		now, read  *v1.Node // nil: absent
		wantChange bool
	}{
		{"unchanged", at("1"), at("1"), false},
		{"updated since", at("2"), at("1"), true},
		{"registered since", at("1"), nil, true},
		{"deleted since", nil, at("1"), true},
		{"still absent", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must.OK(t, store.Replace(nil, ""))
			if tc.now != nil {
				must.OK(t, store.Add(tc.now))
			}
			if got := c.nodeChangedSince("worker-1", tc.read); got != tc.wantChange {
				t.Errorf("changed: %v, want %v", got, tc.wantChange)
			}
		})
	}
}

// idleController is a controller on a fake clientset and informers that
// are never started: its bookkeeping is driven by hand.
func idleController(t *testing.T) (*Controller, informers.SharedInformerFactory) {
	t.Helper()
	kube := fake.NewClientset()
	inf := informers.NewSharedInformerFactory(kube, 0)
	cluster, err := NewClusterIndex(kube, inf.Core().V1().Nodes(), ClusterOptions{ServiceCIDRAPI: true})
	must.OK(t, err)
	c, err := New(kube, inf.Certificates().V1().CertificateSigningRequests(), inf.Core().V1().Nodes(), cluster, fakeFacts{}, newNotices(),
		Options{Recorder: record.NewFakeRecorder(10)})
	must.OK(t, err)
	t.Cleanup(c.queue.ShutDown)
	return c, inf
}
