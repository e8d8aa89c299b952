package provider

import (
	"context"
	"maps"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
)

// Observation is what operators should know about a Node's topology that
// is not an error: a VM of a stretched cluster outside its intended zone,
// a zone vSphere CSI cannot see, and drift of an initialized Node's labels.
// Observe computes it; the node-topology controller acts on it (relabels
// when Relabel is set, taints when Taint is) and reports it.
type Observation struct {
	VM       inventory.VM
	Topology topology.Result
	// Drift lists the Node's zone and region labels that differ from what
	// its VM resolves to now; empty for a Node not initialized yet.
	Drift []Drift
	// Relabel: labels.onDrift is relabel, so Drift is to be patched.
	Relabel bool
	// Taint: labels.onDrift is taint, so a Node with Drift is tainted
	// NoSchedule until an operator acts.
	Taint bool
	// Placement lists the placement labels (labels.placement) of an
	// initialized Node that no longer match its VM: always to be patched
	// (Now "" removes the label).
	PlacementLabels []Drift
	// Addresses are the addresses InstanceMetadata gives the Node now, for
	// an initialized Node whose addresses can be computed (nil otherwise):
	// what the framework's node status pass would write.
	Addresses []v1.NodeAddress
}

// Observe finds node's VM and compares its topology with the Node's
// labels. It has no effects: no event, no write (lookups may ask the
// inventory for the VM's details). When the VM is found but its topology
// cannot be resolved (a tag missing, the tag service down), the error
// comes with an Observation whose PlacementLabels are the record of the
// VM alone (LabelVM, LabelVCenter), to be written all the same.
func (p *Provider) Observe(ctx context.Context, node *v1.Node) (Observation, error) {
	if !p.ready() {
		return Observation{}, p.notReady()
	}
	vm, res, err := p.locate(ctx, node)
	if err != nil {
		if vm.Ref.Value == "" {
			return Observation{}, err
		}
		return Observation{VM: vm, PlacementLabels: placementDriftOf(nodeLabels{name: node.Name, labels: node.Labels, uninitialized: hasUninitializedTaint(node)},
			vm.VCenter, recordWanted(vm))}, err
	}
	var addrs []v1.NodeAddress
	if !hasUninitializedTaint(node) && node.Spec.ProviderID != "" {
		addrs, _ = p.nodeAddresses(node, vm) // an error: the framework's pass writes none either
	}
	return Observation{VM: vm, Topology: res, Drift: p.nodeDriftOf(node, vm, res), Addresses: addrs,
		Relabel: p.cfg.Labels.OnDrift == config.DriftRelabel, Taint: p.cfg.Labels.OnDrift == config.DriftTaint,
		PlacementLabels: placementDriftOf(nodeLabels{name: node.Name, labels: node.Labels, uninitialized: hasUninitializedTaint(node)},
			vm.VCenter, p.placementWanted(node, vm))}, nil
}

// placementWanted is the placement labels node should carry: those of
// labels.placement; the record of its VM (LabelVM, and LabelVCenter that
// says where the reference is) on every Node, those a previous CCM
// initialized included; the datacenter label whenever the Node carries it
// (this CCM set it at initialization). The vCenter and datacenter labels
// are kept current even without labels.placement: the deletion rules read
// them (a Node labelled with a vCenter no longer configured is never
// deleted, a VM is proven gone by its recorded reference), so after a VM
// moved to another vCenter or was registered again its Node must name it.
func (p *Provider) placementWanted(node *v1.Node, vm inventory.VM) map[string]string {
	want := placementOf(p.cfg.Labels.Placement, p.inv.Index(vm.VCenter), vm)
	if want == nil {
		want = map[string]string{}
	}
	maps.Copy(want, recordWanted(vm))
	for k, v := range map[string]string{LabelVCenter: vm.VCenter, LabelDatacenter: vm.Datacenter} {
		if _, has := node.Labels[k]; has && v != "" {
			want[k] = LabelValue(v)
		}
	}
	return want
}

// Changed returns a channel closed at the next change that may change an
// Observation: an inventory change (placement, power, groups), a tag
// refresh, a vCenter's health; then replaced.
func (p *Provider) Changed() <-chan struct{} { return p.changes.C() }
