package nodetopology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// Name is the controller's name in --controllers.
const Name = "node-topology"

// ClientName names its Kubernetes client (the end of its user agent).
const ClientName = "node-topology-controller"

// Source is what only the provider can answer: the small interfaces
// each part of the controller uses, declared where it uses them (the
// topology pass, the deletions-held gauge and the retries here; the
// out-of-service policy in outofservice.go; adoption in untainted.go).
// The controller keeps its own records (drift, out-of-service) and sends
// its own events.
type Source interface {
	observer
	scoper
	retrier
	powerProver
	previewer
}

// observer is what the topology pass (syncTopology) asks: a Node's
// Observation, and when to look again.
type observer interface {
	// Changed is closed at the next change that may change an
	// Observation, then replaced.
	Changed() <-chan struct{}
	// Observe computes a Node's Observation, without effects.
	Observe(ctx context.Context, node *v1.Node) (provider.Observation, error)
}

// scoper is what the deletions-held gauge (heldBy) asks.
type scoper interface {
	// InScope says whether the vCenter and datacenter node's labels name
	// are configured (a *provider.NotConfiguredError when not): while any
	// Node's are not, no Node is deleted for a missing VM.
	InScope(node *v1.Node) error
}

// retrier is what the retries of Nodes waiting for initialization
// (retryWaiting) ask.
type retrier interface {
	// Recovered is closed when a vCenter's inventory next becomes
	// current, reads another page of its first read or sees VMs become
	// findable (see inventory.Index.Findable), then replaced: Nodes waiting for initialization may be
	// retried (RetryDue).
	Recovered() <-chan struct{}
	// RetryDue returns, among the Nodes waiting for initialization,
	// those whose last initialization failed and whose VM can now be
	// looked up, each once per failure; no effects but that record.
	RetryDue(waiting []*v1.Node) []*v1.Node
}

// The provider is the Source the controller manager gives it.
var _ Source = (*provider.Provider)(nil)

// Options tune the controller; the zero value is the default.
type Options struct {
	// Resync re-observes every Node this often even without a change
	// notification (default 5 minutes), as informers resync.
	Resync time.Duration
	// Relabel patches the Node's labels; default Relabel.
	Relabel func(ctx context.Context, kube kubernetes.Interface, list []provider.Drift) error
	// Clock drives the resync, the retry pace and the out-of-service
	// grace periods (default: the real clock).
	Clock clock.WithTicker
	// RetryPace is the least time between two passes over the Nodes
	// waiting for initialization (default 250ms; negative: none): pages
	// of ten first reads arrive tens of times a second, and a vCenter's
	// return comes in several signals (its tags, its pages, its read
	// completed) that one pass after the pause serves together. Each
	// Node is annotated once per failure however many passes there are.
	RetryPace time.Duration
	// OutOfService is the out-of-service taint policy (off unless
	// Enabled).
	OutOfService config.OutOfService
	// Events receives the controller's events (shared with the provider,
	// which de-duplicates them); nil sends none.
	Events *nodeevents.Recorder
	// Metrics, if set, receive the controller's gauges and counters.
	Metrics *Metrics
	// VCenters are the configured vCenters, whose gauges start at 0.
	VCenters []string
	// AdoptUntainted taints the Nodes that joined without the
	// uninitialized taint once their VM is found (nodes.adoptUntainted).
	AdoptUntainted bool
	// Retry hands a Node waiting for initialization back to the
	// framework's node controller in this process, without a request
	// (noderetry.Tee.Retry), and reports whether it could. Nil, or false
	// (its handler was not kept): the retry annotation is written instead.
	Retry func(*v1.Node) bool
}

