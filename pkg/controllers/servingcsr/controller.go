package servingcsr

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/csrapproval"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
)

// Name is the controller's name in --controllers.
const Name = "serving-csr"

// ClientName names its Kubernetes client (the end of its user agent).
const ClientName = "serving-csr-controller"

// Component is the source of the events it records on requests.
const Component = "vsphere-cloud-controller-manager"

// Workers is how many requests are decided at once. A decision is
// mostly one API write (the approval) and what the inventories answer
// from memory: thousands of kubelets asking at once (a new cluster, a
// new CA) wait on the API server's answers, not on the CPU.
const Workers = 8

// Notices tell when what Facts answer may have changed (the provider).
type Notices interface {
	// Changed is closed at the next inventory change, then replaced.
	Changed() <-chan struct{}
	// Recovered is closed when a vCenter's inventory next becomes
	// current (or reads a page of its first read, or sees VMs enter its
	// scope), then replaced.
	Recovered() <-chan struct{}
}

// Options tune the controller; the zero value is the default.
type Options struct {
	// Events receives the events on Nodes (shared with the provider and
	// node-topology, which de-duplicate them); nil sends none.
	Events *nodeevents.Recorder
	// Recorder records the events on requests; nil: Run starts one that
	// sends them through the controller's client.
	Recorder record.EventRecorder
	// Metrics, if set, count the decisions and the requests waiting.
	Metrics *Metrics
	// RetryMin and RetryMax bound the back-off of a pending request's
	// retries (default 1s and 2m); an inventory change or a vCenter that
	// becomes current retries every pending request at once, at most once
	// per RetryPace (default 250ms; negative: no pace), so that a storm
	// of inventory changes costs one pass per pace.
	RetryMin, RetryMax, RetryPace time.Duration
	// Bounds are the operator's bounds on addresses and names.
	Bounds Bounds
	// Clock drives the retries and the conditions' times (default: the
	// real clock).
	Clock clock.WithTicker
}

// Controller approves the kubelet serving requests vCenter proves, denies
// those it disproves, and retries the others.
type Controller struct {
	kube    kubernetes.Interface
	csrs    certlisters.CertificateSigningRequestLister
	nodes   corelisters.NodeLister
	cluster *ClusterIndex
	synced  []cache.InformerSynced
	facts   Facts
	notices Notices
	opts    Options
	queue   workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	pending map[string]waiting // by request name
	// waiter is the request that waits for each Node (one at most: a
	// newer one supersedes it), so that a Node's change and a new
	// request find it without a pass over every waiting request.
	waiter map[string]string

	// parsed are requests' specs read, by UID: a request is retried at
	// every inventory change, and its spec never changes.
	parsed *lru.Cache
	parses atomic.Int64 // specs read, for tests
}

// parsedSpec is Parse's answer, kept.
type parsedSpec struct {
	req Request
	v   *Verdict
}

// inspect is Inspect, reading each request's spec once.
func (c *Controller) inspect(csr *certificatesv1.CertificateSigningRequest, node *v1.Node) (Request, *Verdict) {
	if v := precheck(csr, node); v != nil {
		return Request{}, v
	}
	if p, ok := c.parsed.Get(csr.UID); ok && csr.UID != "" {
		ps := p.(parsedSpec)
		return ps.req, ps.v
	}
	c.parses.Add(1)
	req, v := Parse(csr)
	if csr.UID != "" {
		c.parsed.Add(csr.UID, parsedSpec{req, v})
	}
	return req, v
}

// waiting is a pending request: its Node, why it waits, and when it was
// made.
type waiting struct {
	node, reason string
	created      time.Time
}

