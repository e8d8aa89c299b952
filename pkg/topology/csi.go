package topology

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// The CSI view follows vSphere CSI v3.7.0, the code make parity runs
// (hack/refcsi), configured with topology-categories naming the CCM's zone
// and region categories (the form vSphere CSI requires with several
// vCenters; its legacy [Labels] zone and region, for one vCenter, needs
// both and walks the same way): the syncer's CSINodeTopology reconciler
// (pkg/syncer/cnsoperator/controller/csinodetopology/csinodetopology_controller.go:488-580)
// calls VirtualMachine.GetTopologyLabels
// (pkg/common/cns-lib/vsphere/virtualmachine.go:363-430), which walks the
// ancestors of the VM's host, the host first, and sets every category it
// finds a tag of on each object over the value found lower: a tag higher
// up wins until every category has one, and the walk stops as soon as that
// happens, even in the middle of an object's tags, which vCenter lists in
// no set order. A category without a tag anywhere fails the whole lookup.
//
// The CCM computes the same, and says where CSI's answer depends on the
// order in which vCenter lists tags instead of guessing one.

// CSI resolves vm as vSphere CSI does with the same zone and region
// categories: tags on the VM's host
// chain only (host, cluster, host folders, datacenter and its folders),
// never the VM, its folders, staticTopology or host groups. Where CSI
// reports no topology the error says why; *ConflictError (two tags of a
// category on one object) and *CSIAmbiguousError are tag layouts on which
// CSI's answer depends on vCenter's listing order.
func (r *Resolver) CSI(ctx context.Context, vm inventory.VM) (Result, error) {
	ix := r.inv.Index(vm.VCenter)
	cache := r.caches[vm.VCenter]
	if ix == nil || cache == nil {
		return Result{}, fmt.Errorf("VM %s: no inventory for vCenter %q", vm.Location(), vm.VCenter)
	}
	if err := cache.Ensure(ctx); err != nil {
		return Result{}, fmt.Errorf("VM %s: read tags: %w", vm.Location(), err)
	}
	return csiWalk(cache, vm, HostChain(ix, vm), r.cfg.Labels.Zone, r.cfg.Labels.Region, nil)
}

// csiWalk is GetTopologyLabels on the cached tags of chain, host first,
// for the zone and region categories that are set. The reference CCM's own
// zone lookup walks each of its chains the same way (reference.go). A value
// found on an object that offHost says is not on the VM's host chain has
// SourceVMTag (vSphere CSI does not see it); nil: every object is.
func csiWalk(cache *Cache, vm inventory.VM, chain []inventory.Object, zoneCat, regionCat string, offHost func(inventory.Object) bool) (Result, error) {
	var cats []string
	for _, c := range []string{zoneCat, regionCat} {
		if c != "" && !slices.Contains(cats, c) {
			cats = append(cats, c)
		}
	}
	if len(cats) == 0 {
		return Result{}, nil
	}
	found := map[string]*Value{}
	for _, o := range chain {
		here := map[string][]string{}
		for _, c := range cats {
			if names, _ := cache.tagsOn(o.Ref, c); len(names) > 0 {
				here[c] = names
			}
		}
		if len(here) == 0 {
			continue
		}
		completes := true // every category still missing has a tag here
		for _, c := range cats {
			if _, ok := here[c]; found[c] == nil && !ok {
				completes = false
			}
		}
		for _, c := range cats {
			names := here[c]
			switch {
			case len(names) > 1:
				// CSI and the reference keep the last listed, or the first
				// when it completes the set: the object's own problem.
				return Result{}, &ConflictError{VCenter: vm.VCenter, Object: describe(o), Category: c, Tags: names}
			case len(names) == 1 && completes && found[c] != nil && found[c].Value != names[0]:
				// The walk stops at the tag that completes the set: whether
				// this one, listed before or after it, replaces the lower
				// value depends on the order.
				return Result{}, &CSIAmbiguousError{VCenter: vm.VCenter, VM: vm.Location(), Object: describe(o), Category: c, Candidates: []string{found[c].Value, names[0]}}
			}
		}
		for _, c := range cats {
			if names, ok := here[c]; ok && (found[c] == nil || !completes) {
				src := SourceHostTag
				if offHost != nil && offHost(o) {
					src = SourceVMTag
				}
				found[c] = &Value{names[0], fmt.Sprintf("tag %s:%s on %s", c, names[0], describe(o)), src}
			}
		}
		if completes {
			break
		}
	}
	var missing []string
	for _, c := range cats {
		if found[c] == nil {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		checked := make([]string, len(chain))
		for i, o := range chain {
			checked[i] = describe(o)
		}
		return Result{}, &CSIMissingError{VCenter: vm.VCenter, VM: vm.Location(), Categories: missing, Checked: checked}
	}
	var res Result
	if zoneCat != "" {
		res.Zone = found[zoneCat]
	}
	if regionCat != "" {
		res.Region = found[regionCat]
	}
	return res, nil
}

func orList(s []string) string {
	q := make([]string, len(s))
	for i, v := range slices.Clone(s) {
		q[i] = fmt.Sprintf("%q", v)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// CSIDifferences lists, for humans, where the zone and region the CCM
// applies differ from what vSphere CSI computes.
func CSIDifferences(applied, csi Result) []string {
	var out []string
	for _, d := range []struct {
		what     string
		ccm, csi *Value
	}{{"zone", applied.Zone, csi.Zone}, {"region", applied.Region, csi.Region}} {
		switch {
		case d.ccm == nil && d.csi == nil:
		case d.ccm == nil:
			out = append(out, fmt.Sprintf("%s: the CCM sets none, vSphere CSI finds %q (%s)", d.what, d.csi.Value, d.csi.From))
		case d.csi == nil:
			out = append(out, fmt.Sprintf("%s: the CCM sets %q (%s), vSphere CSI finds no tag of the category on the host chain", d.what, d.ccm.Value, d.ccm.From))
		case d.ccm.Value != d.csi.Value:
			out = append(out, fmt.Sprintf("%s: the CCM sets %q (%s), vSphere CSI finds %q (%s)", d.what, d.ccm.Value, d.ccm.From, d.csi.Value, d.csi.From))
		}
	}
	return out
}
