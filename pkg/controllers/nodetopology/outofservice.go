package nodetopology

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	vimtypes "github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// The out-of-service policy (nodes.outOfService): a Node whose VM vCenter
// proves powered off, and which has been NotReady past a grace period,
// gets node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, so that
// Kubernetes deletes its Pods and detaches their volumes at once (the
// non-graceful node shutdown of KEP-2268) instead of after minutes; the
// taint is removed when the VM powers on. Only the taints this controller
// added (marked by AnnotationOutOfService) are ever removed.

// Event reasons of the out-of-service policy.
const (
	// ReasonOutOfServiceTaintAdded (Warning): the Node's VM is proven
	// powered off and the Node NotReady; its Pods are deleted and their
	// volumes detached.
	ReasonOutOfServiceTaintAdded = "OutOfServiceTaintAdded"
	// ReasonOutOfServiceTaintRemoved (Normal): the VM is powered on again.
	ReasonOutOfServiceTaintRemoved = "OutOfServiceTaintRemoved"
	// ReasonOutOfServiceUnproven (Warning): the Node is NotReady past the
	// grace period but its VM's power state cannot be proven; no taint.
	ReasonOutOfServiceUnproven = "OutOfServiceUnproven"
)

// AnnotationOutOfService marks a Node whose out-of-service taint the CCM
// added; its value says why.
const AnnotationOutOfService = "vsphere.vsphere-ccm.io/out-of-service"

// powerProver is what the out-of-service policy (syncOutOfService) asks.
type powerProver interface {
	// Power says whether vCenter proves the power state of node's VM now
	// (the out-of-service policy), without effects.
	Power(ctx context.Context, node *v1.Node) (provider.PowerProof, error)
	// ConfirmPoweredOff asks vCenter directly, right before the taint,
	// whether the VM is still powered off with the Node's UUID.
	ConfirmPoweredOff(ctx context.Context, node *v1.Node, vm inventory.VM) error
}

// outOfServiceTaint is the taint added.
func outOfServiceTaint(now time.Time) v1.Taint {
	t := metav1.NewTime(now)
	return v1.Taint{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute, TimeAdded: &t}
}

// record is what the policy remembers of a Node between checks: since
// when its VM has been seen powered off (without a break, with its power
// state proven), and since when this controller has seen the Node
// NotReady. Both are on the controller's clock: the Ready condition's
// transition time comes from another machine's clock (the kubelet's, or
// the controller manager's), so it may only lengthen the wait. A leader
// change starts both over.
type record struct {
	vm           string // vCenter/moref: a VM recreated under the same UUID starts over
	offSince     time.Time
	notReadySeen time.Time
}

// oosAction is what the policy does to a Node.
type oosAction int

const (
	oosNone     oosAction = iota
	oosAdd                // add the taint and the annotation
	oosRemove             // remove the taint and the annotation
	oosUnproven           // none, and report that the VM's state could not be proven
)

// oosDecision is the policy's verdict on one observation of a Node.
type oosDecision struct {
	action oosAction
	why    string        // for the event (oosAdd, oosRemove, oosUnproven)
	rec    record        // the record to keep
	after  time.Duration // look again after this long (0: only on a change)
}

