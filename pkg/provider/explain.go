package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
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
	// InstanceType is the instance type and where it came from: a tag of
	// labels.instanceType, or generated from the VM's size and guest.
	InstanceType topology.Value `json:"instanceType"`
	// Site is the intended and actual zone when host groups apply.
	Site *topology.Placement `json:"site,omitempty"`
	// Warning is the site's warning, if any.
	Warning string `json:"warning,omitempty"`
	// CSI is what vSphere CSI computes (ExplainOptions.CSI).
	CSI   *CSIView `json:"csi,omitempty"`
	Error string   `json:"error,omitempty"`
}

// CSIView is the zone and region vSphere CSI computes for a VM with the
// same categories, and how they differ from the CCM's.
type CSIView struct {
	Zone        *topology.Value `json:"zone,omitempty"`
	Region      *topology.Value `json:"region,omitempty"`
	Differences []string        `json:"differences,omitempty"`
	Error       string          `json:"error,omitempty"`
}

// ExplainOptions selects what Explain adds.
type ExplainOptions struct {
	// CSI adds, per VM, what vSphere CSI computes, and lists differences.
	CSI bool
	// Nodes are checked for drift: labels that no longer match their VM.
	Nodes []v1.Node
}

// Explanation is the report of `topology explain`.
type Explanation struct {
	// Deletion says when a Node is deleted because its VM is gone: the
	// policy in force and what set it.
	Deletion string `json:"deletion"`
	// Scope says, per vCenter, which datacenters are read: every one, or
	// the configured ones with the names vCenter resolved them to (a
	// datacenter may be configured by managed object ID or path).
	Scope      []string    `json:"scope"`
	Placements []Placement `json:"placements"`
	// Conflicts are objects with several tags of one category, or tag names
	// that are not valid label values.
	Conflicts []string `json:"conflicts,omitempty"`
	// Untagged are VMs whose ancestry has no tag of a configured category.
	Untagged []string `json:"untagged,omitempty"`
	// Unreachable are vCenters that are not connected or whose inventory is
	// not current.
	Unreachable []string `json:"unreachable,omitempty"`
	// Unprovable are vCenters that cannot prove any VM absent because they
	// hold VMs whose identity cannot be read: while they do, no Node is
	// deleted for a missing VM.
	Unprovable []string `json:"unprovable,omitempty"`
	// MissingPrivileges are, per vCenter, the objects on which the CCM's
	// user lacks System.Read (checked when Explain runs): VMs there are
	// hidden from its views and searches, so while any is missing no Node
	// is deleted for a missing VM.
	MissingPrivileges []string `json:"missingPrivileges,omitempty"`
	// Misplaced are VMs of stretched clusters outside their intended zone,
	// or without one.
	Misplaced []string `json:"misplaced,omitempty"`
	// Drifted are Nodes whose zone or region label no longer matches their VM.
	Drifted []string `json:"drifted,omitempty"`
	// CSIDifferences are VMs whose zone or region differs from what vSphere
	// CSI computes (ExplainOptions.CSI).
	CSIDifferences []string `json:"csiDifferences,omitempty"`
	// DeletionsHeld are vCenters and datacenters Nodes are labelled with
	// that the config does not have: while any Node is, no Node is deleted
	// for a missing VM (its VM may have moved there).
	DeletionsHeld []string `json:"deletionsHeld,omitempty"`
	// Uninitialized are Nodes that joined without the uninitialized taint
	// and have no providerID: no CCM initializes them (JoinedWithoutTaint).
	Uninitialized []string `json:"uninitialized,omitempty"`
}

// Problems counts what an operator should fix.
func (ex Explanation) Problems() int {
	return len(ex.Conflicts) + len(ex.Untagged) + len(ex.Unreachable) + len(ex.Unprovable) + len(ex.MissingPrivileges) + len(ex.Misplaced) + len(ex.Drifted) + len(ex.CSIDifferences) + len(ex.DeletionsHeld) +
		len(ex.Uninitialized)
}

