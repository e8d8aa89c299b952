package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Placement is where one VM is and what topology it gets, with the source
// of each value.
type Placement struct {
	VM         string                    `json:"vm"`
	UUID       string                    `json:"uuid"`
	VCenter    string                    `json:"vcenter"`
	Datacenter string                    `json:"datacenter"`
	Cluster    string                    `json:"cluster,omitempty"`
	Host       string                    `json:"host,omitempty"`
	PowerState string                    `json:"powerState"`
	Zone       *topology.Value           `json:"zone,omitempty"`
	Region     *topology.Value           `json:"region,omitempty"`
	Labels     map[string]topology.Value `json:"labels,omitempty"`
	Error      string                    `json:"error,omitempty"`
}

// Explanation is the report of `topology explain`.
type Explanation struct {
	Placements []Placement `json:"placements"`
	// Conflicts are objects with several tags of one category, or tag names
	// that are not valid label values.
	Conflicts []string `json:"conflicts,omitempty"`
	// Untagged are VMs whose ancestry has no tag of a configured category.
	Untagged []string `json:"untagged,omitempty"`
	// Unreachable are vCenters that are not connected or whose inventory is
	// not current.
	Unreachable []string `json:"unreachable,omitempty"`
}

// Explain resolves every VM in scope (or only vms, when given) and
// collects the problems an operator can fix.
func (p *Provider) Explain(ctx context.Context, vms ...inventory.VM) Explanation {
	var ex Explanation
	if !p.ready() {
		ex.Unreachable = append(ex.Unreachable, p.notReady().Error())
		return ex
	}
	for _, c := range p.pool.Clients() {
		if h := c.Health(); h.State != vcenter.Connected {
			ex.Unreachable = append(ex.Unreachable, fmt.Sprintf("%s: %s since %s: %v", c.Name(), h.State, h.Since.UTC().Format("2006-01-02T15:04:05Z"), h.LastError))
		} else if ok, _, err := p.inv.Index(c.Name()).Status(); !ok {
			ex.Unreachable = append(ex.Unreachable, err.Error())
		}
	}
	if len(vms) == 0 {
		for _, ix := range p.inv.Indexes() {
			vms = append(vms, ix.VMs()...)
		}
	}
	seen := map[string]bool{}
	note := func(list *[]string, msg string) {
		if !seen[msg] {
			seen[msg] = true
			*list = append(*list, msg)
		}
	}
	for _, vm := range vms {
		pl := Placement{VM: vm.Name, UUID: vm.UUID, VCenter: vm.VCenter, Datacenter: vm.Datacenter, PowerState: string(vm.PowerState)}
		if ix := p.inv.Index(vm.VCenter); ix != nil {
			for _, o := range ix.Ancestors(vm.Host) {
				switch o.Ref.Type {
				case "HostSystem":
					pl.Host = o.Name
				case "ClusterComputeResource", "ComputeResource":
					if pl.Cluster == "" {
						pl.Cluster = o.Name
					}
				}
			}
		}
		res, err := p.topo.Resolve(ctx, vm)
		pl.Zone, pl.Region, pl.Labels = res.Zone, res.Region, res.Labels
		if err != nil {
			pl.Error = err.Error()
			for _, e := range flatten(err) {
				var ce *topology.ConflictError
				var ie *topology.InvalidTagError
				var me *topology.MissingTagError
				switch {
				case errors.As(e, &ce), errors.As(e, &ie):
					note(&ex.Conflicts, e.Error())
				case errors.As(e, &me):
					note(&ex.Untagged, e.Error())
				}
			}
		}
		ex.Placements = append(ex.Placements, pl)
	}
	return ex
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
