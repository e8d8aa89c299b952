package topology

import (
	"errors"
	"slices"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// The zone and region of a VM, with both categories configured and no
// staticTopology or host group for it, are what the reference CCM's own
// lookup finds (k8s.io/cloud-provider-vsphere v1.36.0,
// pkg/cloudprovider/vsphere/zones.go:94-160 and
// pkg/common/connectionmanager/zones.go:322-398; make parity runs it on
// the same tag layouts, test/parity/tags_test.go): three attempts, each a
// walk of one object and its ancestors, the nearest first, in which a
// higher tag replaces a lower one until both categories are found (the
// walk vSphere CSI makes too, csiWalk):
//
//  1. the VM's host (host, cluster, host folders, datacenter, root folder);
//  2. the VM's resource pool (its pools, cluster, ... root folder);
//  3. the VM (the VM, its folders, datacenter, root folder).
//
// The first attempt that finds both gives both; values are never mixed
// across attempts. Where the reference's answer depends on the order in
// which vCenter lists tags, this one is an error naming both values.

// referenceChains are the three chains of the reference's lookup.
// host is HostChain's, folders the ancestors of the VM's folder.
func referenceChains(ix *inventory.Index, vm inventory.VM, host, folders []inventory.Object) [][]inventory.Object {
	chains := [][]inventory.Object{host}
	if vm.ResourcePool.Value != "" {
		chains = append(chains, ix.Ancestors(vm.ResourcePool))
	}
	return append(chains, append([]inventory.Object{{Ref: vm.Ref, Name: vm.Name, Parent: vm.Folder}}, folders...))
}

// referenceWalk resolves zone and region (both set) over the chains as the
// reference does. A category found in no attempt is a *MissingTagError
// naming every object checked.
func referenceWalk(cache *Cache, vm inventory.VM, chains [][]inventory.Object, zoneCat, regionCat, zoneWhat, regionWhat string) (Result, error) {
	var onHost map[types.ManagedObjectReference]bool
	if len(chains) > 0 {
		onHost = make(map[types.ManagedObjectReference]bool, len(chains[0]))
		for _, o := range chains[0] {
			onHost[o.Ref] = true
		}
	}
	offHost := func(o inventory.Object) bool { return !onHost[o.Ref] }
	var missing *CSIMissingError
	for _, chain := range chains {
		res, err := csiWalk(cache, vm, chain, zoneCat, regionCat, offHost)
		if err == nil {
			return res, nil
		}
		if !errors.As(err, &missing) {
			return Result{}, err // ambiguous: never a guess
		}
	}
	var checked []string // every object walked, for the error only
	for _, chain := range chains {
		for _, o := range chain {
			if d := describe(o); !slices.Contains(checked, d) {
				checked = append(checked, d)
			}
		}
	}
	var errs []error
	for _, c := range []struct{ category, what string }{{zoneCat, zoneWhat}, {regionCat, regionWhat}} {
		if missing == nil || slices.Contains(missing.Categories, c.category) {
			errs = append(errs, &MissingTagError{VCenter: vm.VCenter, VM: vm.Location(), Category: c.category, What: c.what,
				NoCategory: !cache.hasCategory(c.category), Checked: checked})
		}
	}
	return Result{}, joinErrors(errs)
}
