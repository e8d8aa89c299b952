package inventory

import (
	"slices"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
)

func propsOf(spec types.PropertyFilterSpec, kind string) []string {
	for _, p := range spec.PropSet {
		if p.Type == kind {
			return p.PathSet
		}
	}
	return nil
}

func TestFilterSpecs(t *testing.T) {
	objView := types.ManagedObjectReference{Type: "ContainerView", Value: "session[x]objs"}
	vmView := types.ManagedObjectReference{Type: "ContainerView", Value: "session[x]vms"}
	dc := types.ManagedObjectReference{Type: "Datacenter", Value: "datacenter-2"}
	root := types.ManagedObjectReference{Type: "Folder", Value: "group-d1"}
	// Two datacenters under the root folder: the root is extra twice.
	extra := []types.ManagedObjectReference{dc, root, root}

	tests := []struct {
		name          string
		opts          specOptions
		vmProps       []string
		clusterGroups bool
	}{
		{"identity only", specOptions{}, identityProperties, false},
		{"guest host names", specOptions{hostnames: true}, append(slices.Clone(identityProperties), "guest.hostName"), false},
		{"guest addresses", specOptions{guestIPs: true}, append(slices.Clone(identityProperties), "guest.net"), false},
		{"host names and addresses", specOptions{hostnames: true, guestIPs: true}, append(slices.Clone(identityProperties), "guest.hostName", "guest.net"), false},
		{"all details", specOptions{allDetails: true, hostnames: true}, vmProperties, false},
		{"cluster groups", specOptions{clusterGroups: true}, identityProperties, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := objectsSpec([]types.ManagedObjectReference{objView}, extra, tt.opts)
			if p := propsOf(objs, "VirtualMachine"); p != nil {
				t.Errorf("objectsSpec reads VM properties %v: it must read no VM", p)
			}
			if n := len(objs.ObjectSet); n != 3 {
				t.Errorf("objectsSpec has %d object specs, want 3 (the view, the datacenter, the root folder once)", n)
			}
			if v := objs.ObjectSet[0]; v.Obj != objView || !*v.Skip || v.SelectSet[0].(*types.TraversalSpec).Type != "ContainerView" {
				t.Errorf("objectsSpec does not traverse the view (and skip it): %+v", v)
			}
			hasGroups := slices.Contains(propsOf(objs, "ClusterComputeResource"), "configurationEx")
			if hasGroups != tt.clusterGroups {
				t.Errorf("clusters read configurationEx: %v, want %v", hasGroups, tt.clusterGroups)
			}
			for _, k := range objectKinds {
				if p := propsOf(objs, k); !slices.Contains(p, "name") || !slices.Contains(p, "parent") {
					t.Errorf("%s: properties %v, want name and parent", k, p)
				}
			}

			all := inventorySpec([]types.ManagedObjectReference{objView}, []types.ManagedObjectReference{vmView}, extra, tt.opts)
			if got := propsOf(all, "VirtualMachine"); !slices.Equal(got, tt.vmProps) {
				t.Errorf("inventorySpec reads VM properties %v, want %v", got, tt.vmProps)
			}
			if !slices.ContainsFunc(all.ObjectSet, func(o types.ObjectSpec) bool { return o.Obj == vmView }) {
				t.Errorf("inventorySpec does not hold the VM view")
			}
			if !slices.Equal(propsOf(all, "HostSystem"), propsOf(objs, "HostSystem")) {
				t.Errorf("inventorySpec reads hosts differently from objectsSpec")
			}
		})
	}
	// Appending to the identity list for one spec must not change another's.
	_ = vmIdentityProperties(specOptions{hostnames: true})
	if slices.Contains(identityProperties, "guest.hostName") {
		t.Errorf("identityProperties was modified: %v", identityProperties)
	}
}

func TestDetailsAndVMsSpecs(t *testing.T) {
	list := types.ManagedObjectReference{Type: "ListView", Value: "session[x]list"}
	d := detailsSpec(list, specOptions{})
	if len(d.ObjectSet) != 1 || d.ObjectSet[0].SelectSet[0].(*types.TraversalSpec).Type != "ListView" {
		t.Errorf("detailsSpec does not traverse the list view: %+v", d.ObjectSet)
	}
	if !slices.Equal(propsOf(d, "VirtualMachine"), vmProperties) {
		t.Errorf("detailsSpec reads %v, want vmProperties", propsOf(d, "VirtualMachine"))
	}
	refs := []types.ManagedObjectReference{{Type: "VirtualMachine", Value: "vm-1"}, {Type: "VirtualMachine", Value: "vm-2"}}
	v := vmsSpec(refs, specOptions{})
	if len(v.ObjectSet) != 2 || v.ObjectSet[1].Obj != refs[1] || v.ObjectSet[0].Skip != nil {
		t.Errorf("vmsSpec object set %+v, want the two VMs themselves", v.ObjectSet)
	}
}
