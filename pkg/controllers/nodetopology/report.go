package nodetopology

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
)

// Event reasons of the controller's notices about a Node's topology.
const (
	// ReasonTopologyDrift (Warning): the zone or region of an initialized
	// Node's VM changed; the labels are kept (labels.onDrift: keep).
	ReasonTopologyDrift = "TopologyDrift"
	// ReasonTopologyRelabelled (Normal): the labels followed the VM
	// (labels.onDrift: relabel).
	ReasonTopologyRelabelled = "TopologyRelabelled"
	// ReasonTopologyNotVisibleToCSI (Warning): the zone or region comes
	// from a tag on the VM or its folders, which vSphere CSI does not read.
	ReasonTopologyNotVisibleToCSI = "TopologyNotVisibleToCSI"
)

// drifts are the Nodes whose labels no longer match their VM, as last
// observed, for the drift gauge. Its lock covers nodes.
type drifts struct {
	mu    sync.Mutex
	nodes map[string][]provider.Drift // by Node name; never an empty list
}

// set replaces what is known of one Node (none: no drift) and returns the
// drifted Nodes by vCenter.
func (d *drifts) set(node string, list []provider.Drift) map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nodes == nil {
		d.nodes = map[string][]provider.Drift{}
	}
	if len(list) == 0 {
		delete(d.nodes, node)
	} else {
		d.nodes[node] = list
	}
	per := map[string]int{}
	for _, l := range d.nodes {
		per[l[0].VCenter]++
	}
	return per
}

// report sends the events of an Observation of node (each repeat
// suppressed by the shared recorder) and keeps its drift for the gauge.
// relabelled says obs.Drift was patched onto the Node: a
// TopologyRelabelled event instead of drift.
func (c *Controller) report(node *v1.Node, obs provider.Observation, relabelled bool) {
	ev := c.opts.Events
	if reason, msg := obs.Topology.Placement.Warning(); reason != "" {
		ev.Event(node, v1.EventTypeWarning, reason, fmt.Sprintf("VM %s: %s", obs.VM.Location(), msg))
	}
	for _, v := range []struct {
		what string
		val  *topology.Value
	}{{"zone", obs.Topology.Zone}, {"region", obs.Topology.Region}} {
		if v.val != nil && v.val.Source == topology.SourceVMTag {
			ev.Event(node, v1.EventTypeWarning, ReasonTopologyNotVisibleToCSI, fmt.Sprintf(
				"the %s %q comes from %s; vSphere CSI reads tags only on the host, cluster, host folders and datacenter, so its topology for this Node differs: tag the host chain instead (docs/csi.md)",
				v.what, v.val.Value, v.val.From))
		}
	}
	list := obs.Drift
	if relabelled {
		for _, d := range list {
			ev.Event(node, v1.EventTypeNormal, ReasonTopologyRelabelled, fmt.Sprintf(
				"%s changed from %q to %q (%s; labels.onDrift: relabel)", d.Label, d.Labelled, d.Now, d.From))
		}
		list = nil
	}
	c.opts.Metrics.setDrifted(c.drifts.set(node.Name, list), c.opts.VCenters)
	for _, d := range list {
		ev.Event(node, v1.EventTypeWarning, ReasonTopologyDrift, d.String()+
			"; the label is kept, since volumes and workloads rely on it (labels.onDrift: keep). Move the VM back, or re-register the Node, or set labels.onDrift: relabel")
	}
}

// forget drops what the controller keeps about a deleted Node.
func (c *Controller) forget(node string) {
	c.addresses.forget(node)
	c.opts.Metrics.setUntainted(c.untainted.set(node, false))
	c.opts.Metrics.setDrifted(c.drifts.set(node, nil), c.opts.VCenters)
	c.oos.put(node, record{})
	c.opts.Metrics.setOutOfServiceNodes(c.oos.setTainted(node, false))
}
