package inventory

import (
	"fmt"
	"strings"

	"github.com/vmware/govmomi/vim25/types"
)

// VM is what the CCM needs to know about one VM.
type VM struct {
	VCenter    string
	Datacenter string
	Ref        types.ManagedObjectReference
	Name       string
	// UUID is the BIOS UUID (config.uuid), lower case.
	UUID         string
	InstanceUUID string
	// GuestHostname is guest.hostName as reported by VMware Tools.
	GuestHostname string
	GuestID       string
	NumCPU        int32
	MemoryMB      int32
	PowerState    types.VirtualMachinePowerState
	// ConnectionState is runtime.connectionState: anything but connected
	// (the host does not answer, the VM's files are inaccessible) makes
	// PowerState the last state vCenter knew, not the VM's.
	ConnectionState types.VirtualMachineConnectionState
	NICs            []NIC
	// Metadata and MetadataEncoding are the extraConfig values
	// guestinfo.metadata and guestinfo.metadata.encoding: the cloud-init
	// metadata CAPV and others write, whose network config names the
	// statically configured addresses ("" when unset).
	Metadata, MetadataEncoding string
	Host                       types.ManagedObjectReference
	ResourcePool               types.ManagedObjectReference
	Folder                     types.ManagedObjectReference
	// Template VMs are kept in the index but never returned by lookups.
	Template bool
	// Attributes are the VM's custom attribute values by attribute name
	// (Options.CustomAttributes).
	Attributes map[string]string
	attrs      map[int32]string // by key, as read
}

// NIC is one guest network adapter.
type NIC struct {
	Network string
	// DeviceConfigID is the virtual device key; -1 for guest-only adapters.
	DeviceConfigID int32
	MAC            string
	// IPs are the addresses as VMware Tools reports them (guest.net's
	// ipAddress), text unchanged: the reference CCM puts them on Nodes as
	// they are, and a canonical form would rewrite its Nodes' addresses.
	IPs []string
}

// Location names a VM for humans: vCenter/datacenter/name (moref).
func (vm VM) Location() string {
	if vm.Datacenter == "" { // known only by its identity so far
		return fmt.Sprintf("%s/%s (%s)", vm.VCenter, vm.Name, vm.Ref.Value)
	}
	return fmt.Sprintf("%s/%s/%s (%s)", vm.VCenter, vm.Datacenter, vm.Name, vm.Ref.Value)
}

// Object is an inventory object above VMs: host, cluster, folder,
// datacenter, resource pool.
type Object struct {
	Ref    types.ManagedObjectReference
	Name   string
	Parent types.ManagedObjectReference
	// Groups is a cluster's DRS groups and VM-host rules, when followed
	// (Options.ClusterGroups); nil otherwise. Shared: do not modify.
	Groups *ClusterGroups
}

// Kind names the object type for humans ("host", "cluster", ...).
func Kind(ref types.ManagedObjectReference) string {
	switch ref.Type {
	case "HostSystem":
		return "host"
	case "ClusterComputeResource":
		return "cluster"
	case "ComputeResource":
		return "compute resource"
	case "Folder":
		return "folder"
	case "Datacenter":
		return "datacenter"
	case "ResourcePool":
		return "resource pool"
	case "VirtualMachine":
		return "VM"
	}
	return ref.Type
}

// SwapUUID returns the UUID with its first three groups byte-swapped (the
// SMBIOS little-endian encoding some guests report as systemUUID), lower
// case. It returns "" if s is not a UUID.
func SwapUUID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return ""
	}
	for i, c := range s {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return ""
		}
	}
	rev := func(g string) string {
		var b strings.Builder
		for i := len(g) - 2; i >= 0; i -= 2 {
			b.WriteString(g[i : i+2])
		}
		return b.String()
	}
	return rev(s[0:8]) + "-" + rev(s[9:13]) + "-" + rev(s[14:18]) + s[18:]
}

// SameUUID reports whether a and b are the same BIOS UUID, in either byte
// order, any case; false if a is not a UUID.
func SameUUID(a, b string) bool {
	na, nb := NormalizeUUID(a), NormalizeUUID(b)
	return na != "" && (na == nb || na == SwapUUID(nb))
}

// NormalizeUUID lower-cases and trims a UUID; "" if it is not one.
func NormalizeUUID(s string) string {
	if SwapUUID(s) == "" {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(s))
}
