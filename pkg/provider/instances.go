package provider

// The InstancesV2 answers: a Node's VM found (FindVM), its metadata
// (InstanceMetadata, and Preview without effects) and power
// (InstanceShutdown). InstanceExists, with the proof of absence it needs,
// is in exists.go.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
)

// FindVM finds the VM of a node: by providerID when set, else by the
// configured lookup order (systemUUID, VM name, guest host name). A method
// that cannot tell (vCenter down, ambiguity) stops the search: a weaker
// method must not pick another VM.
func (p *Provider) FindVM(ctx context.Context, node *v1.Node) (inventory.VM, error) {
	vm, err := p.findVM(ctx, node)
	if p.opts.Metrics != nil {
		p.opts.Metrics.lookup(err)
	}
	if err == nil {
		// Any lookup that finds it (the status pass, the node-topology
		// controller's, InstanceExists) ends a VM's proven absence.
		p.absences.found(vm.UUID)
	}
	return vm, err
}

func (p *Provider) findVM(ctx context.Context, node *v1.Node) (inventory.VM, error) {
	if !p.ready() {
		return inventory.VM{}, p.notReady()
	}
	if id := node.Spec.ProviderID; id != "" {
		uuid, err := providerid.UUID(id)
		if err != nil {
			return inventory.VM{}, fmt.Errorf("node %s: %w", node.Name, err)
		}
		vm, err := p.inv.FindByUUID(ctx, uuid)
		if err != nil {
			return vm, fmt.Errorf("node %s (providerID %s): %w", node.Name, id, err)
		}
		return vm, nil
	}
	var misses []string
	searched := false // whether any method could ask the inventory
	for m, value := range p.lookups(node) {
		var vm inventory.VM
		var err error
		switch m {
		case config.LookupUUID:
			if value == "" {
				misses = append(misses, "no systemUUID reported yet")
				continue
			}
			vm, err = p.inv.FindByUUID(ctx, value)
		case config.LookupVMName:
			vm, err = p.inv.FindByName(ctx, value)
		case config.LookupGuestHostname:
			vm, err = p.inv.FindByGuestHostname(ctx, value)
		}
		searched = true
		if err == nil {
			return vm, nil
		}
		if !errors.Is(err, inventory.ErrNotFound) {
			return vm, fmt.Errorf("node %s: %w", node.Name, err)
		}
		misses = append(misses, err.Error())
	}
	if !searched {
		return inventory.VM{}, fmt.Errorf("node %s has no systemUUID yet and nodes.lookupOrder has no other method", node.Name)
	}
	return inventory.VM{}, &nodeNotFound{node: node.Name, misses: misses}
}

// lookups yields, for a Node without providerID, each method of
// nodes.lookupOrder in order with the value it looks up: the Node's
// systemUUID ("" when the kubelet has not reported it yet) or its name.
// findVM and answerable go through the same sequence.
func (p *Provider) lookups(node *v1.Node) iter.Seq2[config.LookupMethod, string] {
	return func(yield func(config.LookupMethod, string) bool) {
		for _, m := range p.cfg.Nodes.LookupOrder {
			value := node.Name
			if m == config.LookupUUID {
				value = node.Status.NodeInfo.SystemUUID
			}
			if !yield(m, value) {
				return
			}
		}
	}
}

type nodeNotFound struct {
	node   string
	misses []string
}

func (e *nodeNotFound) Error() string {
	return fmt.Sprintf("node %s: no VM found (%s); check nodes.lookupOrder, the VM name and the datacenters in the config", e.node, strings.Join(e.misses, "; "))
}

func (e *nodeNotFound) Is(target error) bool { return target == inventory.ErrNotFound }

// InstanceShutdown is true for a VM that is powered off or suspended.
func (p *Provider) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	p.opts.Metrics.call("InstanceShutdown")
	vm, err := p.FindVM(ctx, node)
	if err != nil {
		return false, err
	}
	return vm.PowerState == types.VirtualMachinePowerStatePoweredOff || vm.PowerState == types.VirtualMachinePowerStateSuspended, nil
}

