package provider

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
)

// Drift is a topology label of an initialized Node that no longer matches
// its VM: the VM moved (vMotion, HA restart) or its tags or groups changed.
type Drift struct {
	Node    string `json:"node"`
	VCenter string `json:"vcenter"`
	Label   string `json:"label"`
	// Labelled is the Node's label value; Now what the VM resolves to.
	Labelled string `json:"labelled"`
	Now      string `json:"now"`
	// From says where Now comes from, and Host where the VM runs.
	From string `json:"from"`
	Host string `json:"host,omitempty"`
}

func (d Drift) String() string {
	host := ""
	if d.Host != "" {
		host = " on host " + d.Host
	}
	return fmt.Sprintf("node %s: %s is %q, but its VM%s now resolves to %q (%s)", d.Node, d.Label, d.Labelled, host, d.Now, d.From)
}

// topologyLabels are the zone and region labels, GA first, then the
// deprecated beta one that the framework still sets and reconciles: its
// node controller copies a beta label's value over the GA one, so both
// must change together.
var topologyLabels = [][2]string{
	{v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone},
	{v1.LabelTopologyRegion, v1.LabelFailureDomainBetaRegion},
}

// driftOf compares the Node's topology labels with what its VM resolves
// to now: one Drift per zone and region, on the GA label, or on the beta
// label when only that one differs. A Node that is not initialized yet
// (its labels may be the kubelet's, which the framework overwrites) or
// has no label has no drift: the framework writes the labels at
// initialization.
func driftOf(node *v1.Node, vcenter, host string, res topology.Result) []Drift {
	if hasUninitializedTaint(node) {
		return nil
	}
	var out []Drift
	for i, v := range []*topology.Value{res.Zone, res.Region} {
		if v == nil {
			continue
		}
		for _, label := range topologyLabels[i] {
			if old, ok := node.Labels[label]; ok && old != v.Value {
				out = append(out, Drift{Node: node.Name, VCenter: vcenter, Label: label, Labelled: old, Now: v.Value, From: v.From, Host: host})
				break
			}
		}
	}
	return out
}

// nodeDriftOf is driftOf for a Node and its VM, naming the VM's host.
func (p *Provider) nodeDriftOf(node *v1.Node, vm inventory.VM, res topology.Result) []Drift {
	host := vm.Host.Value
	if ix := p.inv.Index(vm.VCenter); ix != nil {
		if o, ok := ix.Object(vm.Host); ok {
			host = o.Name
		}
	}
	return driftOf(node, vm.VCenter, host, res)
}

// Labels returns the GA and the beta label of the Drift's dimension (zone
// or region): a relabel patches both together, or the framework's node
// controller copies the old beta value back over the GA label.
func (d Drift) Labels() [2]string {
	for _, pair := range topologyLabels {
		if slices.Contains(pair[:], d.Label) {
			return pair
		}
	}
	return [2]string{d.Label, d.Label}
}
