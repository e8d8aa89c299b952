package inventory

import (
	"slices"

	"github.com/vmware/govmomi/vim25/types"
)

// The property filter specs of a collector: what is read of each kind of
// object, and how the server walks to them. Pure functions of the views
// and options, so that each is testable without a vCenter.

// objectKinds are the container types whose name and parent are followed.
var objectKinds = []string{"HostSystem", "ClusterComputeResource", "ComputeResource", "Folder", "Datacenter", "ResourcePool"}

// identityProperties are the VM properties followed for every VM; with
// guest host names, guest.hostName too.
var identityProperties = []string{"name", "config.uuid", "config.template", "runtime.connectionState"}

// vmProperties are the VM properties followed for the VMs whose details
// are kept.
var vmProperties = []string{
	"name", "parent", "resourcePool", "config.uuid", "config.instanceUuid", "config.guestId",
	"config.template", "config.hardware.numCPU", "config.hardware.memoryMB",
	"guest.hostName", "guest.net", "runtime.powerState", "runtime.connectionState", "runtime.host",
	propMetadata, propMetadataEncoding,
}

// The two extraConfig entries read of a VM, by key: a VM's whole
// extraConfig can be large, and only these say which of its addresses are
// static.
const (
	propMetadata         = `config.extraConfig["guestinfo.metadata"]`
	propMetadataEncoding = `config.extraConfig["guestinfo.metadata.encoding"]`
)

// specOptions says what a collector reads beyond names and parents.
type specOptions struct {
	allDetails       bool // every VM's details, not only its identity
	hostnames        bool // every VM's guest host name
	guestIPs         bool // every VM's guest addresses (guest.net)
	clusterGroups    bool // clusters' DRS groups and rules
	customAttributes bool // the VMs' custom attribute values, and their definitions
	// kubeletKey is the property path of the kubelet key fingerprint
	// followed for every VM (keyProperty), "" when not.
	kubeletKey string
	// nodeName is the property path of the provisioner's Node name key
	// followed for every VM, "" when not.
	nodeName string
}

// keyProperty is the property path of extraConfig key k, "" for none.
func keyProperty(k string) string {
	if k == "" {
		return ""
	}
	return `config.extraConfig["` + k + `"]`
}

// detailProperties are the VM properties read for the VMs whose details
// are kept: vmProperties, and customValue with custom attributes.
func detailProperties(o specOptions) []string {
	if o.customAttributes {
		return append(slices.Clip(vmProperties), "customValue")
	}
	return vmProperties
}

// viewSpec selects the objects of a container or list view (not the view).
func viewSpec(view types.ManagedObjectReference) types.ObjectSpec {
	return types.ObjectSpec{Obj: view, Skip: types.NewBool(true),
		SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{Type: view.Type, Path: "view"}}}
}

// objectsSpec reads the hosts, clusters, folders, datacenters and pools of
// the views, and the objects extra (the configured datacenters' ancestors,
// outside every view), each once: the placement a VM's zone and
// datacenter are found from.
func objectsSpec(views, extra []types.ManagedObjectReference, o specOptions) types.PropertyFilterSpec {
	// With custom attributes, extra also holds the CustomFieldsManager:
	// its field definitions name the keys of the VMs' values.
	var spec types.PropertyFilterSpec
	for _, v := range views {
		spec.ObjectSet = append(spec.ObjectSet, viewSpec(v))
	}
	seen := map[types.ManagedObjectReference]bool{}
	for _, r := range extra {
		if !seen[r] {
			seen[r] = true
			spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: r})
		}
	}
	for _, k := range objectKinds {
		props := []string{"name", "parent"}
		if k == "ClusterComputeResource" && o.clusterGroups {
			props = append(props, "configurationEx")
		}
		spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: k, PathSet: props})
	}
	if o.customAttributes {
		spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: "CustomFieldsManager", PathSet: []string{"field"}})
	}
	return spec
}

// inventorySpec is the collector's filter over everything in scope: the
// objects of objectsSpec, and every VM of vmViews with its identity (or
// all its details with allDetails).
func inventorySpec(objectViews, vmViews, extra []types.ManagedObjectReference, o specOptions) types.PropertyFilterSpec {
	spec := objectsSpec(objectViews, extra, o)
	for _, v := range vmViews {
		spec.ObjectSet = append(spec.ObjectSet, viewSpec(v))
	}
	spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: "VirtualMachine", PathSet: vmIdentityProperties(o)})
	return spec
}

// vmIdentityProperties are the VM properties inventorySpec reads.
func vmIdentityProperties(o specOptions) []string {
	props := identityProperties
	if o.allDetails {
		props = detailProperties(o)
	}
	if o.kubeletKey != "" {
		props = append(slices.Clip(props), o.kubeletKey)
	}
	if o.nodeName != "" {
		props = append(slices.Clip(props), o.nodeName)
	}
	if o.allDetails {
		return props
	}
	if o.hostnames {
		props = append(slices.Clip(props), "guest.hostName")
	}
	if o.guestIPs {
		props = append(slices.Clip(props), "guest.net")
	}
	return props
}

// detailsSpec is the collector's filter over the VMs of a list view (the
// VMs of interest): their details.
func detailsSpec(list types.ManagedObjectReference, o specOptions) types.PropertyFilterSpec {
	return types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{viewSpec(list)},
		PropSet:   []types.PropertySpec{{Type: "VirtualMachine", PathSet: detailProperties(o)}},
	}
}

// vmsSpec reads the details of the VMs refs (a direct read).
func vmsSpec(refs []types.ManagedObjectReference, o specOptions) types.PropertyFilterSpec {
	objs := make([]types.ObjectSpec, len(refs))
	for i, r := range refs {
		objs[i] = types.ObjectSpec{Obj: r}
	}
	return types.PropertyFilterSpec{ObjectSet: objs,
		PropSet: []types.PropertySpec{{Type: "VirtualMachine", PathSet: detailProperties(o)}}}
}
