package servingcsr

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		vcsim.Spec{Name: "vc-c", Hosts: 1, VMs: 1})
	must.OK(t, err)
	defer f.Close()
	text := f.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 3s\nnodes:\n  servingCertificates:\n    approve: true\n", nil)
	cfg, _, err := config.Parse("test.yaml", []byte(text), config.Options{})
	must.OK(t, err)
	p, err := provider.New(cfg, provider.Options{})
	must.OK(t, err)
	must.OK(t, p.Start(ctx, nil))
	defer p.Close()
	must.OK(t, p.WaitForSync(ctx))
	facts := ProviderFacts{Provider: p}

	a, b, c := f.VCenter("vc-a"), f.VCenter("vc-b"), f.VCenter("vc-c")
	nodeOf := func(vm vcsim.VM) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + vm.UUID}}
	}
	var cluster NodeList
	for _, vm := range f.VMs() {
		cluster = append(cluster, nodeOf(vm))
	}
	decide := func(vm vcsim.VM, dns []string, ips ...string) Verdict {
		req := Request{Node: vm.Name, DNSNames: dns}
		for _, s := range ips {
			req.IPs = append(req.IPs, netip.MustParseAddr(s))
		}
		return Decide(ctx, req, nodeOf(vm), facts, cluster)
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
	t.Run("a vCenter down, then back", func(t *testing.T) {
		must.OK(t, c.SetMode(vcsim.Down))
		poll.True(t, "vc-c down", func() bool { return decide(w1, nil, w1.IPv4).Decision == Pending })
		expect(t, decide(w1, nil, w1.IPv4), Pending, "VMUnknown")
		must.OK(t, c.SetMode(vcsim.Up))
		poll.True(t, "approved once vc-c is back", func() bool { return decide(w1, nil, w1.IPv4).Decision == Approve })
	})
}