// Controller observes Nodes when they or their VMs change.
type Controller struct {
	kube   kubernetes.Interface
	nodes  corelisters.NodeLister
	synced cache.InformerSynced
	// What each part asks the provider (Source).
	topo    observer
	scope   scoper
	retries retrier
	power   powerProver
	preview previewer
	queue   workqueue.TypedRateLimitingInterface[string]
	opts    Options
	oos     outOfService // out-of-service records and taints
	drifts  drifts       // drifted Nodes, for the gauge
	// refused backs off, per Node, retry annotations the API server
	// refused for a reason that will not pass by itself (403, 422);
	// reported names those already reported for the current refusal.
	// Used by the retry loop only.
	refused  *flowcontrol.Backoff
	reported map[string]bool
	// untainted are the Nodes that joined without the taint (untainted.go).
	untainted untainted
	// addresses records the address writes (addresses.go).
	addresses addressWrites
}

// The back-off of a retry annotation the API server refused (forbidden,
// invalid): 1 s doubling to 5 min.
const (
	refusedRetryMin = time.Second
	refusedRetryMax = 5 * time.Minute
)

// New returns a controller; Run starts it.
func New(kube kubernetes.Interface, nodes coreinformers.NodeInformer, src Source, opts Options) (*Controller, error) {
	if opts.Resync == 0 {
		opts.Resync = 5 * time.Minute
	}
	if opts.Relabel == nil {
		opts.Relabel = Relabel
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RetryPace == 0 {
		opts.RetryPace = 250 * time.Millisecond
	}
	c := &Controller{kube: kube, nodes: nodes.Lister(), topo: src, scope: src, retries: src, power: src, preview: src, opts: opts,
		// The "fake" constructor is the one that takes a clock.
		refused: flowcontrol.NewFakeBackOff(refusedRetryMin, refusedRetryMax, opts.Clock), reported: map[string]bool{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name, Clock: opts.Clock})}
	reg, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*v1.Node), cur.(*v1.Node)
			// Labels, taints (initialization), providerID and readiness
			// matter; the kubelet's status heartbeats do not.
			if !labels.Equals(o.Labels, n.Labels) || len(o.Spec.Taints) != len(n.Spec.Taints) || o.Spec.ProviderID != n.Spec.ProviderID ||
				readyChanged(o, n) {
				c.enqueue(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				c.forget(n.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: Node event handler: %w", Name, err)
	}
	c.synced = reg.HasSynced
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if n, ok := obj.(*v1.Node); ok {
		c.queue.Add(n.Name)
	}
}

// enqueueAll queues every Node the informer knows, and counts the Nodes
// that hold deletions back.
func (c *Controller) enqueueAll() {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, n := range nodes {
		c.queue.Add(n.Name)
	}
	c.opts.Metrics.setDeletionsHeld(c.heldBy(nodes))
}

// heldBy counts, by vCenter and datacenter, the Nodes labelled with a
// vCenter or datacenter that is not configured.
func (c *Controller) heldBy(nodes []*v1.Node) map[[2]string]int {
	held := map[[2]string]int{}
	for _, n := range nodes {
		var nc *provider.NotConfiguredError
		if err := c.scope.InScope(n); errors.As(err, &nc) {
			held[[2]string{nc.VCenter, nc.Datacenter}]++
		}
	}
	return held
}

// Run observes Nodes with the given number of workers until ctx ends; it
// returns once every goroutine it started has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	log := klog.FromContext(ctx).WithName(Name)
	ctx = klog.NewContext(ctx, log)
	var wg wait.Group
	defer wg.Wait()
	defer c.queue.ShutDown()
	// Taken before any Node is observed, and again before every
	// enqueueAll: a change is either seen by the observations that follow
	// or fires the channel held.
	changed := c.topo.Changed()
	if !cache.WaitForNamedCacheSync(Name, ctx.Done(), c.synced) {
		return
	}
	log.Info("Started", "workers", workers, "resync", c.opts.Resync)
	c.opts.Metrics.initialize(c.opts.VCenters)
	c.enqueueAll()
	// Every change notification (and every resync) queues every Node:
	// observing one costs no vSphere request, and the queue folds repeats.
	wg.Start(func() {
		tick := c.opts.Clock.NewTicker(c.opts.Resync)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-tick.C():
			}
			changed = c.topo.Changed()
			c.enqueueAll()
		}
	})
	// A vCenter back, or a page of a first read: the Nodes that failed
	// for want of it are retried now. The framework's node controller
	// backs off exponentially (up to 1000 s) after failed
	// initializations; a change of the Node brings it back. Passes are
	// at least RetryPace apart; a signal during the pause is kept by the
	// channel taken before the pass.
	recovered := c.retries.Recovered()
	wg.Start(func() {
		// The Nodes RetryDue returned whose annotation could not be
		// written: asked for again at the next pass, which comes after
		// the pace without a signal.
		unsent := map[string]bool{}
		for {
			if len(unsent) == 0 || c.opts.RetryPace <= 0 {
				select {
				case <-ctx.Done():
					return
				case <-recovered:
				}
			}
			recovered = c.retries.Recovered()
			c.retryWaiting(ctx, unsent)
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
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	after, err := c.sync(ctx, name)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Node update failed; retrying", "node", name)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	if after > 0 {
		c.queue.AddAfter(name, after)
	}
	return true
}

// sync observes one Node, relabels it where the policy says so, reports,
// and applies the out-of-service policy; it returns when to look at the
// Node again (0: on a change only). A Node whose VM cannot be looked up
// is left to the framework's node controllers, which report the lookup
// error; a change notification brings it back.
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var errs []error
	after, err := c.syncTopology(ctx, node)
	if err != nil {
		errs = append(errs, err)
	}
	if c.opts.OutOfService.Enabled {
		oosAfter, err := c.syncOutOfService(ctx, node)
		if err != nil {
			errs = append(errs, err)
		}
		after = sooner(after, oosAfter)
	}
	return after, errors.Join(errs...)
}

