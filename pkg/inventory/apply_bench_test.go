package inventory

import (
	"fmt"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
)

// BenchmarkApplyIdentity applies a full read's identities, 10,000 VMs in
// pages of 100 as a vCenter sends them, to new data: the CCM's work per
// VM on a first read (its pages record only whether they changed
// anything: applyPage), beside the decoding (collectorxml's BenchmarkDecode).
func BenchmarkApplyIdentity(b *testing.B) {
	const vms, page = 10000, 100
	var pages [][]types.ObjectUpdate
	for p := 0; p < vms/page; p++ {
		var us []types.ObjectUpdate
		for i := p * page; i < (p+1)*page; i++ {
			us = append(us, types.ObjectUpdate{Kind: types.ObjectUpdateKindEnter,
				Obj: types.ManagedObjectReference{Type: "VirtualMachine", Value: fmt.Sprintf("vm-%d", i)},
				ChangeSet: []types.PropertyChange{
					{Name: "name", Val: fmt.Sprintf("node-%d", i)},
					{Name: "config.uuid", Val: fmt.Sprintf("42%06x-0000-4000-8000-%012x", i, i)},
					{Name: "config.template", Val: false},
					{Name: "runtime.connectionState", Val: types.VirtualMachineConnectionStateConnected},
					{Name: "parent", Val: types.ManagedObjectReference{Type: "Folder", Value: "group-v1"}},
					{Name: "resourcePool", Val: types.ManagedObjectReference{Type: "ResourcePool", Value: "resgroup-1"}},
				}})
		}
		pages = append(pages, us)
	}
	b.ReportAllocs()
	for b.Loop() {
		d := newData()
		for _, us := range pages {
			d.applyIdentity(&applied{changesOnly: true}, us, specOptions{})
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/vms, "ns/VM")
}
