package servingcsr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/hostnames"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// Whose word each fact is:
//
//   - the API server's: who sent the request (Request.Node, from the
//     authenticated user name);
//   - the kubelet's: the Node's name and the machine UUID it registered,
//     from which the CCM set the providerID, and every SAN it asks for;
//   - vCenter's own: the VM's identity, name and power state (VM);
//   - the guest's, which vCenter only relays: the addresses and the host
//     name VMware Tools reports (VM.Guest, a GuestReport);
//   - the cluster's: Services, their ranges and load balancer addresses,
//     the API server's endpoints, Pod ranges, the other Nodes (Cluster).
//
// A claim is never proven by its claimant's word: a SAN the guest reports
// is approved only when vCenter and the cluster name no one else for it.

// GuestReport is what a VM's guest says of itself through VMware Tools:
// its own word, which root in the guest sets at will and vCenter only
// relays. It is never proof on its own.
type GuestReport struct {
	// Addresses are the addresses this CCM computes for the Node (its
	// address rules applied to what the guest reports).
	Addresses []netip.Addr
	// HostName is the guest's host name.
	HostName string
}

// VM is a Node's VM: what vCenter itself records of it, and apart, what
// its guest reports.
type VM struct {
	// ID is the VM's identity across vCenters (vCenter/moref), as
	// IPOwners and IPHolders name VMs.
	ID string
	// VMName is the VM's name in vCenter.
	VMName string
	// Name is where it is, for messages (vCenter, datacenter and name).
	Name      string
	PoweredOn bool
	// NameKey is nodes.identity.nodeNameKey when Node names are bound by
	// it, BoundName the Node name the VM's provisioner set there ("":
	// none), BoundVMs how many VMs hold that name there (a clone copies
	// it). vCenter's word: no guest can write that key.
	NameKey, BoundName string
	BoundVMs           int
	// Guest is the guest's word.
	Guest GuestReport
}

// Holder is a VM or an ESXi host that vCenter finds by an address.
type Holder struct {
	// ID is vCenter/moref (a VM's ID as in VM.ID).
	ID string
	// Host: an ESXi host (a VMkernel adapter), not a VM.
	Host bool
	// What names it for messages.
	What string
}

// Facts answers from the inventory, without a vSphere request when it is
// current (ProviderFacts), except IPHolders, which reads every vCenter. An
// error wrapping ErrUnknown means the answer cannot be told now (a
// vCenter down, an inventory not synced, a VM found twice): the request
// waits; any other error is a definite answer.
type Facts interface {
	// NodeVM is the VM of the Node (by its providerID).
	NodeVM(ctx context.Context, node *v1.Node) (VM, error)
	// IPOwners are the IDs of the VMs, in every configured datacenter,
	// whose guest reports ip on any adapter.
	IPOwners(ctx context.Context, ip netip.Addr) ([]string, error)
	// IPHolders are the ESXi hosts (by their VMkernel adapters) and the
	// VMs outside the configured datacenters (by their primary guest
	// address) that have ip, as vCenter told after notBefore.
	IPHolders(ctx context.Context, ip netip.Addr, notBefore time.Time) ([]Holder, error)
}

// Owner is what in the cluster holds an address or a name: Reason is the
// denial's reason, What names the owner. Claim, when set, says whose word
// the holding rests on: an object a kubelet or a namespace's users write
// themselves (another Node's status.addresses, a Service's externalIPs or
// name). Such a claim makes a request wait, never denies it: one Node or
// namespace user must not deny other Nodes their certificates for good.
type Owner struct {
	Reason string
	What   string
	Claim  string
}

// Cluster answers from what the cluster records (the controller's
// informers): a name, an address or a VM something else holds is never
// proof for this Node.
type Cluster interface {
	// OthersOnVM names the other Nodes whose providerID is node's BIOS
	// UUID (either byte order).
	OthersOnVM(node *v1.Node) []string
	// IPOwner is what, other than the Node named node, holds ip: a
	// Service, a Service or Pod range, the API server, another Node.
	IPOwner(ip netip.Addr, node *v1.Node) (Owner, bool)
	// ServiceRangeKnown: the Service range is configured or read from
	// the API server; without it a free address there cannot be told
	// from a Node's.
	ServiceRangeKnown() bool
	// NameOwner is what, other than the Node named node, a DNS name is in
	// the cluster: a Service's name, a name under a namespace or the
	// cluster domain, the API server's, another Node's.
	NameOwner(name string, node *v1.Node) (Owner, bool)
}

