package inventory

import (
	"slices"

	"github.com/vmware/govmomi/vim25/types"
)

// ClusterGroups is the part of a cluster's DRS configuration that says
// where its VMs belong: host groups, VM groups and the VM-host rules that
// tie them. It is replaced as a whole when the cluster's configuration
// changes, never modified, so it may be shared.
type ClusterGroups struct {
	// HostGroups maps a host group's name to its hosts.
	HostGroups map[string][]types.ManagedObjectReference
	// VMGroups maps a VM group's name to its VMs.
	VMGroups map[string][]types.ManagedObjectReference
	// Rules are the cluster's VM-host rules, in the cluster's order.
	Rules []VMHostRule
}

// VMHostRule is one DRS VM-host rule: the VMs of VMGroup should (or, if
// Mandatory, must) run on the hosts of AffineHostGroup, or not on those of
// AntiAffineHostGroup.
type VMHostRule struct {
	Name                string
	Enabled             bool
	Mandatory           bool
	VMGroup             string
	AffineHostGroup     string
	AntiAffineHostGroup string
}

// HostGroupsOf returns the names of the host groups that hold host, sorted.
func (g *ClusterGroups) HostGroupsOf(host types.ManagedObjectReference) []string {
	if g == nil {
		return nil
	}
	return groupsHolding(g.HostGroups, host)
}

// VMGroupsOf returns the names of the VM groups that hold vm, sorted.
func (g *ClusterGroups) VMGroupsOf(vm types.ManagedObjectReference) []string {
	if g == nil {
		return nil
	}
	return groupsHolding(g.VMGroups, vm)
}

func groupsHolding(groups map[string][]types.ManagedObjectReference, r types.ManagedObjectReference) []string {
	var out []string
	for name, members := range groups {
		if slices.Contains(members, r) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// clusterGroupsOf converts a cluster's configurationEx property; nil if
// the value is not a cluster configuration.
func clusterGroupsOf(v types.AnyType) *ClusterGroups {
	cfg := asPointer[types.ClusterConfigInfoEx](v)
	if cfg == nil {
		return nil
	}
	g := &ClusterGroups{HostGroups: map[string][]types.ManagedObjectReference{}, VMGroups: map[string][]types.ManagedObjectReference{}}
	for _, bg := range cfg.Group {
		switch grp := bg.(type) {
		case *types.ClusterHostGroup:
			g.HostGroups[grp.Name] = slices.Clone(grp.Host)
		case *types.ClusterVmGroup:
			g.VMGroups[grp.Name] = slices.Clone(grp.Vm)
		}
	}
	for _, br := range cfg.Rule {
		r, ok := br.(*types.ClusterVmHostRuleInfo)
		if !ok {
			continue
		}
		g.Rules = append(g.Rules, VMHostRule{
			Name:                r.Name,
			Enabled:             r.Enabled == nil || *r.Enabled,
			Mandatory:           r.Mandatory != nil && *r.Mandatory,
			VMGroup:             r.VmGroupName,
			AffineHostGroup:     r.AffineHostGroupName,
			AntiAffineHostGroup: r.AntiAffineHostGroupName,
		})
	}
	return g
}
