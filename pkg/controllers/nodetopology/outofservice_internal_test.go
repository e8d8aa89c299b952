package nodetopology

import (
	"errors"
	"testing"
	"time"

	vimtypes "github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

func TestDecideOutOfService(t *testing.T) {
	pol := config.OutOfService{Enabled: true, NotReadyFor: time.Minute, PoweredOffFor: 30 * time.Second}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	node := func(ready v1.ConditionStatus, since time.Duration, ours, tainted bool) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(ago(time.Hour))}}
		if ready != "" {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(ago(since))}}
		}
		if ours {
			n.Annotations = map[string]string{AnnotationOutOfService: ago(since).Format(time.RFC3339)}
		}
		if tainted {
			n.Spec.Taints = []v1.Taint{outOfServiceTaint(ago(since))}
		}
		return n
	}
	vm := func(ref string, st vimtypes.VirtualMachinePowerState) provider.PowerProof {
		return provider.PowerProof{Proven: true, VM: inventory.VM{VCenter: "vc-a", Name: "node-1",
			Ref: vimtypes.ManagedObjectReference{Type: "VirtualMachine", Value: ref}, PowerState: st}}
	}
	off := vm("vm-1", vimtypes.VirtualMachinePowerStatePoweredOff)
	on := vm("vm-1", vimtypes.VirtualMachinePowerStatePoweredOn)
	unproven := off
	unproven.Proven, unproven.Unproven = false, "vCenter \"vc-a\": inventory not current"
	// rec: the VM seen off for off and the Node NotReady for seen (0: never).
	rec := func(off, seen time.Duration) record {
		r := record{}
		if off > 0 {
			r.vm, r.offSince = "vc-a/vm-1", ago(off)
		}
		if seen > 0 {
			r.notReadySeen = ago(seen)
		}
		return r
	}
	const never = time.Duration(-1)
	const fromNow = time.Duration(0)

	tests := []struct {
		name    string
		node    *v1.Node
		pw      provider.PowerProof
		err     error
		rec     record
		action  oosAction
		wantOff time.Duration // the record's powered-off age (never: none; fromNow: starts now)
		after   time.Duration
	}{
		{"off long enough, NotReady long enough", node(v1.ConditionUnknown, 2*time.Minute, false, false), off, nil, rec(31*time.Second, 2*time.Minute), oosAdd, 31 * time.Second, 0},
		{"a Node that never reported Ready counts from its creation", node("", 0, false, false), off, nil, rec(time.Minute, time.Minute), oosAdd, time.Minute, 0},
		{"first seen off: wait poweredOffFor", node(v1.ConditionFalse, 2*time.Minute, false, false), off, nil, rec(0, 2*time.Minute), oosNone, fromNow, 30 * time.Second},
		{"NotReady too recently: wait notReadyFor", node(v1.ConditionUnknown, 10*time.Second, false, false), off, nil, rec(time.Minute, 10*time.Second), oosNone, time.Minute, 50 * time.Second},
		{"a transition time of another clock does not shorten the wait", node(v1.ConditionUnknown, time.Hour, false, false), off, nil, rec(time.Minute, 0), oosNone, time.Minute, time.Minute},
		{"a transition time ahead of ours lengthens it", node(v1.ConditionUnknown, -30*time.Second, false, false), off, nil, rec(time.Minute, time.Hour), oosNone, time.Minute, 90 * time.Second},
		{"still Ready: wait for a change", node(v1.ConditionTrue, time.Hour, false, false), off, nil, rec(time.Hour, 0), oosNone, time.Hour, 0},
		{"a VM recreated under the same UUID starts over", node(v1.ConditionUnknown, time.Hour, false, false), vm("vm-2", vimtypes.VirtualMachinePowerStatePoweredOff), nil, rec(time.Hour, time.Hour), oosNone, fromNow, 30 * time.Second},
		{"already tainted (by an operator): nothing", node(v1.ConditionUnknown, time.Hour, false, true), off, nil, rec(time.Hour, time.Hour), oosNone, time.Hour, 0},
		{"powered on: our taint removed", node(v1.ConditionUnknown, time.Hour, true, true), on, nil, rec(time.Hour, time.Hour), oosRemove, never, 0},
		{"powered on: an operator's taint left alone", node(v1.ConditionUnknown, time.Hour, false, true), on, nil, rec(0, time.Hour), oosNone, never, 0},
		{"powered on, annotation left without taint: cleaned up", node(v1.ConditionTrue, time.Hour, true, false), on, nil, rec(0, 0), oosRemove, never, 0},
		{"suspended is never proof", node(v1.ConditionUnknown, time.Hour, false, false), vm("vm-1", vimtypes.VirtualMachinePowerStateSuspended), nil, rec(time.Hour, time.Hour), oosNone, never, 0},
		{"unproven (inventory not current): reported, record dropped", node(v1.ConditionUnknown, 2*time.Minute, false, false), unproven, nil, rec(time.Hour, 2*time.Minute), oosUnproven, never, 0},
		{"lookup failed (vCenter down): reported", node(v1.ConditionUnknown, 2*time.Minute, false, false), provider.PowerProof{}, errors.New("vCenter down"), rec(time.Hour, 2*time.Minute), oosUnproven, never, 0},
		{"unproven but still within notReadyFor: look again then", node(v1.ConditionUnknown, 10*time.Second, false, false), unproven, nil, rec(0, 10*time.Second), oosNone, never, 50 * time.Second},
		{"unproven and tainted: nothing removed", node(v1.ConditionUnknown, time.Hour, true, true), unproven, nil, rec(0, time.Hour), oosNone, never, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decideOutOfService(pol, now, tt.node, tt.pw, tt.err, tt.rec)
			if d.action != tt.action {
				t.Errorf("action %v, want %v (%s)", d.action, tt.action, d.why)
			}
			if d.after != tt.after {
				t.Errorf("look again after %v, want %v", d.after, tt.after)
			}
			switch tt.wantOff {
			case never:
				if !d.rec.offSince.IsZero() || d.rec.vm != "" {
					t.Errorf("record %+v, want no powered-off time", d.rec)
				}
			default:
				if d.rec.offSince != ago(tt.wantOff) {
					t.Errorf("powered off since %v ago, want %v", now.Sub(d.rec.offSince), tt.wantOff)
				}
			}
			if _, notReady := notReadySince(tt.node); notReady && d.rec.notReadySeen.IsZero() {
				t.Errorf("a NotReady Node left no sighting in the record")
			}
			if (d.action == oosAdd || d.action == oosRemove || d.action == oosUnproven) && d.why == "" {
				t.Errorf("no reason for the event")
			}
		})
	}
}