// sooner is the sooner of two delays, 0 meaning none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// syncTopology observes one Node's placement, relabels it where the
// policy says so, reports, and writes its addresses when they changed; it
// returns when to look at the Node again (0: on a change only).
func (c *Controller) syncTopology(ctx context.Context, node *v1.Node) (time.Duration, error) {
	if provider.HasUninitializedTaint(node) {
		// The framework's node controller initializes it (and reports why
		// it cannot); observed once it is, with its labels to compare.
		return 0, nil
	}
	if provider.JoinedWithoutTaint(node) {
		return 0, c.syncUntainted(ctx, node)
	}
	c.opts.Metrics.setUntainted(c.untainted.set(node.Name, false))
	obs, err := c.topo.Observe(ctx, node)
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Node not observed", "node", node.Name, "err", err)
		if len(obs.PlacementLabels) > 0 { // the record of its VM, found though its topology is not
			if err := PatchPlacement(ctx, c.kube, obs.PlacementLabels); err != nil {
				return 0, fmt.Errorf("the record of the Node's VM: %w", err)
			}
		}
		return 0, nil
	}
	// Neither part holds the other back: a refused address write does not
	// stop the labels, taints and reports.
	after, addrErr := c.syncAddresses(ctx, node, obs.Addresses)
	return after, errors.Join(c.applyObservation(ctx, node, obs), addrErr)
}

// applyObservation writes the placement labels, the zone-moved taint and
// the relabel the Observation calls for, and reports it.
func (c *Controller) applyObservation(ctx context.Context, node *v1.Node, obs provider.Observation) error {
	if len(obs.PlacementLabels) > 0 {
		if err := PatchPlacement(ctx, c.kube, obs.PlacementLabels); err != nil {
			return fmt.Errorf("placement labels: %w", err)
		}
		klog.FromContext(ctx).V(2).Info("Placement labels updated", "node", node.Name, "labels", obs.PlacementLabels)
	}
	if obs.Taint {
		if err := c.syncZoneMove(ctx, node, obs.Drift); err != nil {
			c.report(node, obs, false)
			return err
		}
	}
	relabelled := false
	if obs.Relabel && len(obs.Drift) > 0 {
		if err := c.opts.Relabel(ctx, c.kube, obs.Drift); err != nil {
			c.report(node, obs, false)
			return err
		}
		relabelled = true
	}
	c.report(node, obs, relabelled)
	return nil
}

