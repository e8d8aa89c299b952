// Package configrollout orders the restarts that apply a change of the
// cloud-config across the replicas of a leader-elected controller manager,
// so that the cluster is never left without a leader by its own config:
// standbys restart first; the leader restarts only once a standby runs the
// new config, ready to take the lease it releases. No replica restarts
// sooner than a minimum uptime after it started, nor at the same moment as
// the others (jitter), so a file that flaps cannot drive every replica
// into the kubelet's crash back-off at once.
//
// Each replica publishes what it runs (a record: its Pod, the fingerprint
// of its config, whether it leads or stops to restart), renewed every few
// seconds, in one Lease beside the leader lease (RecordsLease). A record
// not renewed for long is dropped by the next writer.
package configrollout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults.
const (
	DefaultMinUptime = time.Minute
	DefaultJitter    = 10 * time.Second
	DefaultHeartbeat = 5 * time.Second
	// DefaultPatience is how long the leader counts a standby that stopped
	// to restart, and has not published since, as one that will come back.
	DefaultPatience = 5 * time.Minute
)

// Options describe this replica.
type Options struct {
	// Namespace and Pod are this replica's Pod (the downward API's
	// POD_NAMESPACE and POD_NAME).
	Namespace, Pod string
	// Group is the leader lease's name: the replicas that share it.
	Group string
	// Hash is the fingerprint of the config this process runs
	// (configwatch.Watcher.Fingerprint).
	Hash string
	// Started is when the process started.
	Started time.Time
	// Leading tells whether this process leads (runs the controllers).
	// Nil: no leader election, or no record published (a Coordinator
	// without a client): every replica is on its own, and Run must not
	// be called.
	Leading func() bool
	// MinUptime, Jitter, Heartbeat, Patience: see the defaults.
	MinUptime, Jitter, Heartbeat, Patience time.Duration
	// Clock (the real clock when nil).
	Clock clock.WithTicker
	// Rand draws the jitter, a share in [0, 1) (math/rand when nil).
	Rand func() float64
}

// Coordinator publishes this replica's record and decides when it may
// restart for a change.
type Coordinator struct {
	kube  kubernetes.Interface
	opts  Options
	store records

	mu        sync.Mutex
	pending   string    // the change (hash) waited for
	notBefore time.Time // not before: the minimum uptime, then a jitter
	stopping  bool      // Stopping was called: every later record says so
}

// New returns a coordinator for this replica; nothing is published before
// Run.
func New(kube kubernetes.Interface, opts Options) *Coordinator {
	if opts.MinUptime < 0 {
		opts.MinUptime = 0
	}
	if opts.Jitter < 0 {
		opts.Jitter = 0
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Patience <= 0 {
		opts.Patience = DefaultPatience
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	return &Coordinator{kube: kube, opts: opts, store: records{kube: kube, ns: opts.Namespace, group: opts.Group, forget: 2 * opts.Patience}}
}

// Run publishes the record now and every heartbeat until ctx ends.
func (c *Coordinator) Run(ctx context.Context) {
	log := klog.FromContext(ctx)
	t := c.opts.Clock.NewTicker(c.opts.Heartbeat)
	defer t.Stop()
	failing := false
	for {
		err := c.store.publish(ctx, c.mine())
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			log.Error(err, "This replica's config record is not published; the leader may wait for it before applying a config change")
			failing = true
		case err == nil && failing:
			log.Info("This replica's config record is published again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Stopping marks the record as stopping to restart, so that the leader
// waits for the replica to come back instead of taking it for gone. Call
// it once the decision to restart is made (before Run's ctx ends).
func (c *Coordinator) Stopping(ctx context.Context) {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.store.publish(ctx, c.mine()); err != nil {
		klog.FromContext(ctx).V(2).Info("The config record was not marked as restarting", "err", err)
	}
}

func (c *Coordinator) mine() record {
	c.mu.Lock()
	stopping := c.stopping
	c.mu.Unlock()
	return record{pod: c.opts.Pod, entry: entry{Hash: c.opts.Hash, Renewed: c.opts.Clock.Now(), Leading: c.leading(), Stopping: stopping}}
}

func (c *Coordinator) leading() bool { return c.opts.Leading != nil && c.opts.Leading() }

// Mine implements configwatch.Turn: whether this replica may restart now
// for the change hash, and why (or what it waits for).
//   - never sooner than MinUptime after start, nor than a jitter after the
//     change was first seen;
//   - a standby (or a replica without leader election) then goes;
//   - the leader goes when a live standby runs hash, or when no other
//     replica is known (alone: the restart is the only way to apply it);
//     it waits while other replicas are live or restarting.
func (c *Coordinator) Mine(ctx context.Context, hash string) (bool, string) {
	now := c.opts.Clock.Now()
	c.mu.Lock()
	if hash != c.pending {
		// The jitter counts from the change's first sight, or from the
		// end of the minimum uptime if later.
		c.pending = hash
		from := c.opts.Started.Add(c.opts.MinUptime)
		if now.After(from) {
			from = now
		}
		c.notBefore = from.Add(time.Duration(c.opts.Rand() * float64(c.opts.Jitter)))
	}
	notBefore := c.notBefore
	c.mu.Unlock()
	if up := now.Sub(c.opts.Started); up < c.opts.MinUptime {
		return false, fmt.Sprintf("up for %s; a replica restarts no sooner than %s after it started", up.Round(time.Second), c.opts.MinUptime)
	}
	if now.Before(notBefore) {
		return false, "waiting a random delay, so that the replicas do not restart together"
	}
	if !c.leading() {
		if c.opts.Leading == nil {
			return true, "no record published (no leader election, or no POD_NAME and POD_NAMESPACE): this replica restarts on its own"
		}
		return true, "a standby: standbys restart first"
	}
	all, err := c.store.list(ctx)
	if err != nil {
		return false, "the leader cannot read the other replicas' records (it waits): " + err.Error()
	}
	var live, coming []string
	fresh := 3 * c.opts.Heartbeat
	for _, r := range all {
		if r.pod == c.opts.Pod {
			continue
		}
		switch {
		case r.live(now, fresh) && r.Hash == hash:
			return true, "the leader, with standby " + r.pod + " running the new config"
		case r.live(now, fresh):
			live = append(live, r.pod)
		case r.Stopping && now.Sub(r.Renewed) < c.opts.Patience:
			coming = append(coming, r.pod)
		}
	}
	if len(live) == 0 && len(coming) == 0 {
		return true, "the leader, with no standby: it restarts alone"
	}
	slices.Sort(live)
	slices.Sort(coming)
	return false, fmt.Sprintf("the leader waits for a standby running the new config (live on another config: %v; restarting: %v)", live, coming)
}
