package provider

import (
	"context"
	"errors"
	"sync"

	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// AnnotationRetry is set on a Node that waits for initialization when a
// vCenter becomes usable again (by the node-topology controller). The change makes the node controller
// retry the Node at once: after failures its work queue backs off
// exponentially (up to 1000 s), so without it a Node could wait many
// minutes after its vCenter returned.
const AnnotationRetry = "vsphere.vsphere-ccm.io/retry-requested"

// waiting remembers the Nodes whose metadata lookup failed.
type waiting struct {
	mu    sync.Mutex
	nodes map[string]struct{}
}

func newWaiting() *waiting { return &waiting{nodes: map[string]struct{}{}} }

// note records the outcome of a lookup for a Node.
func (w *waiting) note(node string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil || errors.Is(err, inventory.ErrAmbiguous) {
		delete(w.nodes, node) // found, or only a person can fix it
		return
	}
	if len(w.nodes) < 100000 {
		w.nodes[node] = struct{}{}
	}
}

func (w *waiting) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.nodes))
	for n := range w.nodes {
		out = append(out, n)
	}
	return out
}

// followVCenter reacts to one vCenter until ctx ends: a health change
// refreshes the gauges; every change that may change an Observation wakes
// Changed's waiters; an inventory that becomes current also wakes
// Recovered's (the node-topology controller then asks the framework to
// retry the Nodes waiting for initialization).
func (p *Provider) followVCenter(ctx context.Context, c *vcenter.Client, ix *inventory.Index) {
	refresh := func() {
		if m := p.opts.Metrics; m != nil {
			m.Refresh(p)
		}
	}
	// Each channel is taken again before Changed's waiters are woken, so
	// that a change is either seen by them or fires the new channel.
	tc := p.topo.Cache(ix.VCenter())
	var tags <-chan struct{} // nil (never ready) without a tag cache
	if tc != nil {
		tags = tc.Changed()
	}
	changed := ix.Changed()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.HealthChanged():
			refresh()
			p.changes.Notify()
		case <-changed:
			changed = ix.Changed()
			p.changes.Notify()
		case <-tags:
			tags = tc.Changed()
			p.changes.Notify()
		case <-ix.Synced():
			refresh()
			p.changes.Notify()
			p.recovered.Notify()
		}
	}
}

// Waiting lists the Nodes whose last lookup failed for a reason that may
// pass (a vCenter down or not current, a VM not found yet).
func (p *Provider) Waiting() []string { return p.waiting.list() }

// Recovered returns a channel closed when a vCenter's inventory next
// becomes current (after its first read, a re-login, an outage), then
// replaced: Nodes waiting for it can be retried.
func (p *Provider) Recovered() <-chan struct{} { return p.recovered.C() }

// Initialized tells Waiting that a Node no longer waits (initialized,
// deleted).
func (p *Provider) Initialized(node string) { p.waiting.note(node, nil) }

// HasUninitializedTaint reports whether the framework has yet to
// initialize the Node.
func HasUninitializedTaint(n *v1.Node) bool { return hasUninitializedTaint(n) }

func hasUninitializedTaint(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}
