package topology

import (
	"context"
	"errors"
	"fmt"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// CSI resolves vm the way vSphere CSI does with the same zone and region
// categories: the nearest tag of each on the VM's host chain (host,
// cluster, host folders, datacenter and its folders), never the VM, its
// folders, staticTopology or host groups. A category without a tag there
// gives nil, where vSphere CSI reports "nodeVM does not have labels for the
// following categories".
func (r *Resolver) CSI(ctx context.Context, vm inventory.VM) (Result, error) {
	ix := r.inv.Index(vm.VCenter)
	cache := r.caches[vm.VCenter]
	if ix == nil || cache == nil {
		return Result{}, fmt.Errorf("VM %s: no inventory for vCenter %q", vm.Location(), vm.VCenter)
	}
	if err := cache.Ensure(ctx); err != nil {
		return Result{}, fmt.Errorf("VM %s: read tags: %w", vm.Location(), err)
	}
	chain := HostChain(ix, vm)
	var res Result
	var errs []error
	for _, c := range []struct {
		category, what string
		out            **Value
	}{{r.cfg.Labels.Zone, "labels.zone", &res.Zone}, {r.cfg.Labels.Region, "labels.region", &res.Region}} {
		if c.category == "" {
			continue
		}
		v, err := r.walk(cache, vm, chain, len(chain), c.category, c.what, false)
		if err != nil {
			errs = append(errs, err)
		}
		*c.out = v
	}
	return res, errors.Join(errs...)
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