// InstanceMetadata returns the providerID, instance type, addresses, zone,
// region and labels of the node's VM.
func (p *Provider) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	p.opts.Metrics.call("InstanceMetadata")
	at := mark{progress: p.progress.Load(), arrivals: p.arrivals.Load()}
	md, _, _, err := p.metadata(ctx, node)
	p.warn(node, err, true)
	p.initFailed(node.Name, err, at)
	return md, err
}

// Preview returns what InstanceMetadata would return for node, without
// any of its effects: no event, no retry bookkeeping, no Node written
// (migration preflight, one-shot tools).
func (p *Provider) Preview(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if !p.ready() {
		return nil, p.notReady()
	}
	md, _, _, err := p.metadata(ctx, node)
	return md, err
}

// locate finds node's VM and resolves its topology, without its
// addresses: where it is does not depend on what its guest reports (a VM
// whose Tools stopped still has a zone to follow). It has no effects.
func (p *Provider) locate(ctx context.Context, node *v1.Node) (inventory.VM, topology.Result, error) {
	vm, err := p.FindVM(ctx, node)
	if err != nil {
		return vm, topology.Result{}, err
	}
	topo, err := p.topo.Resolve(ctx, vm)
	if err != nil {
		return vm, topo, fmt.Errorf("node %s (VM %s): %w", node.Name, vm.Location(), err)
	}
	return vm, topo, nil
}

// nodeAddresses computes the addresses InstanceMetadata gives node when
// vm is its VM: the address rules over what its guest reports, the
// kubelet's node IP, the serving host name rule. It has no effects and
// makes no request.
func (p *Provider) nodeAddresses(node *v1.Node, vm inventory.VM) ([]v1.NodeAddress, error) {
	vc, _ := p.cfg.VCenter(vm.VCenter)
	addrs, err := Addresses(vm, p.cfg.Nodes, vc.IPFamilies)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	if addrs, err = withNodeIPs(node, vm, addrs, p.cfg.Nodes, vc.IPFamilies); err != nil {
		return nil, err
	}
	return servingHostname(node, addrs, p.cfg.Nodes.ServingCertificates), nil
}

// metadata finds node's VM and computes its metadata; it has no effects.
func (p *Provider) metadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, inventory.VM, topology.Result, error) {
	vm, topo, err := p.locate(ctx, node)
	if err != nil {
		return nil, vm, topo, err
	}
	if err := p.checkIdentity(node, vm); err != nil {
		return nil, vm, topo, err
	}
	addrs, err := p.nodeAddresses(node, vm)
	if err != nil {
		return nil, vm, topo, err
	}
	id := node.Spec.ProviderID // immutable once set: answered as it is, as the reference does
	if id == "" {
		id = p.providerID(vm)
	}
	md := &cloudprovider.InstanceMetadata{
		ProviderID:       id,
		InstanceType:     InstanceType(vm),
		NodeAddresses:    addrs,
		AdditionalLabels: map[string]string{},
	}
	for k, v := range p.opts.NodeLabels {
		md.AdditionalLabels[k] = v
	}
	if topo.InstanceType != nil {
		md.InstanceType = topo.InstanceType.Value
	}
	if topo.Zone != nil {
		md.Zone = topo.Zone.Value
	}
	if topo.Region != nil {
		md.Region = topo.Region.Value
	}
	for k, v := range topo.Labels {
		md.AdditionalLabels[k] = v.Value
	}
	for k, v := range map[string]string{LabelVCenter: vm.VCenter, LabelDatacenter: vm.Datacenter} {
		if lv := LabelValue(v); lv != "" { // where the VM is: made valid (docs/configuration.md, "Label values")
			md.AdditionalLabels[k] = lv
		}
	}
	if r := recordOf(vm); r != "" { // which VM: the reference vCenter is asked about before its Node is deleted
		md.AdditionalLabels[LabelVM] = r
	}
	for k, v := range placementOf(p.cfg.Labels.Placement, p.inv.Index(vm.VCenter), vm) {
		if v != "" {
			md.AdditionalLabels[k] = v
		}
	}
	return md, vm, topo, nil
}
