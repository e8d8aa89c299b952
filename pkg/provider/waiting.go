package provider

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// AnnotationRetry is set on a Node that waits for initialization when a
// vCenter becomes usable again. The change makes the node controller
// retry the Node at once: after failures its work queue backs off
// exponentially (up to 1000 s), so without it a Node could wait many
// minutes after its vCenter returned.
const AnnotationRetry = "vsphere.vsphere-ccm.io/retry-requested"

// waiting remembers the Nodes whose metadata lookup failed, and touches
// those still uninitialized whenever a vCenter's inventory becomes current.
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
// refreshes the gauges; an inventory that becomes current refreshes them
// and touches the Nodes waiting for initialization (p.kube may be nil in
// tools, which have no Nodes to touch).
func (p *Provider) followVCenter(ctx context.Context, c *vcenter.Client, ix *inventory.Index) {
	log := klog.FromContext(ctx).WithName("retry").WithValues("vcenter", ix.VCenter())
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
			continue
		case <-changed:
			changed = ix.Changed()
			p.changes.Notify()
			continue
		case <-tags:
			tags = tc.Changed()
			p.changes.Notify()
			continue
		case <-ix.Synced():
			refresh()
			p.changes.Notify()
		}
		if p.kube == nil {
			continue
		}
		for _, name := range p.waiting.list() {
			err := p.waiting.touch(ctx, p.kube, name)
			switch {
			case apierrors.IsNotFound(err):
				p.waiting.note(name, nil)
			case err != nil:
				log.Error(err, "Could not ask for a retry of a Node waiting for initialization", "node", name)
			}
		}
	}
}

// touch annotates the Node if it still waits for initialization.
func (w *waiting) touch(ctx context.Context, kube kubernetes.Interface, name string) error {
	n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !hasUninitializedTaint(n) {
		w.note(name, nil) // initialized meanwhile; periodic updates need no nudge
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		AnnotationRetry: time.Now().UTC().Format(time.RFC3339Nano)}}})
	_, err = kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Asked for a retry of a Node waiting for initialization", "node", name)
	}
	return err
}

func hasUninitializedTaint(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}
