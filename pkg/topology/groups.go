package topology

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// Placement is where a VM of a stretched cluster belongs and where it
// runs, by the cluster's DRS groups (config hostGroupZones).
type Placement struct {
	// Cluster names the cluster and the config entry that maps its groups.
	Cluster string `json:"cluster"`
	// Intended is the zone of the host group that the VM's VM group is tied
	// to by an enabled VM-host rule; nil if the VM is in no such group.
	Intended *Value `json:"intended,omitempty"`
	// Actual is the zone of the host group of the host the VM runs on; nil
	// if that host is in no host group that is a zone.
	Actual *Value `json:"actual,omitempty"`
}

// Reasons of placement warnings; they are also the reasons of the
// Warning events on Nodes.
const (
	// ReasonOutsideIntendedZone: the VM runs outside the zone its VM group
	// and rule intend (an HA restart or a manual vMotion to the other site).
	ReasonOutsideIntendedZone = "OutsideIntendedZone"
	// ReasonNoIntendedZone: the VM is in no VM group tied to a zone, so its
	// zone is only where it runs now.
	ReasonNoIntendedZone = "NoIntendedZone"
	// ReasonNoZoneGroup: neither the VM nor its host is in a group that is
	// a zone.
	ReasonNoZoneGroup = "NoZoneHostGroup"
)

// Warning says what an operator should know about the placement, with a
// reason, or "" and "".
func (p *Placement) Warning() (reason, msg string) {
	switch {
	case p == nil:
		return "", ""
	case p.Intended != nil && p.Actual != nil && p.Intended.Value != p.Actual.Value:
		return ReasonOutsideIntendedZone, fmt.Sprintf("the VM runs in zone %q (%s), outside its intended zone %q (%s); the Node keeps the intended zone",
			p.Actual.Value, p.Actual.From, p.Intended.Value, p.Intended.From)
	case p.Intended != nil && p.Actual == nil:
		return ReasonOutsideIntendedZone, fmt.Sprintf("the VM runs on a host in no zone host group of %s, outside its intended zone %q (%s)",
			p.Cluster, p.Intended.Value, p.Intended.From)
	case p.Intended == nil && p.Actual != nil:
		return ReasonNoIntendedZone, fmt.Sprintf("the VM is in no VM group tied by a VM-host rule to a zone host group of %s, so its zone %q is only where it runs now (%s) and may be wrong after an HA restart: add it to the VM group of its site",
			p.Cluster, p.Actual.Value, p.Actual.From)
	case p.Intended == nil && p.Actual == nil:
		return ReasonNoZoneGroup, fmt.Sprintf("neither the VM nor its host is in a group of %s that is a zone, so its zone comes from staticTopology or tags, if any", p.Cluster)
	}
	return "", ""
}

// GroupError is a hostGroupZones entry that cannot give a VM a zone: no
// mapped host group exists in the cluster, a zone from a name pattern is
// not a label value, or the VM's groups and rules point to several zones.
type GroupError struct {
	VCenter, VM, Cluster, Entry, Problem string
}

func (e *GroupError) Error() string {
	return fmt.Sprintf("vCenter %q: VM %s in %s, %s: %s", e.VCenter, e.VM, e.Cluster, e.Entry, e.Problem)
}

// Is makes errors.Is(err, ErrTopology) true.
func (e *GroupError) Is(target error) bool { return target == ErrTopology }

// groupZones is what the DRS groups say about one VM.
type groupZones struct {
	placement *Placement
	zone      *Value // intended, else actual; nil if neither
	region    *Value
	// noZone is the error when neither the VM's groups nor its host give
	// a zone: returned unless staticTopology or a tag gives one.
	noZone error
}

// clusterOf returns the cluster the VM runs in: its host's parent, else
// the cluster above its resource pool.
func clusterOf(ix *inventory.Index, vm inventory.VM) (inventory.Object, bool) {
	for _, start := range []inventory.Object{{Ref: vm.Host}, {Ref: vm.ResourcePool}} {
		if start.Ref.Value == "" {
			continue
		}
		for _, o := range ix.Ancestors(start.Ref) {
			if o.Ref.Type == "ClusterComputeResource" {
				return o, true
			}
		}
	}
	return inventory.Object{}, false
}

