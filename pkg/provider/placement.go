package provider

import (
	"maps"
	"slices"
	"strings"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/labelvalue"
)

// The placement labels (labels.placement): where a Node's VM runs, set at
// initialization and kept current by the node-topology controller.
const (
	LabelHost      = "vsphere.vsphere-ccm.io/host"
	LabelCluster   = "vsphere.vsphere-ccm.io/cluster"
	LabelHostGroup = "vsphere.vsphere-ccm.io/host-group"
)

// placementKeys maps each placement label to its Node label key.
var placementKeys = map[config.PlacementLabel]string{
	config.PlacementHost: LabelHost, config.PlacementCluster: LabelCluster, config.PlacementHostGroup: LabelHostGroup,
	config.PlacementDatacenter: LabelDatacenter, config.PlacementVCenter: LabelVCenter,
}

// PlacementLabelKeys are the Node label keys of the configured placement
// labels: the node-topology controller keeps them current on every Node.
func PlacementLabelKeys(want []config.PlacementLabel) []string {
	out := make([]string, 0, len(want))
	for _, p := range want {
		out = append(out, placementKeys[p])
	}
	return out
}

// placementOf returns the configured placement labels of vm, sanitized
// (LabelValue); a label whose value is unknown or empty (a VM in no host
// group) maps to "", meaning the label is absent.
func placementOf(want []config.PlacementLabel, ix *inventory.Index, vm inventory.VM) map[string]string {
	if len(want) == 0 {
		return nil
	}
	var host, cluster string
	var groups []string
	if ix != nil {
		for _, o := range ix.Ancestors(vm.Host) {
			switch o.Ref.Type {
			case "HostSystem":
				host = o.Name
			case "ClusterComputeResource", "ComputeResource":
				if cluster == "" {
					cluster = o.Name
					if o.Groups != nil {
						groups = o.Groups.HostGroupsOf(vm.Host)
					}
				}
			}
		}
	}
	raw := map[config.PlacementLabel]string{config.PlacementHost: host, config.PlacementCluster: cluster,
		config.PlacementHostGroup: strings.Join(groups, "_"), config.PlacementDatacenter: vm.Datacenter, config.PlacementVCenter: vm.VCenter}
	out := make(map[string]string, len(want))
	for _, p := range want {
		out[placementKeys[p]] = LabelValue(raw[p])
	}
	return out
}

// LabelValue makes s a valid label value, deterministically
// (labelvalue.Of): the one policy for labels that say where a VM is.
func LabelValue(s string) string { return labelvalue.Of(s) }

// labelNames reports whether label is what this CCM writes for name: name
// itself, or name made valid by LabelValue. Labels that say where a VM is
// are compared with names this way (docs/configuration.md, "Label
// values").
func labelNames(label, name string) bool {
	return label == name || label == LabelValue(name)
}

// placementDriftOf lists the configured placement labels of an
// initialized Node that differ from its VM's placement now ("" in Now:
// remove the label), sorted by label.
func placementDriftOf(node nodeLabels, vcenter string, want map[string]string) []Drift {
	if node.uninitialized {
		return nil
	}
	var out []Drift
	for _, k := range slices.Sorted(maps.Keys(want)) {
		now := want[k]
		old, ok := node.labels[k]
		if (now == "" && !ok) || (ok && old == now) {
			continue
		}
		out = append(out, Drift{Node: node.name, VCenter: vcenter, Label: k, Labelled: old, Now: now, From: "the VM's placement"})
	}
	return out
}

// nodeLabels is what placementDriftOf reads of a Node.
type nodeLabels struct {
	name          string
	labels        map[string]string
	uninitialized bool
}
