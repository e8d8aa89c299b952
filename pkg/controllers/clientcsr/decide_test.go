package clientcsr

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

type fakeFacts struct {
	owners []inventory.KeyOwner
	err    error
	// named are the VMs holding a Node name (BoundTo): by default, the
	// owners whose NodeName is it.
	named    []inventory.KeyOwner
	namedSet bool
	namedErr error
}

func (f fakeFacts) KeyOwners(string) ([]inventory.KeyOwner, error) { return f.owners, f.err }

func (f fakeFacts) BoundTo(node string) ([]inventory.KeyOwner, error) {
	if f.namedSet {
		return f.named, f.namedErr
	}
	var out []inventory.KeyOwner
	for _, o := range f.owners {
		if strings.EqualFold(o.NodeName, node) {
			out = append(out, o)
		}
	}
	return out, f.namedErr
}

func owner(name, uuid string) inventory.KeyOwner {
	return inventory.KeyOwner{VCenter: "vc-a", Name: name, UUID: uuid, Ref: types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-" + name}}
}

func node(name, uuid string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if uuid != "" {
		n.Spec.ProviderID = "vsphere://" + uuid
	}
	return n
}

// TestDecide: each way a bootstrap request binds to a VM, or does not.
func TestDecide(t *testing.T) {
	const u1, u2 = "42000000-0000-0000-0000-000000000001", "42000000-0000-0000-0000-000000000002"
	created := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	req := Request{Node: "worker-1", Fingerprint: "ab"}
	incomplete := &inventory.IncompleteError{Key: "kubelet key fingerprint ab", Causes: []error{errors.New("vc-b: not current")}}
	for _, tc := range []struct {
		name     string
		facts    fakeFacts
		nodes    []*v1.Node
		after    time.Duration
		nameKey  string // nodes.identity.nodeNameKey
		decision Decision
		reason   string
	}{
		{name: "bound", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1)}}, decision: Approve, reason: ReasonBound},
		{name: "bound, the VM's name in capitals", facts: fakeFacts{owners: []inventory.KeyOwner{owner("Worker-1", u1)}}, decision: Approve, reason: ReasonBound},
		{name: "bound again: its own Node exists", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1)}}, nodes: []*v1.Node{node("worker-1", u1)}, decision: Approve, reason: ReasonBound},
		{name: "a token holder in no VM, at first", after: time.Minute, decision: Pending, reason: ReasonNotPublished},
		{name: "a token holder in no VM", after: 10 * time.Minute, decision: Deny, reason: ReasonNoVM},
		{name: "another VM's name", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-2", u2)}}, decision: Deny, reason: ReasonNameMismatch},
		{name: "two VMs publish it", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1), owner("worker-2", u2)}}, decision: Deny, reason: ReasonSeveralVMs},
		{name: "two VMs, one vCenter cannot tell", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1), owner("worker-2", u2)}, err: incomplete}, decision: Deny, reason: ReasonSeveralVMs},
		{name: "one VM, another vCenter cannot tell", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1)}, err: incomplete}, decision: Pending, reason: ReasonUnknown},
		{name: "none, a vCenter cannot tell, long after", facts: fakeFacts{err: incomplete}, after: time.Hour, decision: Pending, reason: ReasonUnknown},
		{name: "a template", facts: fakeFacts{owners: []inventory.KeyOwner{func() inventory.KeyOwner { o := owner("worker-1", u1); o.Template = true; return o }()}}, decision: Deny, reason: ReasonTemplate},
		{name: "the VM is another Node", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1)}}, nodes: []*v1.Node{node("worker-9", u1)}, decision: Deny, reason: ReasonBoundElsewhere},
		{name: "the Node is another VM", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1)}}, nodes: []*v1.Node{node("worker-1", u2)}, decision: Deny, reason: ReasonNodeIsOtherVM},
		// Bound by a provisioner-set extraConfig key instead of the VM name.
		{name: "bound by the name key", nameKey: "k8s.node-name", facts: fakeFacts{owners: []inventory.KeyOwner{named(owner("vm-0042", u1), "worker-1")}}, decision: Approve, reason: ReasonBound},
		{name: "by the name key, the VM's name does not bind", nameKey: "k8s.node-name", facts: fakeFacts{owners: []inventory.KeyOwner{named(owner("worker-1", u1), "worker-7")}}, decision: Deny, reason: ReasonNameMismatch},
		{name: "by the name key, none set yet", nameKey: "k8s.node-name", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1)}}, after: time.Minute, decision: Pending, reason: ReasonNoNodeName},
		{name: "by the name key, none set", nameKey: "k8s.node-name", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1)}}, after: 10 * time.Minute, decision: Deny, reason: ReasonNoNodeName},
		{name: "by the name key, a clone holds the name too", nameKey: "k8s.node-name", facts: fakeFacts{owners: []inventory.KeyOwner{named(owner("vm-0042", u1), "worker-1")},
			namedSet: true, named: []inventory.KeyOwner{named(owner("vm-0042", u1), "worker-1"), named(owner("vm-0042-clone", u2), "worker-1")}}, decision: Deny, reason: ReasonSeveralNamed},
		{name: "by the name key, a vCenter cannot tell who else holds it", nameKey: "k8s.node-name", facts: fakeFacts{owners: []inventory.KeyOwner{named(owner("vm-0042", u1), "worker-1")},
			namedErr: incomplete}, decision: Pending, reason: ReasonUnknown},
		{name: "the Node exists, not initialized", facts: fakeFacts{owners: []inventory.KeyOwner{owner("worker-1", u1)}}, nodes: []*v1.Node{node("worker-1", "")}, decision: Approve, reason: ReasonBound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(req, created, created.Add(tc.after), DefaultGrace, tc.nameKey, tc.facts, tc.nodes)
			if v.Decision != tc.decision || v.Reason != tc.reason {
				t.Fatalf("%s %s (%s); want %s %s", v.Decision, v.Reason, v.Message, tc.decision, tc.reason)
			}
			if v.Decision == Approve && !strings.Contains(v.Message, u1) {
				t.Errorf("approval names no VM: %s", v.Message)
			}
		})
	}
}

// named is o with the Node name its provisioner set (nodeNameKey).
func named(o inventory.KeyOwner, node string) inventory.KeyOwner {
	o.NodeName = node
	return o
}