// decideOutOfService is the policy, without effects: node as the lister
// has it, the VM's power proof (or the error finding it), the record
// kept from earlier checks, and the time.
func decideOutOfService(pol config.OutOfService, now time.Time, node *v1.Node, pw provider.PowerProof, powErr error, rec record) oosDecision {
	ours := node.Annotations[AnnotationOutOfService] != ""
	tainted := hasOutOfServiceTaint(node)
	transition, notReady := notReadySince(node)
	switch {
	case !notReady:
		rec.notReadySeen = time.Time{}
	case rec.notReadySeen.IsZero():
		rec.notReadySeen = now
	}
	// The later of the two: another clock may be ahead of ours.
	since := rec.notReadySeen
	if transition.After(since) {
		since = transition
	}
	waitReady := pol.NotReadyFor - now.Sub(since)
	if powErr != nil || !pw.Proven {
		// Blind: no change either way, and the powered-off time starts over
		// once the state is proven again (a flap may have been missed).
		rec.vm, rec.offSince = "", time.Time{}
		why := pw.Unproven
		if powErr != nil {
			why = powErr.Error()
		}
		switch {
		case !notReady || tainted:
			return oosDecision{rec: rec}
		case waitReady > 0:
			return oosDecision{rec: rec, after: waitReady} // then say it is unproven, if it still is
		}
		return oosDecision{action: oosUnproven, why: why, rec: rec}
	}
	vm := pw.VM
	switch vm.PowerState {
	case vimtypes.VirtualMachinePowerStatePoweredOn:
		rec.vm, rec.offSince = "", time.Time{}
		if ours {
			return oosDecision{action: oosRemove, rec: rec, why: fmt.Sprintf("VM %s is powered on again: removed the out-of-service taint", vm.Location())}
		}
		return oosDecision{rec: rec}
	case vimtypes.VirtualMachinePowerStatePoweredOff:
	default:
		// Suspended, or a state this version does not know: never proof.
		rec.vm, rec.offSince = "", time.Time{}
		return oosDecision{rec: rec}
	}
	if id := vm.VCenter + "/" + vm.Ref.Value; rec.vm != id {
		rec.vm, rec.offSince = id, now
	}
	if tainted || !notReady {
		// Tainted already; or the kubelet still reports Ready: its status
		// is about to expire, or the machine the Node runs on is not this
		// VM: wait for NotReady (a change).
		return oosDecision{rec: rec}
	}
	waitOff := pol.PoweredOffFor - now.Sub(rec.offSince)
	if wait := max(waitReady, waitOff); wait > 0 {
		return oosDecision{rec: rec, after: wait}
	}
	return oosDecision{action: oosAdd, rec: rec, why: fmt.Sprintf(
		"VM %s is powered off (seen for %v) and the Node NotReady for %v: added node.kubernetes.io/out-of-service=nodeshutdown:NoExecute so that its Pods are deleted and their volumes detached; it is removed when the VM powers on",
		vm.Location(), now.Sub(rec.offSince).Truncate(time.Second), now.Sub(since).Truncate(time.Second))}
}

func hasOutOfServiceTaint(node *v1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeOutOfService })
}

// notReadySince reports whether the Node's Ready condition is False or
// Unknown, and since when; a Node that never reported one is NotReady
// since it was created.
func notReadySince(node *v1.Node) (time.Time, bool) {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.LastTransitionTime.Time, c.Status != v1.ConditionTrue
		}
	}
	return node.CreationTimestamp.Time, true
}

// readyChanged reports whether the Ready condition's status changed.
func readyChanged(o, n *v1.Node) bool {
	_, a := notReadySince(o)
	_, b := notReadySince(n)
	return a != b
}

// outOfService holds the records of the Nodes, by name, and which Nodes
// carry the taint this controller added (for the gauge: a new leader
// counts the taints its predecessor added). Its lock covers both maps.
type outOfService struct {
	mu      sync.Mutex
	recs    map[string]record
	tainted map[string]bool
}

func (o *outOfService) get(node string) record {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.recs[node]
}

func (o *outOfService) put(node string, r record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.recs == nil {
		o.recs = map[string]record{}
	}
	if r == (record{}) {
		delete(o.recs, node)
		return
	}
	o.recs[node] = r
}

// setTainted records whether node carries the controller's taint and
// returns how many Nodes do.
func (o *outOfService) setTainted(node string, tainted bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tainted == nil {
		o.tainted = map[string]bool{}
	}
	if tainted {
		o.tainted[node] = true
	} else {
		delete(o.tainted, node)
	}
	return len(o.tainted)
}

