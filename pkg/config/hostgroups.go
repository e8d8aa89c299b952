package config

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

// HostGroupZones maps the DRS host groups of the clusters it matches to
// zones: a stretched cluster's sites are host groups, its VMs are placed
// by VM groups and VM-host rules. The first entry that matches a VM's
// cluster applies.
type HostGroupZones struct {
	// VCenter limits the entry to one vCenter (its name in this config).
	VCenter string `json:"vcenter,omitempty"`
	// Datacenter limits the entry to one datacenter.
	Datacenter string `json:"datacenter,omitempty"`
	// Cluster is the cluster's name, or a shell pattern ("*", "stretched-*").
	Cluster string `json:"cluster"`
	// HostGroups maps host group names to zones.
	HostGroups map[string]string `json:"hostGroups,omitempty" validate:"dive,keys,required,endkeys,labelvalue"`
	// HostGroupPattern takes the zone from the host group's name instead:
	// the submatch named "zone", or the first one. Groups that do not
	// match are not zones.
	HostGroupPattern string `json:"hostGroupPattern,omitempty"`
	// Region is the region of every VM the entry applies to. Empty: the
	// region comes from staticTopology or tags as usual.
	Region string `json:"region,omitempty" validate:"omitempty,labelvalue"`

	pattern *regexp.Regexp
}

// Matches reports whether the entry applies to a cluster of the given
// vCenter and datacenter.
func (h HostGroupZones) Matches(vcenter, datacenter, cluster string) bool {
	if h.VCenter != "" && h.VCenter != vcenter {
		return false
	}
	if h.Datacenter != "" && h.Datacenter != datacenter {
		return false
	}
	ok, _ := path.Match(h.Cluster, cluster)
	return ok
}

// ZoneOf returns the zone of a host group, or false if the group is not a
// zone under this entry. The zone may be an invalid label value when it
// comes from HostGroupPattern; the caller checks.
func (h HostGroupZones) ZoneOf(group string) (string, bool) {
	if h.HostGroups != nil {
		z, ok := h.HostGroups[group]
		return z, ok
	}
	if h.pattern == nil {
		return "", false
	}
	m := h.pattern.FindStringSubmatch(group)
	if m == nil {
		return "", false
	}
	if i := h.pattern.SubexpIndex("zone"); i > 0 {
		return m[i], true
	}
	return m[1], true
}

// Describe names the entry for humans: hostGroupZones[0] (cluster "x").
func (h HostGroupZones) Describe(i int) string {
	return fmt.Sprintf("hostGroupZones[%d] (cluster %q)", i, h.Cluster)
}

func (b *builder) buildHostGroupZones(raw []rawHostGroupZones, vcenters []VCenter) []HostGroupZones {
	var out []HostGroupZones
	for i, r := range raw {
		p := fmt.Sprintf("hostGroupZones[%d]", i)
		h := HostGroupZones{VCenter: deref(r.VCenter), Datacenter: deref(r.Datacenter), Cluster: deref(r.Cluster),
			HostGroupPattern: deref(r.HostGroupPattern), Region: deref(r.Region)}
		switch {
		case strings.TrimSpace(h.Cluster) == "":
			b.errorf(p+".cluster", "cluster is required: the cluster's name, or a pattern such as \"*\"")
		default:
			if _, err := path.Match(h.Cluster, ""); err != nil {
				b.errorf(p+".cluster", "%q is not a valid name pattern: %v", h.Cluster, err)
			}
		}
		if h.VCenter != "" {
			if vc, ok := (&Config{VCenters: vcenters}).VCenter(h.VCenter); !ok {
				names := make([]string, 0, len(vcenters))
				for _, v := range vcenters {
					names = append(names, v.Name)
				}
				b.errorf(p+".vcenter", "vCenter %q is not configured; configured: %s", h.VCenter, strings.Join(names, ", "))
			} else if h.Datacenter != "" && len(vc.Datacenters) > 0 && !contains(vc.Datacenters, h.Datacenter) {
				b.errorf(p+".datacenter", "datacenter %q is not in vCenter %q's datacenters %v", h.Datacenter, h.VCenter, vc.Datacenters)
			}
		}
		if r.HostGroups != nil {
			h.HostGroups = map[string]string{}
			for name, zone := range r.HostGroups {
				if zone == nil || *zone == "" {
					b.errorf(fmt.Sprintf("%s.hostGroups[%q]", p, name), "no zone given for host group %q", name)
					continue
				}
				h.HostGroups[name] = *zone
			}
		}
		switch {
		case r.HostGroups != nil && h.HostGroupPattern != "":
			b.errorf(p+".hostGroupPattern", "set either hostGroups (names to zones) or hostGroupPattern (zone from the name), not both")
		case r.HostGroups == nil && h.HostGroupPattern == "":
			b.errorf(p, "set hostGroups (host group names to zones) or hostGroupPattern (a regular expression whose submatch is the zone)")
		case r.HostGroups != nil && len(r.HostGroups) == 0:
			b.errorf(p+".hostGroups", "hostGroups is empty; map at least one host group to a zone")
		case h.HostGroupPattern != "":
			re, err := regexp.Compile(h.HostGroupPattern)
			switch {
			case err != nil:
				b.errorf(p+".hostGroupPattern", "%q is not a regular expression: %v", h.HostGroupPattern, err)
			case re.NumSubexp() == 0:
				b.errorf(p+".hostGroupPattern", "%q has no submatch: put the zone part in parentheses, for example ^(.+)-hosts$", h.HostGroupPattern)
			default:
				h.pattern = re
			}
		}
		out = append(out, h)
	}
	return out
}

// GroupNames returns the host group names of HostGroups, sorted (none
// with HostGroupPattern).
func (h HostGroupZones) GroupNames() []string {
	names := make([]string, 0, len(h.HostGroups))
	for n := range h.HostGroups {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