// DeletionPolicy says, for people, when a Node is deleted because its VM
// is gone.
func (p *Provider) DeletionPolicy() string {
	switch {
	case p.cfg.Nodes.SkipNodeDeletion:
		return "never: " + config.SkipNodeDeletionEnv + " is set (the reference CCM's switch): a VM proven gone is reported as an error and its Node kept"
	case p.cfg.Nodes.Deletion == config.DeletionNever:
		return "never: nodes.deletion is never"
	}
	policy := "on proof: a Node with a vsphere:// providerID whose VM every configured vCenter proves absent"
	if d := p.cfg.Nodes.DeletionDelay; d > 0 {
		policy += fmt.Sprintf(", at every check for %s (nodes.deletionDelay)", d)
	}
	return policy
}

// Explain resolves every VM in scope (or only vms, when given) and
// collects the problems an operator can fix.
func (p *Provider) Explain(ctx context.Context, opts ExplainOptions, vms ...inventory.VM) Explanation {
	ex := Explanation{Deletion: p.DeletionPolicy()}
	if !p.ready() {
		ex.Unreachable = append(ex.Unreachable, p.notReady().Error())
		return ex
	}
	for _, c := range p.pool.Clients() {
		ex.Scope = append(ex.Scope, p.scope(c.Name()))
		if h := c.Health(); h.State != vcenter.Connected {
			ex.Unreachable = append(ex.Unreachable, fmt.Sprintf("%s: %s since %s: %v", c.Name(), h.State, h.Since.UTC().Format("2006-01-02T15:04:05Z"), h.LastError))
		} else if ok, _, err := p.inv.Index(c.Name()).Status(); !ok {
			ex.Unreachable = append(ex.Unreachable, err.Error())
		}
		if u := p.inv.Index(c.Name()).Unreadable(); len(u) > 0 {
			ex.Unprovable = append(ex.Unprovable, (&inventory.UnreadableError{VCenter: c.Name(), VMs: u}).Error())
		}
		privs := p.inv.Index(c.Name()).CheckPrivileges(ctx)
		for _, m := range privs.Missing {
			ex.MissingPrivileges = append(ex.MissingPrivileges, c.Name()+": "+m.String())
		}
		if privs.Err != nil {
			ex.MissingPrivileges = append(ex.MissingPrivileges, privs.Err.Error())
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
		pl := Placement{VM: vm.Name, UUID: vm.UUID, VCenter: vm.VCenter, Datacenter: vm.Datacenter, PowerState: string(vm.PowerState),
			InstanceType: topology.Value{Value: InstanceType(vm), From: "the VM's CPUs, memory and guest OS (the reference CCM's format)"}}
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
		pl.Zone, pl.Region, pl.Labels, pl.Site = res.Zone, res.Region, res.Labels, res.Placement
		if res.InstanceType != nil {
			pl.InstanceType = *res.InstanceType
		}
		if _, w := res.Placement.Warning(); w != "" {
			pl.Warning = w
			note(&ex.Misplaced, fmt.Sprintf("VM %s: %s", vm.Location(), w))
		}
		if opts.CSI {
			csi, cerr := p.topo.CSI(ctx, vm)
			pl.CSI = &CSIView{Zone: csi.Zone, Region: csi.Region}
			switch {
			case cerr != nil:
				pl.CSI.Error = cerr.Error()
				if err == nil && (res.Zone != nil || res.Region != nil) {
					pl.CSI.Differences = []string{"the CCM sets a zone or region, vSphere CSI fails the Node: " + cerr.Error()}
					note(&ex.CSIDifferences, fmt.Sprintf("VM %s: %s", vm.Location(), pl.CSI.Differences[0]))
				}
			case err == nil:
				pl.CSI.Differences = topology.CSIDifferences(res, csi)
				for _, d := range pl.CSI.Differences {
					note(&ex.CSIDifferences, fmt.Sprintf("VM %s: %s", vm.Location(), d))
				}
			}
		}
		if err != nil {
			pl.Error = err.Error()
			for _, e := range flatten(err) {
				// Classified as for the Node's events.
				switch reason(e, false) {
				case ReasonTopologyConflict, ReasonHostGroupZoneInvalid:
					note(&ex.Conflicts, e.Error())
				case ReasonTopologyTagMissing:
					note(&ex.Untagged, e.Error())
				}
			}
		}
		ex.Placements = append(ex.Placements, pl)
	}
	for _, d := range p.nodeDrift(ctx, opts.Nodes) {
		note(&ex.Drifted, d.String())
	}
	ex.DeletionsHeld = p.deletionsHeld(opts.Nodes)
	for i := range opts.Nodes {
		// Only Nodes whose VM is found: a cluster may have Nodes that are
		// not vSphere VMs.
		if n := &opts.Nodes[i]; JoinedWithoutTaint(n) {
			if _, err := p.FindVM(ctx, n); err == nil {
				ex.Uninitialized = append(ex.Uninitialized, UninitializedWhy(n.Name, p.cfg.Nodes.AdoptUntainted))
			}
		}
	}
	return ex
}

// UninitializedWhy says why a Node that joined without the uninitialized
// taint has no providerID, zone or addresses, and what to do.
func UninitializedWhy(node string, adopt bool) string {
	if adopt {
		return node + ": joined without the node.cloudprovider.kubernetes.io/uninitialized taint and has no providerID; nodes.adoptUntainted is on: the node-topology controller taints it once its VM is found, and the node controller then initializes it"
	}
	return node + ": joined without the node.cloudprovider.kubernetes.io/uninitialized taint and has no providerID, so no CCM initializes it (kubelet without --cloud-provider=external, or joined before the CCM was installed); start its kubelet with --cloud-provider=external and register it again, or set nodes.adoptUntainted: true"
}

// deletionsHeld names, for each vCenter (or vCenter/datacenter) that Nodes
// are labelled with but the config does not have, how many Nodes name it:
// while any does, no Node is deleted for a missing VM (othersInScope).
func (p *Provider) deletionsHeld(nodes []v1.Node) []string {
	count := map[string]int{}
	example := map[string]string{}
	for i := range nodes {
		var nc *NotConfiguredError
		if err := p.InScope(&nodes[i]); errors.As(err, &nc) {
			where := "vCenter " + nc.VCenter
			if nc.Datacenter != "" {
				where += " datacenter " + nc.Datacenter
			}
			if count[where]++; count[where] == 1 {
				example[where] = nodes[i].Name
			}
		}
	}
	var out []string
	for _, where := range slices.Sorted(maps.Keys(count)) {
		out = append(out, fmt.Sprintf("%s is not configured but %d Node(s) are labelled with it (%s first): no Node is deleted for a missing VM while they are; add it back, or delete those Nodes once their VMs are gone",
			where, count[where], example[where]))
	}
	return out
}

// nodeDrift returns the drift of the given Nodes (for the explain
// command).
func (p *Provider) nodeDrift(ctx context.Context, nodes []v1.Node) []Drift {
	var out []Drift
	for i := range nodes {
		n := &nodes[i]
		if n.Spec.ProviderID == "" {
			continue
		}
		vm, err := p.FindVM(ctx, n)
		if err != nil {
			continue
		}
		res, err := p.topo.Resolve(ctx, vm)
		if err != nil {
			continue
		}
		out = append(out, p.nodeDriftOf(n, vm, res)...)
	}
	return out
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// scope describes the datacenters of vcenter that are read: "vc-a: every
// datacenter", or "vc-a: dc-1, datacenter-21 (dc-2)" with the name vCenter
// resolved for each configured ID or path that differs from it.
func (p *Provider) scope(name string) string {
	vc, _ := p.cfg.VCenter(name)
	if len(vc.Datacenters) == 0 {
		return name + ": every datacenter"
	}
	resolved := p.datacenterNames(name)
	var parts []string
	for i, d := range vc.Datacenters {
		if i < len(resolved) && resolved[i] != d {
			d += " (" + resolved[i] + ")"
		}
		parts = append(parts, d)
	}
	return name + ": " + strings.Join(parts, ", ")
}