// resolveGroups applies the first hostGroupZones entry that matches the
// VM's cluster; nil (and no error) when none does.
func resolveGroups(entries []config.HostGroupZones, ix *inventory.Index, vm inventory.VM) (*groupZones, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	cluster, ok := clusterOf(ix, vm)
	if !ok {
		return nil, nil
	}
	idx := slices.IndexFunc(entries, func(h config.HostGroupZones) bool { return h.Matches(vm.VCenter, vm.Datacenter, cluster.Name) })
	if idx < 0 {
		return nil, nil
	}
	entry := entries[idx]
	where := fmt.Sprintf("cluster %s (%s)", cluster.Name, cluster.Ref.Value)
	fail := func(format string, args ...any) error {
		return &GroupError{VCenter: vm.VCenter, VM: vm.Location(), Cluster: where, Entry: entry.Describe(idx), Problem: fmt.Sprintf(format, args...)}
	}
	g := cluster.Groups
	if g == nil {
		return nil, fail("the cluster's DRS groups are not read yet; retried when they are")
	}
	// The cluster's host groups that are zones under this entry.
	zoneOf := map[string]string{}
	var all []string
	for name := range g.HostGroups {
		all = append(all, name)
		z, ok := entry.ZoneOf(name)
		if !ok {
			continue
		}
		if errs := validation.IsValidLabelValue(z); len(errs) > 0 {
			return nil, fail("host group %q gives zone %q, which is not a valid label value (%s): rename the group or fix hostGroupPattern", name, z, strings.Join(errs, "; "))
		}
		zoneOf[name] = z
	}
	slices.Sort(all)
	if len(zoneOf) == 0 {
		mapped := entry.HostGroupPattern
		if mapped == "" {
			mapped = strings.Join(entry.GroupNames(), ", ")
		}
		return nil, fail("none of the cluster's host groups is a zone under this entry (the cluster has: %s; the entry maps: %s): fix the group names in the config or in vCenter",
			orNone(all), mapped)
	}

	p := &Placement{Cluster: where}
	// Actual: the zones of the host groups that hold the VM's host.
	if vm.Host.Value != "" {
		var zones, groups []string
		for _, name := range g.HostGroupsOf(vm.Host) {
			if z, ok := zoneOf[name]; ok {
				groups = append(groups, name)
				if !slices.Contains(zones, z) {
					zones = append(zones, z)
				}
			}
		}
		switch len(zones) {
		case 0:
		case 1:
			p.Actual = &Value{zones[0], fmt.Sprintf("host %s is in host group %s of %s (%s)", hostName(ix, vm), strings.Join(groups, ", "), where, entry.Describe(idx)), SourceHostGroup}
		default:
			return nil, fail("host %s is in host groups %s, which are different zones (%s): a host belongs to one site; remove it from all but one", hostName(ix, vm), strings.Join(groups, ", "), strings.Join(zones, ", "))
		}
	}
	// Intended: enabled VM-host rules that tie one of the VM's groups to a
	// zone's host group.
	vmGroups := g.VMGroupsOf(vm.Ref)
	var zones, why []string
	for _, r := range g.Rules {
		if !r.Enabled || !slices.Contains(vmGroups, r.VMGroup) {
			continue
		}
		z, ok := zoneOf[r.AffineHostGroup]
		if !ok {
			continue
		}
		why = append(why, fmt.Sprintf("VM group %s, rule %s -> host group %s (%s)", r.VMGroup, r.Name, r.AffineHostGroup, z))
		if !slices.Contains(zones, z) {
			zones = append(zones, z)
		}
	}
	switch len(zones) {
	case 0:
	case 1:
		p.Intended = &Value{zones[0], fmt.Sprintf("%s of %s (%s)", strings.Join(why, "; "), where, entry.Describe(idx)), SourceHostGroup}
	default:
		return nil, fail("the VM's groups and VM-host rules point to different zones (%s): keep the VM in the VM group of one site", strings.Join(why, "; "))
	}

	out := &groupZones{placement: p, zone: p.Intended}
	if out.zone == nil {
		out.zone = p.Actual
	}
	if out.zone == nil {
		host := "its host"
		if vm.Host.Value != "" {
			host = "its host " + hostName(ix, vm)
		}
		out.noZone = fail("the VM is in no VM group tied by an enabled VM-host rule to a zone host group, and %s is in no zone host group (a host just added to the cluster?), and no staticTopology or zone tag category gives a zone: add the host to its site's host group, or the VM to its site's VM group; retried until then", host)
	}
	if entry.Region != "" {
		out.region = &Value{entry.Region, fmt.Sprintf("region of %s for %s", entry.Describe(idx), where), SourceHostGroup}
	}
	return out, nil
}

func hostName(ix *inventory.Index, vm inventory.VM) string {
	if o, ok := ix.Object(vm.Host); ok {
		return fmt.Sprintf("%s (%s)", o.Name, o.Ref.Value)
	}
	return vm.Host.Value
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "no host groups"
	}
	return strings.Join(list, ", ")
}