// Bounds are the operator's optional bounds
// (nodes.servingCertificates.allowedIPRanges, allowedDNSDomains); empty:
// no bound.
type Bounds struct {
	IPRanges   []netip.Prefix
	DNSDomains []string
}

// ErrUnknown marks an answer that cannot be told now.
var ErrUnknown = errors.New("cannot be told now")

// Decide checks a request that passed Inspect against its Node, its VM,
// the cluster and the bounds. node is nil when the Node does not exist.
// It approves only when:
//
//   - the Node has this provider's providerID, no other Node claims the
//     same VM, and the Node's name is the one its provisioner bound the VM
//     to, and no other VM to (with nodes.identity.nodeNameKey), or else
//     the VM's name, its guest host name or that name's first label (a
//     Node registered with another VM's UUID under its own name proves
//     nothing);
//   - every IP SAN is in the bounds, held by nothing in the cluster, an
//     address this CCM computes for the VM, reported by no other VM, and
//     found by vCenter on no other VM or ESXi host in any datacenter;
//   - every DNS SAN is the Node's name, or the guest host name whose first
//     label is the Node's name (within the bounds), and no name in the
//     cluster (a Service's, a namespace's, the cluster domain's, the API
//     server's, another Node's).
//
// It denies on a definite mismatch, and leaves the request pending (never
// denied) when the answer cannot be told now. A Node of another provider
// is not this controller's: ignored (Inspect's caller checks that first).
func Decide(ctx context.Context, req Request, node *v1.Node, facts Facts, cluster Cluster, bounds Bounds) Verdict {
	if v, done := checkNode(req, node, cluster); done {
		return v
	}
	// What the cluster and the bounds rule out needs no vCenter: first, so
	// that a denial does not wait for a vCenter. A claim by another party
	// waits only once nothing denies the request.
	v, done, claimed := checkSANs(req, node, cluster, bounds)
	if done {
		return v
	}
	vm, err := facts.NodeVM(ctx, node)
	switch {
	case errors.Is(err, ErrUnknown):
		return pending("VMUnknown", "the VM of Node %s cannot be told now: %v", req.Node, err)
	case err != nil:
		return deny("NoVM", "Node %s: %v (every vCenter, asked directly in all its datacenters, confirms it)", req.Node, err)
	case !vm.PoweredOn:
		return pending("VMPoweredOff", "the VM %s of Node %s is not powered on", vm.Name, req.Node)
	}
	host := vm.Guest.HostName
	switch {
	case vm.NameKey != "" && vm.BoundName == "":
		// Node names are bound by the key, as at initialization and for
		// client certificates: the VM's or guest's names prove nothing (a
		// kubelet may register any VM's UUID with --provider-id).
		return pending("VMHasNoNodeName", "VM %s of Node %s has no Node name in its extraConfig %s: with nodes.identity.nodeNameKey a Node's name is the one its provisioner bound the VM to",
			vm.Name, req.Node, vm.NameKey)
	case vm.NameKey != "":
		// The provisioner's binding is the VM's name for Nodes: a kubelet
		// registered under another name (--hostname-override) is bound
		// by it, and the VM's or guest's names prove nothing against it.
		if !strings.EqualFold(req.Node, vm.BoundName) {
			return deny("NodeNameNotBound", "Node %s is not the Node name %q VM %s is bound to in its extraConfig %s: the Node may have been registered with another VM's UUID",
				req.Node, vm.BoundName, vm.Name, vm.NameKey)
		}
		if vm.BoundVMs > 1 {
			return deny("SeveralVMsNamedNode", "%d VMs hold Node name %q in their extraConfig %s (a clone copies it): a name binds one VM; clear or change the key on the VMs that are not this Node",
				vm.BoundVMs, vm.BoundName, vm.NameKey)
		}
	case !strings.EqualFold(req.Node, vm.VMName) && !strings.EqualFold(req.Node, host) && !strings.EqualFold(req.Node, hostnames.FirstLabel(host)):
		if host == "" {
			return pending("VMNameUnknown", "Node %s is not the name of its VM %s, and the VM reports no guest host name yet", req.Node, vm.Name)
		}
		return deny("NodeNameNotVMs", "Node %s is neither the name of its VM %s nor its guest host name %q: the Node may have been registered with another VM's UUID",
			req.Node, vm.Name, host)
	}
	for _, d := range req.DNSNames {
		switch {
		case strings.EqualFold(d, req.Node):
		case hostnames.Fits(req.Node, d, bounds.DNSDomains) && strings.EqualFold(strings.TrimSuffix(d, "."), strings.TrimSuffix(host, ".")):
		case len(bounds.DNSDomains) > 0 && hostnames.Fits(req.Node, d, nil) && strings.EqualFold(d, host):
			return deny("DNSOutsideAllowedDomains", "DNS SAN %q, the guest host name of VM %s, is under none of nodes.servingCertificates.allowedDNSDomains %v", d, vm.Name, bounds.DNSDomains)
		default:
			return deny("DNSNotNodes", "DNS SAN %q is neither the Node's name nor its VM %s's guest host name %q under the Node's name", d, vm.Name, host)
		}
	}
	for _, ip := range req.IPs {
		if v, done := checkIP(ctx, req, ip, vm, facts); done {
			return v
		}
	}
	// Last, as it asks every vCenter: only for a request every other
	// check approves.
	for _, ip := range req.IPs {
		if v, done := checkHolders(ctx, req, ip, vm, facts); done {
			return v
		}
	}
	if claimed != nil {
		return *claimed
	}
	return Verdict{Decision: Approve, Reason: "Proven", Message: fmt.Sprintf("every SAN is the VM %s's, and nothing else in the cluster or in vSphere holds one", vm.Name)}
}

