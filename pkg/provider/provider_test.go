package provider_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

type env struct {
	t     *testing.T
	ctx   context.Context
	fleet *vcsim.Fleet
	p     *provider.Provider
}

// stretched starts vc-a (dc-1 with 2 clusters, dc-2), vc-b and vc-c, tags
// regions on datacenters and zones on clusters, and starts a provider with
// the given extra config.
func stretched(t *testing.T, head string, per map[string][]string) *env {
	t.Helper()
	return stretchedWith(t, "", head, per, provider.Options{})
}

// stretchedWith is stretched with a global section (default: timeouts of
// 5s and 3s) and provider options (the vCenter retry pacing is set for
// tests); prepare runs on the fleet before the provider starts.
func stretchedWith(t *testing.T, global, head string, per map[string][]string, opts provider.Options, prepare ...func(context.Context, *vcsim.Fleet)) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	f, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1", "dc-2"}, Clusters: 2, Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-b", Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-c", Hosts: 1, VMs: 2})
	must.OK(t, err)
	t.Cleanup(f.Close)
	for _, v := range f.VCenters {
		for _, vm := range v.VMs {
			must.OK(t, v.Tag(ctx, "k8s-zone", "zone-"+vm.Cluster, vm.ClusterRef))
			must.OK(t, v.Tag(ctx, "k8s-region", "region-"+v.Name+"-"+vm.Datacenter, v.Datacenter(vm.Datacenter)))
		}
	}
	for _, f2 := range prepare {
		f2(ctx, f)
	}
	if head == "" {
		head = "labels:\n  zone: k8s-zone\n  region: k8s-region\n"
	}
	if global == "" {
		global = "global:\n  connectTimeout: 5s\n  requestTimeout: 3s\n"
	}
	text := f.Config(global+head, per)
	cfg, _, err := config.Parse("test.yaml", []byte(text), config.Options{})
	must.OK(t, err)
	opts.VCenter.RetryMin, opts.VCenter.RetryMax = 50*time.Millisecond, 200*time.Millisecond
	p, err := provider.New(cfg, opts)
	must.OK(t, err)
	must.OK(t, p.Start(ctx, nil))
	t.Cleanup(p.Close)
	must.OK(t, p.WaitForSync(ctx))
	return &env{t: t, ctx: ctx, fleet: f, p: p}
}

// node is a Node as kubelet --cloud-provider=external registers it.
func node(vm vcsim.VM) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: strings.ToUpper(vm.UUID)}},
	}
}

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

