package provider

import (
	"context"
	"fmt"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// PowerProof is what a Node's vCenter says now of its VM's power state.
type PowerProof struct {
	VM inventory.VM
	// Proven: the VM's inventory is current (Status) and the VM connected
	// (its host answers), so VM.PowerState is vCenter's word now, not a
	// state last known before an outage.
	Proven bool
	// Unproven says why not.
	Unproven string
}

// Power finds node's VM by the BIOS UUID of its providerID only, never by
// name (a VM recreated under the Node's name is another machine), and
// says whether its power state is proven. It has no effects. A Node
// without a providerID (not initialized) is an error, as is a VM not
// found: the deletion rules cover a VM that is gone.
//
// Proven needs, besides the VM's inventory current and the VM connected:
// the machine UUID the kubelet reports (status.nodeInfo.systemUUID), if
// any, to be the VM's (a clone or restore under a new UUID may run the
// Node now); the vCenter the Node is labelled with, if any, to be the
// VM's; and every vCenter able to prove absence (AbsenceError), so that
// no running duplicate of the UUID can hide in one that is down, not
// read yet, or holding VMs whose identity cannot be read.
func (p *Provider) Power(ctx context.Context, node *v1.Node) (PowerProof, error) {
	if !p.ready() {
		return PowerProof{}, p.notReady()
	}
	if !providerid.Owned(node.Spec.ProviderID) {
		return PowerProof{}, fmt.Errorf("node %s has no %s providerID: only Nodes this provider owns are acted on", node.Name, providerid.Prefix)
	}
	uuid, err := providerid.UUID(node.Spec.ProviderID)
	if err != nil {
		return PowerProof{}, fmt.Errorf("node %s: %w", node.Name, err)
	}
	vm, err := p.inv.FindByUUID(ctx, uuid)
	if err != nil {
		return PowerProof{}, fmt.Errorf("node %s (providerID %s): %w", node.Name, node.Spec.ProviderID, err)
	}
	out := PowerProof{VM: vm}
	ix := p.inv.Index(vm.VCenter)
	if ix == nil {
		out.Unproven = fmt.Sprintf("vCenter %q has no inventory", vm.VCenter)
		return out, nil
	}
	if ok, _, err := ix.Status(); !ok {
		out.Unproven = err.Error()
		return out, nil
	}
	if vm.ConnectionState != types.VirtualMachineConnectionStateConnected {
		out.Unproven = fmt.Sprintf("VM %s has connection state %q: its host does not answer, so its power state %q is the last one vCenter knew",
			vm.Location(), vm.ConnectionState, vm.PowerState)
		return out, nil
	}
	if su := node.Status.NodeInfo.SystemUUID; su != "" && !inventory.SameUUID(su, uuid) {
		out.Unproven = fmt.Sprintf("the kubelet reports machine UUID %s, not the BIOS UUID %s of the providerID: the Node may run on another machine now (a clone or a restore)", su, uuid)
		return out, nil
	}
	if lv := node.Labels[LabelVCenter]; lv != "" && !labelNames(lv, vm.VCenter) {
		out.Unproven = fmt.Sprintf("the Node is labelled with vCenter %q but its VM was found in vCenter %q", lv, vm.VCenter)
		return out, nil
	}
	for _, other := range p.inv.Indexes() {
		if err := other.AbsenceError(); err != nil {
			out.Unproven = fmt.Sprintf("a running VM with the same BIOS UUID cannot be ruled out: %v", err)
			return out, nil
		}
	}
	out.Proven = true
	return out, nil
}

// ConfirmPoweredOff asks vm's vCenter directly, right before the taint is
// added, whether vm is powered off, connected and still has the BIOS UUID
// of node's providerID: the index's copy may be up to StaleAfter old, or
// a direct read the collector has not replaced yet. An error says why not.
func (p *Provider) ConfirmPoweredOff(ctx context.Context, node *v1.Node, vm inventory.VM) error {
	uuid, err := providerid.UUID(node.Spec.ProviderID)
	if err != nil {
		return fmt.Errorf("node %s: %w", node.Name, err)
	}
	live, err := p.inv.ReadPower(ctx, vm)
	switch {
	case err != nil:
		return err
	case live.PowerState != types.VirtualMachinePowerStatePoweredOff:
		return fmt.Errorf("VM %s is %s now", vm.Location(), live.PowerState)
	case live.ConnectionState != types.VirtualMachineConnectionStateConnected:
		return fmt.Errorf("VM %s has connection state %q now", vm.Location(), live.ConnectionState)
	case !inventory.SameUUID(live.UUID, uuid):
		return fmt.Errorf("VM %s has BIOS UUID %s now, not %s", vm.Location(), live.UUID, uuid)
	}
	return nil
}