func pending(reason, format string, args ...any) Verdict {
	return Verdict{Decision: Pending, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func deny(reason, format string, args ...any) Verdict {
	return Verdict{Decision: Deny, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// checkNode checks the Node the request is for; done when that decides.
func checkNode(req Request, node *v1.Node, cluster Cluster) (Verdict, bool) {
	switch {
	case node == nil:
		return pending("NodeNotFound", "Node %s does not exist (yet)", req.Node), true
	case node.Spec.ProviderID == "":
		return pending("NodeNotInitialized", "Node %s has no providerID yet", req.Node), true
	case !providerid.Owned(node.Spec.ProviderID):
		return Verdict{Decision: Ignore, Reason: "NotThisProvider",
			Message: fmt.Sprintf("Node %s has providerID %q, not a vSphere VM's: left to its provider's approver", req.Node, node.Spec.ProviderID)}, true
	case !namesUUID(node.Spec.ProviderID):
		return deny("BadProviderID", "Node %s has providerID %q, which names no BIOS UUID as vSphere CCMs write it (vsphere://<uuid>)", req.Node, node.Spec.ProviderID), true
	}
	if others := cluster.OthersOnVM(node); len(others) > 0 {
		return pending("VMOfTwoNodes", "Node %s and Node(s) %s have the same VM (providerID %s): neither is proof until the duplicate is removed",
			req.Node, strings.Join(others, ", "), node.Spec.ProviderID), true
	}
	return Verdict{}, false
}

// checkSANs denies a SAN the bounds exclude or the cluster holds (done),
// and returns the first claim another party made on one (a request that
// nothing else denies then waits for it).
func checkSANs(req Request, node *v1.Node, cluster Cluster, bounds Bounds) (v Verdict, done bool, claimed *Verdict) {
	if len(req.IPs) > 0 && !cluster.ServiceRangeKnown() {
		return pending("ServiceRangeUnknown", "the Service range is unknown (the API server serves no ServiceCIDRs and nodes.servingCertificates.serviceCIDRs is not set): IP SAN %s could be the next Service's address; set serviceCIDRs", req.IPs[0]), true, nil
	}
	claim := func(v Verdict) {
		if claimed == nil {
			claimed = &v
		}
	}
	for _, ip := range req.IPs {
		if len(bounds.IPRanges) > 0 && !slices.ContainsFunc(bounds.IPRanges, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			return deny("IPOutsideAllowedRanges", "IP SAN %s is in none of nodes.servingCertificates.allowedIPRanges %v", ip, bounds.IPRanges), true, nil
		}
		if o, ok := cluster.IPOwner(ip, node); ok {
			if o.Claim != "" {
				claim(pending(o.Reason, "IP SAN %s is claimed as %s (the word of %s): the request waits until that claim is withdrawn", ip, o.What, o.Claim))
				continue
			}
			return deny(o.Reason, "IP SAN %s is %s, never a Node's serving address, whatever its guest reports", ip, o.What), true, nil
		}
	}
	for _, d := range req.DNSNames {
		if o, ok := cluster.NameOwner(d, node); ok {
			if o.Claim != "" {
				claim(pending(o.Reason, "DNS SAN %q is claimed as %s (the word of %s): the request waits until that claim is withdrawn", d, o.What, o.Claim))
				continue
			}
			return deny(o.Reason, "DNS SAN %q is %s, never this Node's name", d, o.What), true, nil
		}
	}
	return Verdict{}, false, claimed
}

// checkIP checks one IP SAN against the VM and the inventories; done
// when that decides.
func checkIP(ctx context.Context, req Request, ip netip.Addr, vm VM, facts Facts) (Verdict, bool) {
	if !slices.Contains(vm.Guest.Addresses, ip) {
		return deny("IPNotNodes", "IP SAN %s is not an address of the VM %s of Node %s (its addresses, as its guest reports them: %v)", ip, vm.Name, req.Node, vm.Guest.Addresses), true
	}
	// Any error here is "not known now": the guest reports the address,
	// only whether another VM does is in question, which never justifies
	// a denial.
	owners, err := facts.IPOwners(ctx, ip)
	switch {
	case err != nil:
		return pending("IPOwnersUnknown", "which VMs report IP %s cannot be told now: %v", ip, err), true
	case len(owners) > 1:
		return deny("SharedIP", "IP SAN %s is reported by %d VMs: %s (a VIP or a moved address proves nothing)", ip, len(owners), strings.Join(owners, ", ")), true
	case len(owners) == 0 || owners[0] != vm.ID:
		// The VM's details and every VM's addresses are followed
		// apart: they disagree for a moment while an address moves.
		return pending("IPOwnersUnknown", "IP %s is an address of the VM %s, but the VMs reporting it are %v: the inventory is catching up", ip, vm.Name, owners), true
	}
	return Verdict{}, false
}

// checkHolders asks vCenter which ESXi hosts and which VMs out of the
// inventories' scope have ip, after the request was made; done when that
// decides.
func checkHolders(ctx context.Context, req Request, ip netip.Addr, vm VM, facts Facts) (Verdict, bool) {
	holders, err := facts.IPHolders(ctx, ip, req.Created)
	if err != nil {
		return pending("IPOwnersUnknown", "which VMs and ESXi hosts have IP %s cannot be told now: %v", ip, err), true
	}
	for _, h := range holders {
		switch {
		case h.Host:
			return deny("HostIP", "IP SAN %s is the address of %s (a VMkernel adapter), never a Node's", ip, h.What), true
		case h.ID != vm.ID:
			return deny("SharedIP", "IP SAN %s is also the address of %s (in a datacenter out of the config's scope)", ip, h.What), true
		}
	}
	return Verdict{}, false
}

// namesUUID reports whether a providerID holds a BIOS UUID.
func namesUUID(providerID string) bool {
	uuid, err := providerid.UUID(providerID)
	return err == nil && inventory.NormalizeUUID(uuid) != ""
}
