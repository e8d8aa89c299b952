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
	// The stretched cluster (vc-c's): its VMs' zone is the site of their
	// VM group ("a" or "b"), whatever host they run on.
	stretched key
	siteOf    map[key]string
}

func newTruth(f *vcsim.Fleet) *truth {
	t := &truth{fleet: f, vms: map[string]*nodeVM{}, spares: map[string][]vcsim.VM{},
		zones: map[key]string{}, clusterOf: map[key]key{},
		hidden: map[string]bool{}, siteOf: map[key]string{}}
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

// existing counts the Nodes whose VM exists.
func (t *truth) existing() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, vm := range t.vms {
		if vm.exists {
			n++
		}
	}
	return n
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
		if site, ok := t.siteOf[key{n.vc, n.ref}]; ok {
			n.zone = "zone-site-" + site
		} else if c, ok := t.clusterOf[key{n.vc, n.ref}]; ok {
			n.zone = t.zones[c]
		}
	}
}

// stretch makes the only cluster of vcName a stretched cluster: its
// first host is site a, its second site b; VMs alternate, starting with
// a, and each is in its site's VM group.
func (t *truth) stretch(ctx context.Context, vcName string) error {
	v := t.fleet.VCenter(vcName)
	cluster := v.VMs[0].ClusterRef
	hosts := v.ClusterHosts(cluster)
	sites := []vcsim.Site{{Name: "site-a", Hosts: hosts[:1]}, {Name: "site-b", Hosts: hosts[1:2]}}
	for i, vm := range v.VMs {
		if err := v.Relocate(ctx, vm.Ref, hosts[i%2]); err != nil {
			return err
		}
		sites[i%2].VMs = append(sites[i%2].VMs, vm.Ref)
		t.siteOf[key{vcName, vm.Ref}] = []string{"a", "b"}[i%2]
	}
	t.stretched = key{vcName, cluster}
	t.recomputeZones()
	return v.Stretch(ctx, cluster, sites...)
}

// vmGroups are the VM groups of the stretched cluster as the truth has
// them.
func (t *truth) vmGroups() []types.BaseClusterGroupInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	members := map[string][]types.ManagedObjectReference{}
	for k, site := range t.siteOf {
		members[site] = append(members[site], k.ref)
	}
	var out []types.BaseClusterGroupInfo
	for _, site := range []string{"a", "b"} {
		out = append(out, &types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "site-" + site + "-vms"}, Vm: members[site]})
	}
	return out
}

// gone forgets a destroyed VM's group membership.
func (t *truth) gone(vc string, ref types.ManagedObjectReference) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.siteOf, key{vc, ref})
}
