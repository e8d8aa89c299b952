package clientcsr

import (
	"context"
	"fmt"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/csrapproval"
)

// Name is the controller's name in --controllers.
const Name = "kubelet-client-csr"

// ClientName names its Kubernetes client.
const ClientName = "kubelet-client-csr-controller"

// Component is the source of its events.
const Component = "vsphere-cloud-controller-manager"

// DefaultGrace is how long a request whose key no VM publishes yet waits
// before it is denied.
const DefaultGrace = 5 * time.Minute

// Options tune the controller; the zero value is the default.
type Options struct {
	// Recorder records the events on requests; nil: Run starts one.
	Recorder record.EventRecorder
	// Metrics, if set, count the decisions.
	Metrics *Metrics
	// Grace: see DefaultGrace (0: DefaultGrace; negative: none, a key no
	// VM publishes is denied at once).
	Grace time.Duration
	// NodeNameKey binds Node names by this extraConfig key of the VM
	// (nodes.identity.nodeNameKey) instead of the VM's name.
	NodeNameKey string
	// RetryMin and RetryMax bound the back-off of a pending request
	// (default 1s and 30s); an inventory change retries every pending
	// request at once.
	RetryMin, RetryMax time.Duration
	// Changed, if set, is closed at the next inventory change, then
	// replaced (the provider's notices).
	Changed func() <-chan struct{}
	// Clock (the real clock when nil).
	Clock clock.WithTicker
}

// Controller decides the bootstrap requests of kubelet client
// certificates.
type Controller struct {
	kube   kubernetes.Interface
	csrs   certlisters.CertificateSigningRequestLister
	nodes  corelisters.NodeLister
	synced []cache.InformerSynced
	facts  Facts
	opts   Options
	queue  workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	pending map[string]string // request name -> reason it waits
}

// New returns a controller on the shared informers; Run starts it.
func New(kube kubernetes.Interface, csrs certinformers.CertificateSigningRequestInformer, nodes coreinformers.NodeInformer, facts Facts, opts Options) (*Controller, error) {
	switch {
	case opts.Grace == 0:
		opts.Grace = DefaultGrace
	case opts.Grace < 0:
		opts.Grace = 0
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 30 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{kube: kube, csrs: csrs.Lister(), nodes: nodes.Lister(), facts: facts, opts: opts, pending: map[string]string{},
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
			DeleteFunc: c.enqueue,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: request event handler: %w", Name, err)
	}
	c.synced = []cache.InformerSynced{reg.HasSynced, nodes.Informer().HasSynced}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// Run decides requests with workers until ctx ends; it returns once every
// goroutine it started has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	log := klog.FromContext(ctx).WithName(Name)
	ctx = klog.NewContext(ctx, log)
	if c.opts.Recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
		defer b.Shutdown()
		c.opts.Recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: Component})
	}
	var wg wait.Group
	defer wg.Wait()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync(Name, ctx.Done(), c.synced...) {
		return
	}
	log.Info("Started: approving kubelet client certificates only for a VM vCenter binds to the request's key and Node name", "workers", workers)
	if c.opts.Changed != nil {
		wg.Start(func() {
			changed := c.opts.Changed()
			for {
				select {
				case <-ctx.Done():
					return
				case <-changed:
					changed = c.opts.Changed()
				}
				c.mu.Lock()
				for name := range c.pending {
					c.queue.Add(name)
				}
				c.mu.Unlock()
			}
		})
	}
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
	if apierrors.IsNotFound(err) || (err == nil && !Mine(csr)) {
		c.settle(name)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var v Verdict
	req, ierr := Inspect(csr)
	if ierr != nil {
		v = Verdict{Decision: Deny, Reason: ReasonMalformed, Message: "not a kubelet client certificate request: " + ierr.Error()}
	} else {
		nodes, err := c.nodes.List(labels.Everything())
		if err != nil {
			return false, err
		}
		v = Decide(req, csr.CreationTimestamp.Time, c.opts.Clock.Now(), c.opts.Grace, c.opts.NodeNameKey, c.facts, nodes)
	}
	log := klog.FromContext(ctx).WithValues("csr", name, "node", req.Node, "requester", csr.Spec.Username)
	if v.Decision == Pending {
		if c.wait(name, v.Reason) {
			log.Info("Kubelet client certificate request waits", "reason", v.Reason, "message", v.Message)
			c.opts.Recorder.Event(csr, v1.EventTypeNormal, v.Reason, v.Message)
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
	c.settle(name)
	c.opts.Metrics.decided(v)
	eventType := v1.EventTypeNormal
	if v.Decision == Deny {
		eventType = v1.EventTypeWarning
	}
	c.opts.Recorder.Event(csr, eventType, v.Reason, v.Message)
	log.Info("Kubelet client certificate request "+map[Decision]string{Approve: "approved", Deny: "denied"}[v.Decision], "reason", v.Reason, "message", v.Message)
	return false, nil
}

// conclude writes an approval or a denial, on the informer's copy: a
// request changed since conflicts, and the next sync sees the change.
func (c *Controller) conclude(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, v Verdict) error {
	return csrapproval.Conclude(ctx, c.kube, csr, v.Decision == Deny, v.Reason, v.Message, Component, metav1.NewTime(c.opts.Clock.Now()))
}

// wait records that a request waits for reason; it reports whether that
// is news.
func (c *Controller) wait(name, reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.pending[name]
	c.pending[name] = reason
	c.opts.Metrics.setPending(len(c.pending))
	return !ok || prev != reason
}

// settle forgets a request that no longer waits.
func (c *Controller) settle(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, name)
	c.opts.Metrics.setPending(len(c.pending))
}
