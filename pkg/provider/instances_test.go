package provider_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
	v1 "k8s.io/api/core/v1"
)

func TestInstanceMetadataEveryVCenter(t *testing.T) {
	e := stretched(t, "", nil)
	for i, vm := range e.fleet.VMs() {
		n := node(vm)
		if i%2 == 1 { // kubelets on some guests report the SMBIOS byte order
			n.Status.NodeInfo.SystemUUID = inventory.SwapUUID(vm.UUID)
		}
		md, err := e.p.InstanceMetadata(e.ctx, n)
		if err != nil {
			t.Errorf("%s: %v", vm.Name, err)
			continue
		}
		want := []v1.NodeAddress{{Type: v1.NodeHostName, Address: vm.Name}, {Type: v1.NodeInternalIP, Address: vm.IPv4}, {Type: v1.NodeExternalIP, Address: vm.IPv4}}
		if md.ProviderID != "vsphere://"+vm.UUID || md.Zone != "zone-"+vm.Cluster || md.Region != "region-"+vm.VCenter+"-"+vm.Datacenter ||
			!slices.Equal(md.NodeAddresses, want) || !strings.HasPrefix(md.InstanceType, "vsphere-vm.cpu-1.mem-") ||
			md.AdditionalLabels[provider.LabelVCenter] != vm.VCenter || md.AdditionalLabels[provider.LabelDatacenter] != vm.Datacenter {
			t.Errorf("%s: %+v", vm.Name, md)
		}
		// With the providerID set, as after initialization.
		n.Spec.ProviderID = md.ProviderID
		if ok, err := e.p.InstanceExists(e.ctx, n); !ok || err != nil {
			t.Errorf("%s: InstanceExists = %v, %v", vm.Name, ok, err)
		}
		if off, err := e.p.InstanceShutdown(e.ctx, n); off || err != nil {
			t.Errorf("%s: InstanceShutdown = %v, %v", vm.Name, off, err)
		}
	}
}

func TestVMotionSeenAtNextLookup(t *testing.T) {
	e := stretched(t, "", nil)
	a := e.fleet.VCenter("vc-a")
	var from, to vcsim.VM
	for _, vm := range a.VMs {
		switch {
		case vm.Cluster == "vc-a-dc-1-c0" && from.Name == "":
			from = vm
		case vm.Cluster == "vc-a-dc-1-c1":
			to = vm
		}
	}
	n := node(from)
	md, err := e.p.InstanceMetadata(e.ctx, n)
	must.OK(t, err)
	if md.Zone != "zone-vc-a-dc-1-c0" {
		t.Fatalf("zone before vMotion: %s", md.Zone)
	}
	cluster := a.Model.Map().Get(to.ClusterRef).(*simulator.ClusterComputeResource)
	pool := *cluster.ResourcePool
	task, err := object.NewVirtualMachine(a.Admin(), from.Ref).Relocate(e.ctx,
		types.VirtualMachineRelocateSpec{Host: &to.HostRef, Pool: &pool}, types.VirtualMachineMovePriorityDefaultPriority)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	poll.True(t, "the new zone", func() bool {
		md, err := e.p.InstanceMetadata(e.ctx, n)
		return err == nil && md.Zone == "zone-vc-a-dc-1-c1"
	})
}

// NodeLabels (--node-labels) are in every Node's metadata, on simulated
// vCenters, beside the labels computed from vSphere, which they never
// replace.
func TestInstanceMetadataNodeLabels(t *testing.T) {
	e := stretchedWith(t, "", "", nil, provider.Options{NodeLabels: map[string]string{"node.example.com/platform": "vsphere", "example.com/pool": ""}})
	for _, vm := range e.fleet.VMs() {
		md, err := e.p.InstanceMetadata(e.ctx, node(vm))
		must.OK(t, err)
		if v, ok := md.AdditionalLabels["example.com/pool"]; md.AdditionalLabels["node.example.com/platform"] != "vsphere" || !ok || v != "" ||
			md.AdditionalLabels[provider.LabelVCenter] != vm.VCenter {
			t.Errorf("%s: labels %v", vm.Name, md.AdditionalLabels)
		}
	}
}