// New returns a controller on the shared informers and the cluster's
// index (NewClusterIndex on the same Node informer); Run starts it.
func New(kube kubernetes.Interface, csrs certinformers.CertificateSigningRequestInformer, nodes coreinformers.NodeInformer,
	cluster *ClusterIndex, facts Facts, notices Notices, opts Options) (*Controller, error) {
	if opts.RetryMin <= 0 {
		opts.RetryMin = time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 2 * time.Minute
	}
	if opts.RetryPace == 0 {
		opts.RetryPace = 250 * time.Millisecond
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{kube: kube, csrs: csrs.Lister(), nodes: nodes.Lister(), cluster: cluster, facts: facts, notices: notices, opts: opts,
		pending: map[string]waiting{}, waiter: map[string]string{}, parsed: lru.New(4096),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.RetryMin, opts.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name, Clock: opts.Clock})}
	reg, err := csrs.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
			return ok && csr.Spec.SignerName == SignerName
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, cur any) { c.enqueue(cur) },
			DeleteFunc: c.enqueue, // sync forgets it
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: request event handler: %w", Name, err)
	}
	nreg, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueNode,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*v1.Node), cur.(*v1.Node)
			// A providerID set by initialization, or the control-plane
			// label, is what a waiting request may need.
			if o.Spec.ProviderID != n.Spec.ProviderID || !maps.Equal(o.Labels, n.Labels) {
				c.enqueueNode(cur)
			}
		},
		// A Node gone may be what another Node's request waits for (a
		// second Node on its VM): every waiting request is retried.
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			c.enqueueNode(obj)
			c.retryPending()
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: Node event handler: %w", Name, err)
	}
	c.synced = []cache.InformerSynced{reg.HasSynced, nreg.HasSynced, cluster.HasSynced}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// enqueueNode queues the request that waits for a Node, if any.
func (c *Controller) enqueueNode(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if name, ok := c.waiter[n.Name]; ok {
		c.queue.Add(name)
	}
}

// waitsForItsNode tells the reasons only a change of the request's own
// Node ends (enqueueNode retries them, and the back-off): no inventory
// change or other Node's deletion does, so retryPending leaves them be.
// While thousands of Nodes register and initialize, their requests wait
// for this, and retrying them all at every inventory change would queue
// every one ahead of those that can be decided.
func waitsForItsNode(reason string) bool {
	return reason == "NodeNotFound" || reason == "NodeNotInitialized"
}

// retryPending queues every request that waits for something other than
// its own Node.
func (c *Controller) retryPending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, w := range c.pending {
		if !waitsForItsNode(w.reason) {
			c.queue.Add(name)
		}
	}
}

// Run decides requests with the given number of workers until ctx ends;
// it returns once every goroutine it started has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	log := klog.FromContext(ctx).WithName(Name)
	ctx = klog.NewContext(ctx, log)
	if c.opts.Recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
		defer b.Shutdown() // after the workers (deferred first, runs last)
		c.opts.Recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: Component})
	}
	var wg wait.Group
	defer c.cluster.Shutdown() // after ctx ended: its informers stop with it
	defer wg.Wait()
	defer c.queue.ShutDown()
	c.cluster.Start(ctx)
	// Taken before the first request is decided: a change after it
	// either is seen by that decision or fires the channel.
	changed, recovered := c.notices.Changed(), c.notices.Recovered()
	if !cache.WaitForNamedCacheSync(Name, ctx.Done(), c.synced...) {
		return
	}
	log.Info("Started: approving kubelet serving certificates vCenter proves", "workers", workers)
	c.opts.Metrics.initialize()
	wg.Start(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				changed = c.notices.Changed()
			case <-recovered:
				recovered = c.notices.Recovered()
			}
			c.retryPending()
			// Paced: a change meanwhile closes the channels just taken,
			// so it is seen after the pace, never lost.
			if c.opts.RetryPace > 0 {
				select {
				case <-ctx.Done():
					return
				case <-c.opts.Clock.After(c.opts.RetryPace):
				}
			}
		}
	})
	for range workers {
		wg.StartWithContext(ctx, func(ctx context.Context) {
			for c.next(ctx) {
			}
		})
	}
	<-ctx.Done()
}

func (c *Controller) next(ctx context.Context) bool {
	return csrapproval.Next(ctx, c.queue, c.sync)
}

