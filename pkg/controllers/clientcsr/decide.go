package clientcsr

import (
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// Decision is what becomes of a request.
type Decision string

// The decisions.
const (
	Approve Decision = "approve"
	Deny    Decision = "deny"
	Pending Decision = "pending" // vCenter cannot tell yet: retried
)

// Reasons, on the request's condition, its events and the metric.
const (
	ReasonBound          = "VMBound"              // approved
	ReasonMalformed      = "NotAKubeletRequest"   // Inspect refused it
	ReasonNoVM           = "NoVMPublishesKey"     // no VM publishes the key's fingerprint
	ReasonSeveralVMs     = "SeveralVMsPublishKey" // more than one VM does
	ReasonNameMismatch   = "NodeNameNotVMName"    // the VM publishing it is named otherwise
	ReasonNoNodeName     = "VMHasNoNodeName"      // nodeNameKey: the provisioner set no Node name on the VM
	ReasonSeveralNamed   = "SeveralVMsNamedNode"  // nodeNameKey: more than one VM holds the Node's name (a clone)
	ReasonTemplate       = "VMIsTemplate"         // a template publishes it
	ReasonBoundElsewhere = "VMBoundToAnotherNode" // another Node is that VM
	ReasonNodeIsOtherVM  = "NodeIsAnotherVM"      // the Node exists, as another VM
	ReasonUnknown        = "VCenterCannotTell"    // pending: an inventory is not current
	ReasonNotPublished   = "KeyNotPublishedYet"   // pending: within the grace period
)

// Verdict is a decision with its reason and a message for the operator.
type Verdict struct {
	Decision Decision
	Reason   string
	Message  string
	// VM is the bound VM, when approved.
	VM inventory.KeyOwner
}

// Facts are what the decision reads: the VMs publishing a fingerprint
// (the inventory), and the Nodes (the informer).
type Facts interface {
	KeyOwners(fingerprint string) ([]inventory.KeyOwner, error)
	// BoundTo lists the VMs whose provisioner set node as their Node name
	// (nodes.identity.nodeNameKey); asked only when it is set.
	BoundTo(node string) ([]inventory.KeyOwner, error)
}

// NodeLister lists the Nodes.
type NodeLister interface {
	List() ([]*v1.Node, error)
}

// Decide tells what becomes of req, made at created; now and grace say
// how long a key nobody publishes yet is waited for (the guest publishes
// it before the kubelet starts, and the inventory sees it within a long
// poll). nameKey is the extraConfig key whose value, set by the
// provisioner, is the Node name a VM may be (KeyOwner.NodeName); "": the
// VM's name.
func Decide(req Request, created, now time.Time, grace time.Duration, nameKey string, facts Facts, nodes []*v1.Node) Verdict {
	owners, err := facts.KeyOwners(req.Fingerprint)
	var incomplete *inventory.IncompleteError
	if err != nil && !errors.As(err, &incomplete) {
		return Verdict{Decision: Pending, Reason: ReasonUnknown, Message: "the VMs publishing the key cannot be listed: " + err.Error()}
	}
	switch {
	case len(owners) > 1:
		return Verdict{Decision: Deny, Reason: ReasonSeveralVMs,
			Message: fmt.Sprintf("%d VMs publish the fingerprint %s of this request's key (%s): a key binds one VM", len(owners), req.Fingerprint, names(owners))}
	case err != nil:
		// Another VM may publish it where an inventory is not current.
		return Verdict{Decision: Pending, Reason: ReasonUnknown, Message: "not every vCenter can tell which VMs publish the key: " + err.Error()}
	case len(owners) == 0 && now.Sub(created) < grace:
		return Verdict{Decision: Pending, Reason: ReasonNotPublished,
			Message: fmt.Sprintf("no VM publishes the fingerprint %s of this request's key yet; waiting up to %s from the request for its guest to publish it", req.Fingerprint, grace)}
	case len(owners) == 0:
		return Verdict{Decision: Deny, Reason: ReasonNoVM,
			Message: fmt.Sprintf("no VM in the configured vCenters and datacenters publishes the fingerprint %s of this request's key: a bootstrap token alone makes its holder no Node", req.Fingerprint)}
	}
	vm := owners[0]
	bound, by := vm.Name, "vCenter names it"
	if nameKey != "" {
		bound, by = vm.NodeName, "its extraConfig "+nameKey+" says"
	}
	switch {
	case vm.Template:
		return Verdict{Decision: Deny, Reason: ReasonTemplate, Message: fmt.Sprintf("VM %s, which publishes the key, is a template", vm)}
	case bound == "" && now.Sub(created) < grace:
		// The provisioner may set it after the guest published its key.
		return Verdict{Decision: Pending, Reason: ReasonNoNodeName,
			Message: fmt.Sprintf("VM %s publishes the key, and asks for Node %q: its provisioner set no Node name in its extraConfig %s yet; waiting up to %s from the request", vm, req.Node, nameKey, grace)}
	case bound == "":
		return Verdict{Decision: Deny, Reason: ReasonNoNodeName,
			Message: fmt.Sprintf("VM %s publishes the key, and asks for Node %q: its provisioner set no Node name in its extraConfig %s", vm, req.Node, nameKey)}
	case !strings.EqualFold(bound, req.Node):
		return Verdict{Decision: Deny, Reason: ReasonNameMismatch,
			Message: fmt.Sprintf("VM %s publishes the key, and asks for Node %q: %s %q", vm, req.Node, by, bound)}
	}
	if nameKey != "" {
		// A name binds one VM: a clone copies the key with the VM.
		named, err := facts.BoundTo(req.Node)
		switch {
		case len(named) > 1:
			return Verdict{Decision: Deny, Reason: ReasonSeveralNamed,
				Message: fmt.Sprintf("%d VMs hold Node name %q in their extraConfig %s (%s): a name binds one VM; clear it on the VMs that are not this Node (a clone copies it)", len(named), req.Node, nameKey, names(named))}
		case err != nil:
			return Verdict{Decision: Pending, Reason: ReasonUnknown, Message: "not every vCenter can tell which VMs hold the Node's name: " + err.Error()}
		case len(named) == 0 || named[0].Ref != vm.Ref || named[0].VCenter != vm.VCenter:
			return Verdict{Decision: Pending, Reason: ReasonUnknown,
				Message: fmt.Sprintf("VM %s holds Node name %q, but the VMs holding it are %s: the inventory is catching up", vm, req.Node, names(named))}
		}
	}
	for _, n := range nodes {
		uuid := nodeUUID(n)
		switch {
		case uuid != "" && strings.EqualFold(uuid, vm.UUID) && n.Name != req.Node:
			return Verdict{Decision: Deny, Reason: ReasonBoundElsewhere, Message: fmt.Sprintf("VM %s is already Node %s", vm, n.Name)}
		case n.Name == req.Node && uuid != "" && !strings.EqualFold(uuid, vm.UUID):
			return Verdict{Decision: Deny, Reason: ReasonNodeIsOtherVM, Message: fmt.Sprintf("Node %s exists as another VM (providerID %s), not %s", n.Name, n.Spec.ProviderID, vm)}
		}
	}
	return Verdict{Decision: Approve, Reason: ReasonBound, VM: vm,
		Message: fmt.Sprintf("bound by vCenter: VM %s (BIOS UUID %s) publishes the key's fingerprint, and %s %q", vm, vm.UUID, by, bound)}
}

// nodeUUID is the BIOS UUID of a Node's vSphere providerID, "" for none.
func nodeUUID(n *v1.Node) string {
	if n.Spec.ProviderID == "" {
		return ""
	}
	u, err := providerid.UUID(n.Spec.ProviderID)
	if err != nil {
		return ""
	}
	return u
}

func names(owners []inventory.KeyOwner) string {
	var s []string
	for _, o := range owners {
		s = append(s, o.String())
	}
	return strings.Join(s, ", ")
}
