package servingcsr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// VM is what this CCM knows, from vCenter, of a Node's VM.
type VM struct {
	// ID is the VM's identity across vCenters (vCenter/moref), as
	// IPOwners names owners.
	ID string
	// VMName is the VM's name in vCenter.
	VMName string
	// Name is where it is, for messages (vCenter, datacenter and name).
	Name      string
	PoweredOn bool
	// Addresses are the addresses this CCM computes for the Node (its
	// address rules applied to what the guest reports), never the Node's
	// status, which the node writes itself.
	Addresses []netip.Addr
	// HostName is the guest's host name (VMware Tools).
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

// Cluster answers from the Nodes the controller sees: a name or a VM
// another Node holds is never proof for this one.
type Cluster interface {
	// NodeExists reports whether a Node has this name.
	NodeExists(name string) bool
	// OthersOnVM names the other Nodes whose providerID is node's BIOS
	// UUID (either byte order).
	OthersOnVM(node *v1.Node) []string
}

// ErrUnknown marks an answer that cannot be told now.
var ErrUnknown = errors.New("cannot be told now")

// Decide checks a request that passed Inspect against its Node, its VM
// and the other Nodes. node is nil when the Node does not exist. It
// approves only when:
//
//   - the Node has this provider's providerID, no other Node claims the
//     same VM, and the Node's name is the VM's name, its guest host name
//     or that name's first label (a Node registered with another VM's
//     UUID under its own name proves nothing);
//   - every IP SAN is an address this CCM computes for the VM and that no
//     other VM reports;
//   - every DNS SAN is the Node's name, or the guest host name whose first
//     label is the Node's name (the guest sets its own host name), and is
//     neither another Node's name nor a Service name (*.svc*).
//
// It denies on a definite mismatch, and leaves the request pending (never
// denied) when the answer cannot be told now. A Node of another provider
// is not this controller's: ignored.
func Decide(ctx context.Context, req Request, node *v1.Node, facts Facts, cluster Cluster) Verdict {
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
	case !strings.HasPrefix(strings.ToLower(strings.TrimSpace(node.Spec.ProviderID)), providerid.Prefix):
		return Verdict{Decision: Ignore, Reason: "NotThisProvider",
			Message: fmt.Sprintf("Node %s has providerID %q, not a vSphere VM's: left to its provider's approver", req.Node, node.Spec.ProviderID)}
	case !providerid.Owned(node.Spec.ProviderID) || !namesUUID(node.Spec.ProviderID):
		return deny("BadProviderID", "Node %s has providerID %q, which names no BIOS UUID as vSphere CCMs write it (vsphere://<uuid>)", req.Node, node.Spec.ProviderID)
	}
	if others := cluster.OthersOnVM(node); len(others) > 0 {
		return pending("VMOfTwoNodes", "Node %s and Node(s) %s have the same VM (providerID %s): neither is proof until the duplicate is removed",
			req.Node, strings.Join(others, ", "), node.Spec.ProviderID)
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
	if !strings.EqualFold(req.Node, vm.VMName) && !strings.EqualFold(req.Node, vm.HostName) && !strings.EqualFold(req.Node, firstLabel(vm.HostName)) {
		if vm.HostName == "" {
			return pending("VMNameUnknown", "Node %s is not the name of its VM %s, and the VM reports no guest host name yet", req.Node, vm.Name)
		}
		return deny("NodeNameNotVMs", "Node %s is neither the name of its VM %s nor its guest host name %q: the Node may have been registered with another VM's UUID",
			req.Node, vm.Name, vm.HostName)
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
		lower := strings.ToLower(d)
		switch {
		case strings.HasSuffix(lower, ".svc") || strings.Contains(lower, ".svc."):
			return deny("DNSNotNodes", "DNS SAN %q is a Service name, never a Node's", d)
		case strings.EqualFold(d, req.Node):
		case vm.HostName != "" && strings.EqualFold(d, vm.HostName) && strings.EqualFold(firstLabel(vm.HostName), req.Node) && !cluster.NodeExists(lower):
		case cluster.NodeExists(lower) || cluster.NodeExists(d):
			return deny("DNSNotNodes", "DNS SAN %q is another Node's name", d)
		default:
			return deny("DNSNotNodes", "DNS SAN %q is neither the Node's name nor its VM %s's guest host name %q under the Node's name", d, vm.Name, vm.HostName)
		}
	}
	return Verdict{Decision: Approve, Reason: "Proven", Message: fmt.Sprintf("every SAN is the VM %s's", vm.Name)}
}

// namesUUID reports whether a providerID holds a BIOS UUID.
func namesUUID(providerID string) bool {
	uuid, err := providerid.UUID(providerID)
	return err == nil && inventory.NormalizeUUID(uuid) != ""
}

// firstLabel is the first DNS label of a host name.
func firstLabel(host string) string {
	label, _, _ := strings.Cut(host, ".")
	return label
}