func TestLifecycle(t *testing.T) {
	e := stretched(t, "", nil)
	b := e.fleet.VCenter("vc-b")
	target := b.VMs[0]
	n := node(target)
	n.Spec.ProviderID = "vsphere://" + target.UUID
	vm := object.NewVirtualMachine(b.Admin(), target.Ref)

	task, err := vm.PowerOff(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	poll.True(t, "shutdown reported", func() bool {
		off, err := e.p.InstanceShutdown(e.ctx, n)
		return off && err == nil
	})
	task, err = vm.PowerOn(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	poll.True(t, "running reported", func() bool {
		off, err := e.p.InstanceShutdown(e.ctx, n)
		return !off && err == nil
	})
	task, err = vm.PowerOff(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	task, err = vm.Destroy(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	poll.True(t, "deletion reported", func() bool {
		ok, err := e.p.InstanceExists(e.ctx, n)
		return !ok && err == nil
	})
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

func TestErrorsNeverMeanGone(t *testing.T) {
	e := stretched(t, "", nil)
	a, b, c := e.fleet.VCenter("vc-a"), e.fleet.VCenter("vc-b"), e.fleet.VCenter("vc-c")

	// Duplicate BIOS UUID in two vCenters: an error naming both, never a pick.
	dup := a.VMs[0]
	b.SetUUID(b.VMs[1].Ref, dup.UUID)
	n := node(dup)
	n.Spec.ProviderID = "vsphere://" + dup.UUID
	poll.True(t, "ambiguity", func() bool {
		_, err := e.p.InstanceMetadata(e.ctx, n)
		return errors.Is(err, inventory.ErrAmbiguous)
	})
	if ok, err := e.p.InstanceExists(e.ctx, n); ok || err == nil || !strings.Contains(err.Error(), "vc-b/dc-1/"+b.VMs[1].Name) {
		t.Errorf("InstanceExists on a duplicate: %v, %v", ok, err)
	}

	// Conflicting zone tags: an error naming the object and the tags.
	must.OK(t, c.Tag(e.ctx, "k8s-zone", "zone-other", c.VMs[0].ClusterRef))
	must.OK(t, e.p.Topology().Cache("vc-c").Refresh(e.ctx))
	_, err := e.p.InstanceMetadata(e.ctx, node(c.VMs[0]))
	if err == nil || !strings.Contains(err.Error(), "zone-other") || !strings.Contains(err.Error(), c.VMs[0].Cluster) {
		t.Errorf("conflicting tags: %v", err)
	}

	// vc-a goes down: its nodes error, never "gone"; the others work.
	must.OK(t, a.SetMode(vcsim.Down))
	ca, _ := e.p.Pool().Client("vc-a")
	poll.True(t, "vc-a down", func() bool {
		_, _ = e.p.InstanceExists(e.ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4299ffff-0000-4000-8000-000000000000"}})
		return ca.Health().State == vcenter.Down
	})
	for _, vm := range e.fleet.VMs() {
		if vm.Name == dup.Name || vm.Ref == b.VMs[1].Ref && vm.VCenter == "vc-b" {
			continue
		}
		n := node(vm)
		n.Spec.ProviderID = "vsphere://" + vm.UUID
		ok, err := e.p.InstanceExists(e.ctx, n)
		if vm.VCenter == "vc-a" {
			// Known but not askable: an error, never "gone", never stale data.
			if err == nil || ok || !errors.Is(err, vcenter.ErrUnavailable) {
				t.Errorf("%s of the down vCenter: %v, %v; want an ErrUnavailable error", vm.Name, ok, err)
			}
			if _, err := e.p.InstanceMetadata(e.ctx, n); err == nil {
				t.Errorf("%s: metadata served while its vCenter is down", vm.Name)
			}
			continue
		}
		if !ok || err != nil {
			t.Errorf("%s during vc-a's outage: %v, %v", vm.Name, ok, err)
		}
	}
	gone := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4299ffff-0000-4000-8000-000000000001"}}
	if ok, err := e.p.InstanceExists(e.ctx, gone); ok || err == nil || !errors.Is(err, vcenter.ErrUnavailable) {
		t.Errorf("unknown VM while vc-a is down: %v, %v; want an error, never false", ok, err)
	}
	must.OK(t, a.SetMode(vcsim.Up))
	poll.True(t, "definitive answer after recovery", func() bool {
		ok, err := e.p.InstanceExists(e.ctx, gone)
		return !ok && err == nil
	})
}

func TestAddressRulesOnSimulator(t *testing.T) {
	e := stretched(t, "labels:\n  zone: k8s-zone\nnodes:\n  internalNetworkSubnetCidr: [10.99.0.0/16, fd00::/8]\n  excludeInternalNetworkSubnetCidr: [10.99.0.100/32]\n  externalNetworkSubnetCidr: [192.0.2.0/24]\n",
		map[string][]string{"vc-c": {"ipFamily: [ipv6, ipv4]"}})
	c := e.fleet.VCenter("vc-c")
	vm := c.VMs[0]
	// Two NICs: a VIP that must not become the InternalIP, then the real address;
	// a public address on a second NIC; a guest-only adapter.
	c.SetGuest(vm.Ref, vm.Name+".example.test", []types.GuestNicInfo{
		{Network: "VM Network", DeviceConfigId: 4000, IpAddress: []string{"10.99.0.100", "10.99.0.5", "fe80::1", "fd00:99::5"}},
		{Network: "public", DeviceConfigId: 4001, IpAddress: []string{"192.0.2.7", "2001:db8::7"}},
		{Network: "", DeviceConfigId: -1, IpAddress: []string{"172.17.0.1"}},
	})
	poll.True(t, "guest info", func() bool {
		md, err := e.p.InstanceMetadata(e.ctx, node(vm))
		return err == nil && len(md.NodeAddresses) > 0 && slices.ContainsFunc(md.NodeAddresses, func(a v1.NodeAddress) bool { return a.Address == "10.99.0.5" })
	})
	md, err := e.p.InstanceMetadata(e.ctx, node(vm))
	must.OK(t, err)
	want := []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: vm.Name + ".example.test"},
		{Type: v1.NodeInternalIP, Address: "fd00:99::5"}, // ipv6 first; external subnet is IPv4 only
		{Type: v1.NodeInternalIP, Address: "10.99.0.5"},
		{Type: v1.NodeExternalIP, Address: "192.0.2.7"},
	}
	if !slices.Equal(md.NodeAddresses, want) {
		t.Errorf("addresses\n got %v\nwant %v", md.NodeAddresses, want)
	}
}
