package servingcsr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// VM is what this CCM knows, from vCenter, of a Node's VM.
type VM struct {
	// ID is the VM's identity across vCenters (vCenter/moref), as
	// IPOwners names owners.
	ID string
	// Name is where it is, for messages (vCenter, datacenter and name).
	Name      string
	PoweredOn bool
	// Addresses are the addresses this CCM computes for the Node (its
	// address rules applied to what the guest reports), never the Node's
	// status, which the node writes itself.
	Addresses []netip.Addr
	// HostName is the guest's host name.
	HostName string
}

// Facts answers from the inventory, without a vSphere request when it is
// current (ProviderFacts). An error wrapping ErrUnknown means the answer
// cannot be told now (a vCenter down, an inventory not synced, a VM found
// twice): the request waits; any other error is a definite answer.
type Facts interface {
	// NodeVM is the VM of the Node (by its providerID).
	NodeVM(ctx context.Context, node *v1.Node) (VM, error)
	// IPOwners are the IDs of the VMs, in every vCenter, that report ip.
	IPOwners(ctx context.Context, ip netip.Addr) ([]string, error)
}

// ErrUnknown marks an answer that cannot be told now.
var ErrUnknown = errors.New("cannot be told now")

// providerIDPrefix marks this provider's Nodes.
const providerIDPrefix = "vsphere://"

// Decide checks a request that passed Inspect against its Node and VM:
// approve only when every IP SAN is an address this CCM computes for the
// VM and no other VM reports, and every DNS SAN is the Node's name or the
// VM's guest host name; deny on a definite mismatch; leave it pending when
// the answer cannot be told now (never deny then). node is nil when the
// Node does not exist.
func Decide(ctx context.Context, req Request, node *v1.Node, facts Facts) Verdict {
	pending := func(reason, format string, args ...any) Verdict {
		return Verdict{Decision: Pending, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	deny := func(reason, format string, args ...any) Verdict {
		return Verdict{Decision: Deny, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case node == nil:
		return pending("NodeNotFound", "Node %s does not exist (yet)", req.Node)
	case node.Spec.ProviderID == "":
		return pending("NodeNotInitialized", "Node %s has no providerID yet", req.Node)
	case !strings.HasPrefix(strings.ToLower(node.Spec.ProviderID), providerIDPrefix):
		return deny("NotThisProvider", "Node %s has providerID %q, not a vSphere VM's", req.Node, node.Spec.ProviderID)
	}
	vm, err := facts.NodeVM(ctx, node)
	switch {
	case errors.Is(err, ErrUnknown):
		return pending("VMUnknown", "the VM of Node %s cannot be told now: %v", req.Node, err)
	case err != nil:
		return deny("NoVM", "Node %s: %v", req.Node, err)
	case !vm.PoweredOn:
		return pending("VMPoweredOff", "the VM %s of Node %s is not powered on", vm.Name, req.Node)
	}
	for _, ip := range req.IPs {
		if !slices.Contains(vm.Addresses, ip) {
			return deny("IPNotNodes", "IP SAN %s is not an address of the VM %s of Node %s (its addresses: %v)", ip, vm.Name, req.Node, vm.Addresses)
		}
		// Any error here is "not known now": the address is the VM's, only
		// its uniqueness is in question, which never justifies a denial.
		owners, err := facts.IPOwners(ctx, ip)
		switch {
		case err != nil:
			return pending("IPOwnersUnknown", "which VMs report IP %s cannot be told now: %v", ip, err)
		case len(owners) > 1:
			return deny("SharedIP", "IP SAN %s is reported by %d VMs: %s (a VIP or a moved address proves nothing)", ip, len(owners), strings.Join(owners, ", "))
		case len(owners) == 0 || owners[0] != vm.ID:
			// The VM's details and every VM's addresses are followed
			// apart: they disagree for a moment while an address moves.
			return pending("IPOwnersUnknown", "IP %s is an address of the VM %s, but the VMs reporting it are %v: the inventory is catching up", ip, vm.Name, owners)
		}
	}
	for _, d := range req.DNSNames {
		if !strings.EqualFold(d, req.Node) && (vm.HostName == "" || !strings.EqualFold(d, vm.HostName)) {
			return deny("DNSNotNodes", "DNS SAN %q is neither the Node's name nor the guest host name %q of its VM %s", d, vm.HostName, vm.Name)
		}
	}
	return Verdict{Decision: Approve, Reason: "Proven", Message: fmt.Sprintf("every SAN is the VM %s's", vm.Name)}
}