// AnnotationRetry is set on a Node that waits for initialization when a
// vCenter becomes usable again, only if Options.Retry cannot hand it to
// the framework's node controller (a safety net: its handler not kept).
// The change makes the node controller retry the Node at once: after failures
// its work queue backs off exponentially (up to 1000 s), so without it a
// Node could wait many minutes after its vCenter returned.
const AnnotationRetry = "vsphere.vsphere-ccm.io/retry-requested"

// retryWaiting hands back to the framework's node controller the Nodes
// that still wait for initialization (they carry the framework's
// uninitialized taint) and that the provider says are due (RetryDue: their
// initialization failed, and their VM can now be looked up), so that it
// retries them at once: through Options.Retry (no Node write), else by
// annotating them (it reacts to Node updates). A Node not tried yet, or still waiting for a vCenter,
// is not handed back.
func (c *Controller) retryWaiting(ctx context.Context, unsent map[string]bool) {
	log := klog.FromContext(ctx)
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	var waiting []*v1.Node
	for _, n := range nodes {
		if provider.HasUninitializedTaint(n) {
			waiting = append(waiting, n)
		}
	}
	due := c.retries.RetryDue(waiting)
	for _, n := range waiting {
		if unsent[n.Name] && !slices.ContainsFunc(due, func(d *v1.Node) bool { return d.Name == n.Name }) {
			due = append(due, n)
		}
	}
	clear(unsent) // those no longer waiting are forgotten
	c.refused.GC()
	now := c.opts.Clock.Now()
	for _, n := range due {
		if c.opts.Retry != nil && c.opts.Retry(n) {
			c.opts.Metrics.retried("informer")
			log.V(4).Info("Queued a Node waiting for initialization for a retry", "node", n.Name)
			continue
		}
		if c.refused.IsInBackOffSinceUpdate(n.Name, now) {
			unsent[n.Name] = true // tried again once its back-off ends
			continue
		}
		err := MergePatch(ctx, c.kube, n.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			AnnotationRetry: now.UTC().Format(time.RFC3339Nano)}}})
		switch {
		case err == nil:
			c.refused.Reset(n.Name)
			delete(c.reported, n.Name)
			c.opts.Metrics.retried("annotation")
			log.V(2).Info("Asked for a retry of a Node waiting for initialization", "node", n.Name)
		case apierrors.IsNotFound(err):
			// Deleted meanwhile: nothing to retry.
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
			// It will not pass by itself (RBAC, an admission policy): backed
			// off, reported once per refusal, not at every pass.
			c.refused.Next(n.Name, now)
			unsent[n.Name] = true
			if c.reported[n.Name] {
				log.V(4).Info("Retry annotation still refused", "node", n.Name, "err", err)
				continue
			}
			c.reported[n.Name] = true
			reason := string(apierrors.ReasonForError(err))
			log.Error(err, "The API server refused the retry annotation of a Node waiting for initialization; backing off (check the CCM's RBAC and admission policies on Nodes)",
				"node", n.Name, "reason", reason)
			c.opts.Metrics.retryRefused(reason)
			c.opts.Events.Event(n, v1.EventTypeWarning, "RetryRequestRefused",
				fmt.Sprintf("the API server refused the annotation %s that makes the node controller retry this Node's initialization (%s): backing off up to %v", AnnotationRetry, reason, refusedRetryMax))
		default:
			log.Error(err, "Could not ask for a retry of a Node waiting for initialization; trying again at the next pass", "node", n.Name)
			unsent[n.Name] = true
		}
	}
}
