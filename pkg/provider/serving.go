package provider

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/hostnames"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// ServingIdentity is what vCenter says now of a Node's VM, to check the
// names and addresses a kubelet asks a serving certificate for.
type ServingIdentity struct {
	VM inventory.VM
	// IPs are the addresses this provider computes for the Node
	// (Addresses: its address rules over what the guest reports, and the
	// kubelet's node IP where the guest reports it and the rules allow
	// it), never the Node's status, which the node writes itself.
	IPs []netip.Addr
	// NameKey is nodes.identity.nodeNameKey where the inventories follow
	// it (client certificate approval on), "" otherwise; BoundName the
	// Node name the VM's provisioner set there ("" none): vCenter's word,
	// which no guest can write.
	NameKey, BoundName string
	// BoundVMs is how many VMs, in every vCenter, hold BoundName in
	// NameKey (a clone copies extraConfig): a name binds one VM.
	BoundVMs int
}

// ServingIdentity finds node's VM by the BIOS UUID of its providerID
// only (a VM recreated under the Node's name is another machine) and
// computes the Node's addresses, when vCenter answers for it now: every
// vCenter's inventory is current (Status), so that no second VM with the
// UUID can hide in one that cannot answer, and the VM is connected, so
// that its power state and guest are vCenter's word now. It has no
// effects and makes no request when the inventories are current.
//
// An error wrapping inventory.ErrNotFound is definite (every vCenter
// answered and none has the VM); any other error means the answer
// cannot be told now.
func (p *Provider) ServingIdentity(ctx context.Context, node *v1.Node) (ServingIdentity, error) {
	if !p.ready() {
		return ServingIdentity{}, p.notReady()
	}
	if !providerid.Owned(node.Spec.ProviderID) {
		return ServingIdentity{}, fmt.Errorf("node %s has no %s providerID", node.Name, providerid.Prefix)
	}
	uuid, err := providerid.UUID(node.Spec.ProviderID)
	if err != nil {
		return ServingIdentity{}, fmt.Errorf("node %s: %w", node.Name, err)
	}
	for _, ix := range p.inv.Indexes() {
		if ok, _, err := ix.Status(); !ok {
			return ServingIdentity{}, fmt.Errorf("a second VM with the BIOS UUID of node %s cannot be ruled out: %w", node.Name, err)
		}
	}
	vm, err := p.inv.FindByUUID(ctx, uuid)
	if err != nil {
		return ServingIdentity{}, fmt.Errorf("node %s (providerID %s): %w", node.Name, node.Spec.ProviderID, err)
	}
	out := ServingIdentity{VM: vm}
	if id := p.cfg.Nodes.Identity; id.ApproveClientCertificates && id.NodeNameKey != "" {
		name, known := p.inv.BoundName(vm.VCenter, vm.Ref)
		if !known {
			return out, fmt.Errorf("node %s: the Node name VM %s is bound to (extraConfig %s) cannot be told yet: its vCenter's inventory is not current or does not hold the VM", node.Name, vm.Location(), id.NodeNameKey)
		}
		out.NameKey, out.BoundName = id.NodeNameKey, name
		if name != "" {
			vms, err := p.inv.BoundTo(name)
			if err != nil {
				return out, fmt.Errorf("node %s: which VMs are bound to Node name %q (extraConfig %s) cannot be told yet: %w", node.Name, name, id.NodeNameKey, err)
			}
			out.BoundVMs = len(vms)
		}
	}
	if vm.ConnectionState != types.VirtualMachineConnectionStateConnected {
		return out, fmt.Errorf("VM %s of node %s has connection state %q: its host does not answer, so what it reports is the last vCenter knew",
			vm.Location(), node.Name, vm.ConnectionState)
	}
	if vm.PowerState != types.VirtualMachinePowerStatePoweredOn {
		return out, nil // no addresses to compute: the caller waits for power
	}
	vc, _ := p.cfg.VCenter(vm.VCenter)
	addrs, err := Addresses(vm, p.cfg.Nodes, vc.IPFamilies)
	if err != nil {
		return out, fmt.Errorf("node %s: %w", node.Name, err)
	}
	// The kubelet's node IP is the Node's address as InstanceMetadata
	// gives it; one it cannot give (a NodeIPError) is not.
	if with, err := withNodeIPs(node, vm, addrs, p.cfg.Nodes, vc.IPFamilies); err == nil {
		addrs = with
	}
	for _, a := range addrs {
		if a.Type != v1.NodeInternalIP && a.Type != v1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out.IPs = append(out.IPs, ip.Unmap().WithZone(""))
		}
	}
	return out, nil
}

// IPOwners lists every VM, in every vCenter, whose guest reports ip, from
// the inventories alone (nodes.servingCertificates.approve follows every
// VM's guest addresses). An error means the list may be incomplete.
func (p *Provider) IPOwners(ip netip.Addr) ([]inventory.IPOwner, error) {
	if !p.ready() {
		return nil, p.notReady()
	}
	return p.inv.IPOwners(ip)
}

// AddressHolders tells which ESXi hosts (by their VMkernel adapters) and
// which VMs outside the configured datacenters (by their primary guest
// address) have ip, in every vCenter, from a snapshot read after
// notBefore (inventory.Inventory.AddressHolders). An error means a
// vCenter could not answer.
func (p *Provider) AddressHolders(ctx context.Context, ip netip.Addr, notBefore time.Time) ([]inventory.AddressHolder, error) {
	if !p.ready() {
		return nil, p.notReady()
	}
	return p.inv.AddressHolders(ctx, ip, notBefore)
}

// ConfirmAbsent asks every vCenter, in all its datacenters, for a VM with
// the BIOS UUID of node's providerID: nil only when every vCenter answered
// and none has it (inventory.Inventory.ConfirmAbsent).
func (p *Provider) ConfirmAbsent(ctx context.Context, node *v1.Node) error {
	if !p.ready() {
		return p.notReady()
	}
	uuid, err := providerid.UUID(node.Spec.ProviderID)
	if err != nil {
		return fmt.Errorf("node %s: %w", node.Name, err)
	}
	return p.inv.ConfirmAbsent(ctx, uuid)
}

// servingHostname drops the guest's host name from a Node's addresses
// when serving certificates are approved and the approver would refuse it
// for this Node (hostnames.Fits: not the Node's name nor under it, or
// outside nodes.servingCertificates.allowedDNSDomains): the kubelet asks
// for a certificate with the names its Node is published with, so a
// truthful Node must not be published a name its request is then denied.
// The kubelet's own Hostname address then stays (the cloud node
// controller keeps it when the provider gives none).
func servingHostname(node *v1.Node, addrs []v1.NodeAddress, sc config.ServingCertificates) []v1.NodeAddress {
	if !sc.Approve {
		return addrs
	}
	return slices.DeleteFunc(addrs, func(a v1.NodeAddress) bool {
		return a.Type == v1.NodeHostName && !hostnames.Fits(node.Name, a.Address, sc.AllowedDNSDomains)
	})
}
