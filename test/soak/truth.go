package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// key names a managed object in one vCenter (references repeat across
// vCenters).
type key struct {
	vc  string
	ref types.ManagedObjectReference
}

// nodeVM is what the soak knows of one Node's VM.
type nodeVM struct {
	name   string // the Node's name (its first VM's name)
	uuid   string
	vc     string
	ref    types.ManagedObjectReference
	exists bool
	zone   string // what its Node must carry
	region string
}

// truth is the soak's own record of where every Node's VM is and what
// zone and region it has: every change the soak makes goes through it.
// The last VM of every vCenter is a spare, not a Node: a VM moved to that
// vCenter takes its place.
type truth struct {
	fleet *vcsim.Fleet

	mu        sync.Mutex
	vms       map[string]*nodeVM    // by Node name
	spares    map[string][]vcsim.VM // by vCenter
	zones     map[key]string        // cluster -> zone tag
	clusterOf map[key]key           // VM -> cluster
	hidden    map[string]bool       // Node names whose VM identity is unreadable now
}

func newTruth(f *vcsim.Fleet) *truth {
	t := &truth{fleet: f, vms: map[string]*nodeVM{}, spares: map[string][]vcsim.VM{},
		zones: map[key]string{}, clusterOf: map[key]key{},
		hidden: map[string]bool{}}
	for _, v := range f.VCenters {
		for i, vm := range v.VMs {
			t.zones[key{v.Name, vm.ClusterRef}] = "zone-" + vm.Cluster
			t.clusterOf[key{v.Name, vm.Ref}] = key{v.Name, vm.ClusterRef}
			if i == len(v.VMs)-1 {
				t.spares[v.Name] = append(t.spares[v.Name], vm)
				continue
			}
			t.vms[vm.Name] = &nodeVM{name: vm.Name, uuid: vm.UUID, vc: v.Name, ref: vm.Ref, exists: true,
				zone: "zone-" + vm.Cluster, region: "region-" + vm.Datacenter}
		}
	}
	return t
}

// tagAll tags every cluster with its zone and every datacenter with its
// region.
func (t *truth) tagAll(ctx context.Context) error {
	for _, v := range t.fleet.VCenters {
		for _, vm := range v.VMs {
			if err := v.Tag(ctx, "k8s-zone", "zone-"+vm.Cluster, vm.ClusterRef); err != nil {
				return err
			}
			if err := v.Tag(ctx, "k8s-region", "region-"+vm.Datacenter, v.Datacenter(vm.Datacenter)); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodes returns a copy of every Node's record, sorted by name.
func (t *truth) nodes() []nodeVM {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]nodeVM, 0, len(t.vms))
	for _, n := range t.vms {
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b nodeVM) int { return strings.Compare(a.name, b.name) })
	return out
}

// exists reports whether the Node's VM exists, and where.
func (t *truth) exists(node string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.vms[node]
	if !ok || !n.exists {
		return "", false
	}
	return fmt.Sprintf("%s %s, BIOS UUID %s", n.vc, n.ref.Value, n.uuid), true
}

// pick returns a random existing Node VM whose identity is readable.
func (t *truth) pick(s *soak) (nodeVM, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for name, n := range t.vms {
		if n.exists && !t.hidden[name] {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nodeVM{}, false
	}
	slices.Sort(names)
	return *t.vms[names[s.rnd.IntN(len(names))]], true
}

func (t *truth) update(node string, fn func(*nodeVM)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(t.vms[node])
}

// recomputeZones sets every Node's zone from its VM's cluster's tag.
func (t *truth) recomputeZones() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.vms {
		if c, ok := t.clusterOf[key{n.vc, n.ref}]; ok {
			n.zone = t.zones[c]
		}
	}
}
