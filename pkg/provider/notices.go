package provider

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
)

// noticeTopology tells operators, with events, what they should know about
// a Node's topology that is not an error: a VM of a stretched cluster
// outside its intended zone, a zone that vSphere CSI cannot see, and
// drift of an initialized Node's labels (relabelling it when
// labels.onDrift is relabel). It runs on every InstanceMetadata, which the
// framework calls at initialization and on every node status pass.
func (p *Provider) noticeTopology(ctx context.Context, node *v1.Node, vm inventory.VM, res topology.Result) {
	if reason, msg := res.Placement.Warning(); reason != "" {
		p.events.send(node, v1.EventTypeWarning, reason, fmt.Sprintf("VM %s: %s", vm.Location(), msg))
	}
	for _, v := range []struct {
		what string
		val  *topology.Value
	}{{"zone", res.Zone}, {"region", res.Region}} {
		if v.val != nil && v.val.Source == topology.SourceVMTag {
			p.events.send(node, v1.EventTypeWarning, ReasonTopologyNotVisibleToCSI, fmt.Sprintf(
				"the %s %q comes from %s; vSphere CSI reads tags only on the host, cluster, host folders and datacenter, so its topology for this Node differs: tag the host chain instead (docs/csi.md)",
				v.what, v.val.Value, v.val.From))
		}
	}
	list := p.nodeDriftOf(node, vm, res)
	if len(list) > 0 && p.cfg.Labels.OnDrift == config.DriftRelabel && p.kube != nil {
		if err := relabel(ctx, p.kube, list); err != nil {
			klog.FromContext(ctx).Error(err, "Relabelling a drifted Node failed", "node", node.Name)
		} else {
			for _, d := range list {
				p.events.send(node, v1.EventTypeNormal, ReasonTopologyRelabelled, fmt.Sprintf(
					"%s changed from %q to %q (%s; labels.onDrift: relabel)", d.Label, d.Labelled, d.Now, d.From))
			}
			list = nil
		}
	}
	p.drifts.set(node.Name, list)
	for _, d := range list {
		p.events.send(node, v1.EventTypeWarning, ReasonTopologyDrift, d.String()+
			"; the label is kept, since volumes and workloads rely on it (labels.onDrift: keep). Move the VM back, or re-register the Node, or set labels.onDrift: relabel")
	}
}
