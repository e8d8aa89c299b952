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
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// The out-of-service policy (nodes.outOfService): a Node whose VM vCenter
// proves powered off, and which has been NotReady past a grace period,
// gets node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, so that
// Kubernetes deletes its Pods and detaches their volumes at once (the
// non-graceful node shutdown of KEP-2268) instead of after minutes; the
// taint is removed when the VM powers on. Only the taints this controller
// added (marked by AnnotationOutOfService) are ever removed.

// AnnotationOutOfService marks a Node whose out-of-service taint the CCM
// added; its value says why.
const AnnotationOutOfService = "vsphere.vsphere-ccm.io/out-of-service"

// outOfServiceTaint is the taint added.
func outOfServiceTaint(now time.Time) v1.Taint {
	t := metav1.NewTime(now)
	return v1.Taint{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute, TimeAdded: &t}
}

// poweredOff records since when a VM has been seen powered off, without a
// break and with its power state proven.
type poweredOff struct {
	vm    string // vCenter/moref: a VM recreated under the same UUID starts over
	since time.Time
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
	off    poweredOff    // the record to keep (zero: forget)
	after  time.Duration // look again after this long (0: only on a change)
}

// decideOutOfService is the policy, without effects: node as the lister
// has it, the VM's power proof (or the error finding it), the record
// kept from earlier observations, and the time.
func decideOutOfService(pol config.OutOfService, now time.Time, node *v1.Node, pw provider.PowerProof, powErr error, off poweredOff) oosDecision {
	ours := node.Annotations[AnnotationOutOfService] != ""
	tainted := hasOutOfServiceTaint(node)
	notReadySince, notReady := notReadySince(node)
	if powErr != nil || !pw.Proven {
		// Blind: no change either way, and the powered-off time starts over
		// once the state is proven again (a flap may have been missed).
		why := pw.Unproven
		if powErr != nil {
			why = powErr.Error()
		}
		switch wait := pol.NotReadyFor - now.Sub(notReadySince); {
		case !notReady || tainted:
			return oosDecision{}
		case wait > 0:
			return oosDecision{after: wait} // then say it is unproven, if it still is
		}
		return oosDecision{action: oosUnproven, why: why}
	}
	vm := pw.VM
	switch vm.PowerState {
	case vimtypes.VirtualMachinePowerStatePoweredOn:
		if ours {
			return oosDecision{action: oosRemove, why: fmt.Sprintf("VM %s is powered on again: removed the out-of-service taint", vm.Location())}
		}
		return oosDecision{}
	case vimtypes.VirtualMachinePowerStatePoweredOff:
	default:
		// Suspended, or a state this version does not know: never proof.
		return oosDecision{}
	}
	id := vm.VCenter + "/" + vm.Ref.Value
	if off.vm != id {
		off = poweredOff{vm: id, since: now}
	}
	if tainted {
		return oosDecision{off: off}
	}
	if !notReady {
		// The kubelet still reports Ready: its status is about to expire,
		// or the VM came back and went again; wait for NotReady (a change).
		return oosDecision{off: off}
	}
	waitReady := pol.NotReadyFor - now.Sub(notReadySince)
	waitOff := pol.PoweredOffFor - now.Sub(off.since)
	if wait := max(waitReady, waitOff); wait > 0 {
		return oosDecision{off: off, after: wait}
	}
	return oosDecision{action: oosAdd, off: off, why: fmt.Sprintf(
		"VM %s is powered off (seen for %v) and the Node NotReady for %v: added node.kubernetes.io/out-of-service=nodeshutdown:NoExecute so that its Pods are deleted and their volumes detached; it is removed when the VM powers on",
		vm.Location(), now.Sub(off.since).Truncate(time.Second), now.Sub(notReadySince).Truncate(time.Second))}
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

// outOfService holds the powered-off records of the Nodes, by name.
type outOfService struct {
	mu  sync.Mutex
	off map[string]poweredOff
}

func (o *outOfService) get(node string) poweredOff {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.off[node]
}

func (o *outOfService) put(node string, p poweredOff) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.off == nil {
		o.off = map[string]poweredOff{}
	}
	if p == (poweredOff{}) {
		delete(o.off, node)
		return
	}
	o.off[node] = p
}

// syncOutOfService applies the policy to one Node: it returns when to
// look again (0: on a change only).
func (c *Controller) syncOutOfService(ctx context.Context, node *v1.Node) (time.Duration, error) {
	pw, err := c.src.Power(ctx, node)
	now := c.opts.Clock.Now()
	d := decideOutOfService(c.opts.OutOfService, now, node, pw, err, c.oos.get(node.Name))
	c.oos.put(node.Name, d.off)
	switch d.action {
	case oosUnproven:
		c.src.ReportOutOfServiceUnproven(node, d.why)
		// Until the state is proven, changes (inventory, health) bring the
		// Node back; the resync bounds it.
		return 0, nil
	case oosAdd, oosRemove:
		n := node.DeepCopy()
		if d.action == oosAdd {
			n.Spec.Taints = append(n.Spec.Taints, outOfServiceTaint(now))
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[AnnotationOutOfService] = "VM " + pw.VM.Location() + " powered off"
		} else {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeOutOfService })
			delete(n.Annotations, AnnotationOutOfService)
		}
		// An update, not a patch: taints are a list without merge keys,
		// and the resource version makes a concurrent change a conflict
		// (retried) instead of a lost write.
		if _, err := c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{FieldManager: Name}); err != nil {
			return 0, fmt.Errorf("node %s: out-of-service taint: %w", node.Name, err)
		}
		klog.FromContext(ctx).Info("Out-of-service taint changed", "node", node.Name, "added", d.action == oosAdd, "why", d.why)
		c.src.ReportOutOfService(n, d.action == oosAdd, d.why)
	}
	return d.after, nil
}
