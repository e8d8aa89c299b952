package provider

import (
	"fmt"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// InstanceType is vsphere-vm.cpu-<n>.mem-<gb>gb.os-<short os>, as the
// reference CCM writes it: the memory in whole GiB rounded down (512 MB is
// mem-0gb), the short OS from the reference's own guestId table (guestOS),
// "unknown" for a guestId it does not list.
func InstanceType(vm inventory.VM) string {
	os, ok := guestOS[vm.GuestID]
	if !ok {
		os = "unknown"
	}
	return fmt.Sprintf("vsphere-vm.cpu-%d.mem-%dgb.os-%s", vm.NumCPU, vm.MemoryMB/1024, os)
}
