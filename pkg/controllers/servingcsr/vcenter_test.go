package servingcsr

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestDecideAgainstVCenters: Decide over the provider's inventories of
// three simulated vCenters, each case what a vCenter really reports: the
// VM's own addresses and guest host name are approved; another VM's
// address, a VIP a second VM reports, the old address after the guest's
// changed, are denied; a powered-off VM, a UUID found in two vCenters
// and a vCenter down wait, and the last is approved once it is back.
func TestDecideAgainstVCenters(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-a", Hosts: 2, VMs: 3},
		vcsim.Spec{Name: "vc-b", Hosts: 1, VMs: 2},
		vcsim.Spec{Name: "vc-c", Hosts: 1, VMs: 1},
		// Only dc-in is configured: dc-out's VMs are outside the inventory.
		vcsim.Spec{Name: "vc-d", Hosts: 1, VMs: 1, Datacenters: []string{"dc-in", "dc-out"}})
	must.OK(t, err)
	defer f.Close()
	text := f.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 3s\nnodes:\n  servingCertificates:\n    approve: true\n",
		map[string][]string{"vc-d": {"datacenters: [dc-in]"}})
	cfg, _, err := config.Parse("test.yaml", []byte(text), config.Options{})
	must.OK(t, err)
	p, err := provider.New(cfg, provider.Options{})
	must.OK(t, err)
	must.OK(t, p.Start(ctx, nil))
	defer p.Close()
	must.OK(t, p.WaitForSync(ctx))
	facts := ProviderFacts{Provider: p} // no reuse of searches: each decision sees vCenter now

	a, b, c := f.VCenter("vc-a"), f.VCenter("vc-b"), f.VCenter("vc-c")
	nodeOf := func(vm vcsim.VM) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + vm.UUID}}
	}
	// The cluster: a Node for every configured VM, and the kubernetes
	// Service, through the controller's informers.
	objs := []runtime.Object{&v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"}}}}
	var outside vcsim.VM
	for _, vm := range f.VMs() {
		if vm.Datacenter == "dc-out" {
			outside = vm
			continue
		}
		objs = append(objs, nodeOf(vm))
	}
	kube := fake.NewClientset(objs...)
	inf := informers.NewSharedInformerFactory(kube, 0)
	cluster, err := NewClusterIndex(kube, inf.Core().V1().Nodes(), ClusterOptions{ServiceCIDRAPI: true})
	must.OK(t, err)
	inf.Start(ctx.Done())
	cluster.Start(ctx)
	defer cluster.Shutdown()
	defer cancel() // before Shutdown: the informers stop with ctx
	poll.True(t, "the cluster's informers synced", cluster.HasSynced)
	decide := func(vm vcsim.VM, dns []string, ips ...string) Verdict {
		// Made now: vCenter's address holders are read after it.
		req := Request{Node: vm.Name, DNSNames: dns, Created: time.Now()}
		for _, s := range ips {
			req.IPs = append(req.IPs, netip.MustParseAddr(s))
		}
		return Decide(ctx, req, nodeOf(vm), facts, cluster, Bounds{})
	}
	expect := func(t *testing.T, v Verdict, d Decision, reason string) {
		t.Helper()
		if v.Decision != d || v.Reason != reason {
			t.Fatalf("verdict %+v, want %s %s", v, d, reason)
		}
	}
	w1, w2, w3 := a.VMs[0], a.VMs[1], a.VMs[2]
	t.Run("its own names and addresses", func(t *testing.T) {
		expect(t, decide(w1, []string{w1.Name}, w1.IPv4), Approve, "Proven")
		expect(t, decide(b.VMs[0], []string{b.VMs[0].Name}, b.VMs[0].IPv4), Approve, "Proven")
	})
	t.Run("another VM's address", func(t *testing.T) {
		expect(t, decide(w1, []string{w1.Name}, w2.IPv4), Deny, "IPNotNodes")
	})
	t.Run("another Node's name", func(t *testing.T) {
		expect(t, decide(w1, []string{w2.Name}, w1.IPv4), Deny, "DNSNotNodes")
	})
	t.Run("an address no VM has", func(t *testing.T) {
		expect(t, decide(w1, nil, "192.0.2.77"), Deny, "IPNotNodes")
	})
	t.Run("a VIP a second VM reports", func(t *testing.T) {
		vip := b.VMs[1]
		b.SetGuest(vip.Ref, vip.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{vip.IPv4, w1.IPv4}, Connected: true, DeviceConfigId: 4000}})
		poll.True(t, "the VIP seen", func() bool { return decide(w1, nil, w1.IPv4).Reason == "SharedIP" })
		expect(t, decide(w1, nil, w1.IPv4), Deny, "SharedIP")
		b.SetGuest(vip.Ref, vip.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{vip.IPv4}, Connected: true, DeviceConfigId: 4000}})
		poll.True(t, "the VIP gone", func() bool { return decide(w1, nil, w1.IPv4).Decision == Approve })
	})
	t.Run("renewed after the IP changed", func(t *testing.T) {
		a.SetGuest(w3.Ref, w3.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{"10.99.0.3"}, Connected: true, DeviceConfigId: 4000}})
		poll.True(t, "the new address followed", func() bool { return decide(w3, nil, "10.99.0.3").Decision == Approve })
		expect(t, decide(w3, nil, w3.IPv4), Deny, "IPNotNodes")
	})
	t.Run("a powered-off VM", func(t *testing.T) {
		vm := b.VMs[1]
		task, err := object.NewVirtualMachine(b.Admin(), vm.Ref).PowerOff(ctx)
		must.OK(t, err)
		must.OK(t, task.Wait(ctx))
		poll.True(t, "powered off", func() bool { return decide(vm, nil, vm.IPv4).Reason == "VMPoweredOff" })
		expect(t, decide(vm, nil, vm.IPv4), Pending, "VMPoweredOff")
	})
	t.Run("a UUID found in two vCenters", func(t *testing.T) {
		c.SetUUID(c.VMs[0].Ref, w2.UUID)
		poll.True(t, "the duplicate seen", func() bool { return decide(w2, nil, w2.IPv4).Decision == Pending })
		expect(t, decide(w2, nil, w2.IPv4), Pending, "VMUnknown")
		c.SetUUID(c.VMs[0].Ref, c.VMs[0].UUID)
		poll.True(t, "the duplicate gone", func() bool { return decide(w2, nil, w2.IPv4).Decision == Approve })
	})
	t.Run("the guest puts the kubernetes ClusterIP first on its NIC", func(t *testing.T) {
		a.SetGuest(w3.Ref, w3.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{"10.96.0.1", "10.99.0.3"}, Connected: true, DeviceConfigId: 4000}})
		defer a.SetGuest(w3.Ref, w3.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{"10.99.0.3"}, Connected: true, DeviceConfigId: 4000}})
		poll.True(t, "the guest's word followed", func() bool {
			id, err := p.ServingIdentity(ctx, nodeOf(w3))
			return err == nil && slices.Contains(id.IPs, netip.MustParseAddr("10.96.0.1"))
		})
		expect(t, decide(w3, nil, "10.96.0.1"), Deny, "ServiceIP")
	})
	t.Run("the address of a VM outside the configured datacenters", func(t *testing.T) {
		d := f.VCenter("vc-d")
		// The VM in dc-out reports w1's address; the inventory never reads dc-out.
		d.SetGuest(outside.Ref, outside.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{w1.IPv4}, Connected: true, DeviceConfigId: 4000}})
		defer d.SetGuest(outside.Ref, outside.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{outside.IPv4}, Connected: true, DeviceConfigId: 4000}})
		v := decide(w1, nil, w1.IPv4)
		expect(t, v, Deny, "SharedIP")
		if !strings.Contains(v.Message, outside.Ref.Value) || !strings.Contains(v.Message, "vc-d") {
			t.Errorf("the owner is not named: %s", v.Message)
		}
	})
	t.Run("an ESXi host's VMkernel address", func(t *testing.T) {
		const vmk = "10.98.0.9"
		a.SetGuest(w3.Ref, w3.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{vmk}, Connected: true, DeviceConfigId: 4000}})
		defer a.SetGuest(w3.Ref, w3.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{"10.99.0.3"}, Connected: true, DeviceConfigId: 4000}})
		poll.True(t, "the guest's word followed", func() bool { return decide(w3, nil, vmk).Decision == Approve })
		a.AddHostAddress(w1.HostRef, vmk)
		v := decide(w3, nil, vmk)
		expect(t, v, Deny, "HostIP")
		if !strings.Contains(v.Message, w1.HostRef.Value) {
			t.Errorf("the host is not named: %s", v.Message)
		}
	})
	t.Run("a vCenter down, then back", func(t *testing.T) {
		must.OK(t, c.SetMode(vcsim.Down))
		poll.True(t, "vc-c down", func() bool { return decide(w1, nil, w1.IPv4).Decision == Pending })
		expect(t, decide(w1, nil, w1.IPv4), Pending, "VMUnknown")
		must.OK(t, c.SetMode(vcsim.Up))
		poll.True(t, "approved once vc-c is back", func() bool { return decide(w1, nil, w1.IPv4).Decision == Approve })
	})
}
