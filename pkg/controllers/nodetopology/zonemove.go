package nodetopology

import (
	"context"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// The zone-move taint (labels.onDrift: taint): a Node whose VM now
// resolves to another zone or region keeps its labels and gets a
// NoSchedule taint, so that no new Pod lands on a Node whose labels are
// wrong, until an operator acts: removes the taint (accepting the move),
// drains and re-registers the Node, or moves the VM back (then the CCM
// removes the taint itself).

// TaintZoneMoved is the zone-move taint's key; AnnotationZoneMoved holds
// the move it was added for (label=value, sorted), so that a taint an
// operator removed is not added again for the same move.
const (
	TaintZoneMoved      = "vsphere.vsphere-ccm.io/zone-moved"
	AnnotationZoneMoved = "vsphere.vsphere-ccm.io/zone-moved"
)

// moveOf is the signature of a drift: its labels and new values, sorted.
func moveOf(list []provider.Drift) string {
	parts := make([]string, len(list))
	for i, d := range list {
		parts[i] = d.Label + "=" + d.Now
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// syncZoneMove adds the zone-move taint for a new move, and removes the
// CCM's taint and record once the Node no longer drifts.
func (c *Controller) syncZoneMove(ctx context.Context, node *v1.Node, drift []provider.Drift) error {
	move := moveOf(drift)
	recorded, has := node.Annotations[AnnotationZoneMoved]
	tainted := slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == TaintZoneMoved })
	switch {
	case len(drift) > 0 && recorded != move:
		// A new move (or a further one): taint, and remember it.
		return c.updateNode(ctx, node.Name, func(n *v1.Node) bool {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[AnnotationZoneMoved] = move
			if !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == TaintZoneMoved }) {
				n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: TaintZoneMoved, Value: "true", Effect: v1.TaintEffectNoSchedule})
			}
			klog.FromContext(ctx).Info("Zone-move taint added", "node", n.Name, "move", move)
			return true
		})
	case len(drift) == 0 && (has || tainted):
		// The VM is back where its labels say (or was relabelled): the
		// taint, if still there, and the record go.
		return c.updateNode(ctx, node.Name, func(n *v1.Node) bool {
			delete(n.Annotations, AnnotationZoneMoved)
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == TaintZoneMoved })
			klog.FromContext(ctx).Info("Zone-move taint removed: no drift any more", "node", n.Name)
			return true
		})
	}
	// The same move as recorded: the taint stays as the operator left it.
	return nil
}