// sync decides one request; it reports whether the request waits.
func (c *Controller) sync(ctx context.Context, name string) (bool, error) {
	csr, err := c.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		c.settle(name)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var node *v1.Node // nil when it does not exist
	if n := NodeName(csr); n != "" && csr.Spec.SignerName == SignerName {
		if node, err = c.nodes.Get(n); apierrors.IsNotFound(err) {
			node = nil
		} else if err != nil {
			return false, err
		}
	}
	req, v := c.inspect(csr, node)
	if v == nil {
		decided := Decide(ctx, req, node, c.facts, c.cluster, c.opts.Bounds)
		v = &decided
	}
	log := klog.FromContext(ctx).WithValues("csr", name, "node", NodeName(csr))
	switch v.Decision {
	case Ignore:
		log.V(2).Info("Serving certificate request left to others", "reason", v.Reason, "message", v.Message)
		c.settle(name)
		return false, nil
	case Pending:
		news, superseded := c.wait(name, req.Node, csr.CreationTimestamp.Time, v.Reason)
		if superseded {
			log.V(2).Info("Serving certificate request superseded by a newer one of its Node; not retried", "reason", v.Reason)
			return false, nil
		}
		if news {
			log.V(2).Info("Serving certificate request waits", "reason", v.Reason, "message", v.Message)
			c.record(csr, node, v)
		}
		if waitsForItsNode(v.Reason) && c.nodeChangedSince(req.Node, node) {
			// Changed between the read and wait: its event found no
			// waiter to queue.
			c.queue.Add(name)
		}
		return true, nil
	}
	if err := c.conclude(ctx, csr, v); err != nil {
		if apierrors.IsNotFound(err) {
			c.settle(name)
			return false, nil
		}
		return false, fmt.Errorf("%s: %w", v.Decision, err)
	}
	log.Info("Serving certificate request "+pastTense[v.Decision], "reason", v.Reason, "message", v.Message)
	c.settle(name)
	c.record(csr, node, v)
	return false, nil
}

// conclude writes an approval or a denial. The request is the informer's
// copy: if it changed since (another approver), the write conflicts and
// the next sync sees the change.
func (c *Controller) conclude(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, v *Verdict) error {
	return csrapproval.Conclude(ctx, c.kube, csr, v.Decision == Deny, v.Reason, v.Message, Component, metav1.NewTime(c.opts.Clock.Now()))
}

// wait records that a request waits for reason; it reports whether that
// is news (a new request, or a new reason), worth an event. One request
// waits per Node: a kubelet makes a new one while the last waits, and the
// newest is the one it uses; an older one of the same Node is forgotten
// (left undecided, not retried), and a request older than the one that
// waits for its Node is not recorded (superseded, false).
func (c *Controller) wait(name, node string, created time.Time, reason string) (news, superseded bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.pending[name]
	if other, found := c.waiter[node]; found && other != name {
		w := c.pending[other]
		if w.created.After(created) || (w.created.Equal(created) && other > name) {
			return false, true
		}
		delete(c.pending, other)
		c.opts.Metrics.pendingMoved(w.reason, "")
	}
	c.pending[name] = waiting{node: node, reason: reason, created: created}
	c.waiter[node] = name
	c.opts.Metrics.pendingMoved(prev.reason, reason)
	return !ok || prev.reason != reason, false
}

// nodeChangedSince tells whether the Node named differs from read (nil:
// it did not exist then), as the informer holds it now.
func (c *Controller) nodeChangedSince(name string, read *v1.Node) bool {
	now, err := c.nodes.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return read != nil
	case err != nil:
		return false // the back-off retries it
	case read == nil:
		return true
	}
	return now.ResourceVersion != read.ResourceVersion
}

// settle forgets a request that no longer waits.
func (c *Controller) settle(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.pending[name]; ok {
		delete(c.pending, name)
		if c.waiter[w.node] == name {
			delete(c.waiter, w.node)
		}
		c.opts.Metrics.pendingMoved(w.reason, "")
	}
}

// record counts a verdict and sends its events, on the request and on
// its Node (when it exists). An approval sends none: the request's
// Approved condition says who approved it and why, as
// kube-controller-manager's approver leaves it, and thousands of
// kubelets asking at once (a new cluster, a new CA) would otherwise
// cost two event writes each, on the API server the approvals wait on.
// A denial or a request that waits is what an operator acts on: those
// are events.
func (c *Controller) record(csr *certificatesv1.CertificateSigningRequest, node *v1.Node, v *Verdict) {
	c.opts.Metrics.decided(v)
	if v.Decision == Approve {
		return
	}
	reason, eventType := "ServingCertificate"+eventWord[v.Decision], v1.EventTypeNormal
	if v.Decision == Deny {
		eventType = v1.EventTypeWarning
	}
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(csr, eventType, reason, v.Reason+": "+v.Message)
	}
	if node != nil {
		c.opts.Events.Event(node, eventType, reason, fmt.Sprintf("request %s: %s: %s", csr.Name, v.Reason, v.Message))
	}
}

var (
	eventWord = map[Decision]string{Approve: "Approved", Deny: "Denied", Pending: "Pending"}
	pastTense = map[Decision]string{Approve: "approved", Deny: "denied"}
)

// Pending lists the requests that wait and why, by name (for tests and
// status pages).
func (c *Controller) Pending() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.pending))
	for name, w := range c.pending {
		out[name] = w.reason
	}
	return out
}