// syncOutOfService applies the policy to one Node: it returns when to
// look again (0: on a change only).
func (c *Controller) syncOutOfService(ctx context.Context, node *v1.Node) (time.Duration, error) {
	pw, err := c.power.Power(ctx, node)
	now := c.opts.Clock.Now()
	d := decideOutOfService(c.opts.OutOfService, now, node, pw, err, c.oos.get(node.Name))
	c.oos.put(node.Name, d.rec)
	ours := node.Annotations[AnnotationOutOfService] != "" && hasOutOfServiceTaint(node)
	defer func() { c.opts.Metrics.setOutOfServiceNodes(c.oos.setTainted(node.Name, ours)) }()
	switch d.action {
	case oosUnproven:
		c.reportUnproven(node, d.why)
		// Until the state is proven, changes (inventory, health) bring the
		// Node back; the resync bounds it.
		return 0, nil
	case oosAdd:
		// The index's copy may be up to StaleAfter old: ask vCenter now.
		if err := c.power.ConfirmPoweredOff(ctx, node, pw.VM); err != nil {
			c.oos.put(node.Name, record{notReadySeen: d.rec.notReadySeen})
			c.reportUnproven(node, "the live check before the taint disagrees: "+err.Error())
			return 0, nil
		}
		if err := c.updateNode(ctx, node.Name, func(n *v1.Node) bool {
			if hasOutOfServiceTaint(n) {
				return false // tainted meanwhile (an operator)
			}
			t := outOfServiceTaint(now)
			n.Spec.Taints = append(n.Spec.Taints, t)
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[AnnotationOutOfService] = t.TimeAdded.UTC().Format(time.RFC3339)
			return true
		}); err != nil {
			return 0, err
		}
		ours = true
	case oosRemove:
		if err := c.updateNode(ctx, node.Name, func(n *v1.Node) bool {
			added, ok := n.Annotations[AnnotationOutOfService]
			if !ok {
				return false
			}
			// Only the taint this controller added: the one whose time is
			// in the annotation. An operator's is left alone.
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool {
				return t.Key == v1.TaintNodeOutOfService && t.TimeAdded != nil && t.TimeAdded.UTC().Format(time.RFC3339) == added
			})
			delete(n.Annotations, AnnotationOutOfService)
			return true
		}); err != nil {
			return 0, err
		}
		ours = false
	default:
		return d.after, nil
	}
	klog.FromContext(ctx).Info("Out-of-service taint changed", "node", node.Name, "added", d.action == oosAdd, "why", d.why)
	reason, typ, change := ReasonOutOfServiceTaintRemoved, v1.EventTypeNormal, "removed"
	if d.action == oosAdd {
		reason, typ, change = ReasonOutOfServiceTaintAdded, v1.EventTypeWarning, "added"
	}
	c.opts.Events.Event(node, typ, reason, d.why)
	c.opts.Metrics.outOfService(change)
	return d.after, nil
}

// reportUnproven says that node is NotReady past the grace period but its
// VM's power state could not be proven, so no taint is added (a vCenter
// outage, a host that does not answer).
func (c *Controller) reportUnproven(node *v1.Node, why string) {
	c.opts.Events.Event(node, v1.EventTypeWarning, ReasonOutOfServiceUnproven,
		"NotReady past nodes.outOfService.notReadyFor, but its VM's power state cannot be proven, so no out-of-service taint is added: "+why)
	c.opts.Metrics.unproven()
}

// updateNode (the out-of-service and zone-move taints) applies change to
// the Node as the API server has it now and
// updates it, again on a conflict (a relabel or the framework changed it
// meanwhile). An update, not a patch: taints are a list without merge
// keys, and the resource version makes a concurrent change a conflict
// instead of a lost write. change returns false for nothing to do.
func (c *Controller) updateNode(ctx context.Context, name string, change func(*v1.Node) bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !change(n) {
			return nil
		}
		_, err = c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{FieldManager: Name})
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s: update: %w", name, err)
	}
	return nil
}
