//go:build e2e

package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// claimsFleet: vc-c has a second datacenter, dc-out, that the config
// leaves out: its VMs are outside the inventory, still in the vCenter.
var claimsFleet = []vcsim.Spec{
	{Name: "vc-a", Datacenters: []string{"dc-1"}, Hosts: 1, VMs: 4},
	{Name: "vc-b", Datacenters: []string{"dc-2"}, Hosts: 1, VMs: 3},
	{Name: "vc-c", Datacenters: []string{"dc-3", "dc-out"}, Hosts: 1, VMs: 2},
}

// TestServingCertificatesGuestClaims: root in a Node's VM puts an address
// first on its NIC (VMware Tools reports it, the CCM publishes it as the
// Node's), or sets its host name; the Node's serving request for it is
// denied with the owner named, for every class of address and name the
// cluster or vSphere says is someone else's; and a truthful request of an
// untouched Node is approved by the CCM and signed by the real
// kube-controller-manager in the same run.
func TestServingCertificatesGuestClaims(t *testing.T) {
	t.Parallel()
	h := setupFleet(t, claimsFleet...)
	h.configTail = `nodes:
  servingCertificates:
    approve: true
    allowedIPRanges: [10.0.0.0/8, "fd00::/16"]
    allowedDNSDomains: [nodes.example]
    podCIDRs: [10.244.0.0/16]
    controlPlaneEndpoints: [10.20.0.100, api.cluster.example]
`
	h.writeConfig(map[string][]string{"vc-c": {"datacenters: [dc-3]"}})
	h.applyServingRBAC(t)
	h.startSigner(t)
	// The Node's addresses follow its guest at every status pass: the
	// sync point of each claim.
	h.startCCM("--node-status-update-frequency=1s")
	var vms []vcsim.VM
	var outside vcsim.VM
	for i, vm := range h.fleet.VMs() {
		if vm.Datacenter == "dc-out" {
			outside = vm
			continue
		}
		h.register(t, vm, i%2 == 1)
		vms = append(vms, vm)
	}
	h.waitInitialized(t, vms...)

	// What the cluster holds: a LoadBalancer Service with an external IP,
	// a second API server endpoint (this control plane runs without the
	// endpoint reconciler: the test writes what it would), a neighbour's
	// Pod range.
	svc, err := h.kube.CoreV1().Services("default").Create(h.ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalIPs: []string{"10.30.0.5"},
			Ports: []v1.ServicePort{{Port: 443}}}}, metav1.CreateOptions{})
	must.OK(t, err)
	free := "10.96.0.200" // in the Service range, not allocated
	if svc.Spec.ClusterIP == free {
		free = "10.96.0.201"
	}
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.30.0.9"}}
	_, err = h.kube.CoreV1().Services("default").UpdateStatus(h.ctx, svc, metav1.UpdateOptions{})
	must.OK(t, err)
	_, err = h.kube.DiscoveryV1().EndpointSlices("default").Create(h.ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.20.0.1"}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(6443))}}}, metav1.CreateOptions{})
	must.OK(t, err)
	a := h.fleet.VCenter("vc-a")
	attacker, podNeighbour, offNeighbour, truthful := a.VMs[0], a.VMs[1], a.VMs[2], h.fleet.VCenter("vc-b").VMs[0]
	_, err = h.kube.CoreV1().Nodes().Patch(h.ctx, podNeighbour.Name, k8stypes.MergePatchType,
		[]byte(`{"spec":{"podCIDR":"10.250.7.0/24","podCIDRs":["10.250.7.0/24"]}}`), metav1.PatchOptions{})
	must.OK(t, err)
	h.powerOff(t, offNeighbour)

	// claim has the attacker's guest put ip first on its NIC, waits for
	// the CCM to publish it as the Node's, and asks for it.
	nics := func(ips ...string) []types.GuestNicInfo {
		return []types.GuestNicInfo{{Network: "VM Network", IpAddress: ips, Connected: true, DeviceConfigId: 4000}}
	}
	claim := func(t *testing.T, ip string) string {
		t.Helper()
		a.SetGuest(attacker.Ref, attacker.Name, nics(ip, attacker.IPv4, attacker.IPv6))
		t.Cleanup(func() { a.SetGuest(attacker.Ref, attacker.Name, nics(attacker.IPv4, attacker.IPv6)) })
		h.waitAddress(t, attacker.Name, ip)
		return h.request(t, servingRequest{node: attacker.Name, dns: []string{attacker.Name}, ips: []string{ip}})
	}
	deniedFor := func(t *testing.T, name, reason, owner string) {
		t.Helper()
		cond := h.decided(t, name)
		if cond.Type != certificatesv1.CertificateDenied || cond.Reason != reason || !strings.Contains(cond.Message, owner) {
			t.Errorf("%s: %s %s (%s); want denied %s naming %q", name, cond.Type, cond.Reason, cond.Message, reason, owner)
		}
		h.waitCSREvent(t, name, "ServingCertificateDenied", reason)
		h.notApproved(t, name)
	}
	// What rests on another party's own word (a Service's external and
	// load balancer addresses, which its namespace's users or a load
	// balancer controller write; another Node's status.addresses, which
	// its kubelet writes) makes the request wait, naming the claimant:
	// never approved, and never denied for good.
	claimedBy := func(t *testing.T, name, reason, owner string) {
		t.Helper()
		ev := h.waitCSREvent(t, name, "ServingCertificatePending", reason+": ")
		if !strings.Contains(ev.Message, owner) || !strings.Contains(ev.Message, "the word of") {
			t.Errorf("%s: pending %q; want it to name %q and whose word it is", name, ev.Message, owner)
		}
		h.notApproved(t, name)
	}
	for _, tc := range []struct {
		name, ip, reason, owner string
		claim                   bool
	}{
		{"the kubernetes Service's ClusterIP", "10.96.0.1", "ServiceIP", "Service default/kubernetes", false},
		{"a free address of the Service range", free, "ServiceRange", "ServiceCIDR kubernetes", false},
		{"a LoadBalancer Service's ingress IP", "10.30.0.9", "LoadBalancerIP", "Service default/web", true},
		{"a Service's external IP", "10.30.0.5", "ExternalIP", "Service default/web", true},
		{"an API server endpoint", "10.20.0.1", "APIServerIP", "EndpointSlice default/kubernetes", false},
		{"the configured control-plane endpoint", "10.20.0.100", "APIServerIP", "controlPlaneEndpoints", false},
		{"a neighbour's Pod range", "10.250.7.9", "PodRange", "Node " + podNeighbour.Name, false},
		{"the cluster's Pod range", "10.244.3.3", "PodRange", "10.244.0.0/16", false},
		// Node status claims it (which alone would make the request wait),
		// and vCenter still reports it on the neighbour's VM: denied.
		{"the address of a neighbour whose VM is off", offNeighbour.IPv4, "SharedIP", offNeighbour.Ref.Value, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.claim {
				claimedBy(t, claim(t, tc.ip), tc.reason, tc.owner)
				return
			}
			deniedFor(t, claim(t, tc.ip), tc.reason, tc.owner)
		})
	}

	t.Run("the address of a VM outside the configured datacenters", func(t *testing.T) {
		const ip = "10.40.0.7"
		c := h.fleet.VCenter("vc-c")
		c.SetGuest(outside.Ref, outside.Name, nics(ip))
		defer c.SetGuest(outside.Ref, outside.Name, nics(outside.IPv4, outside.IPv6))
		// Only the snapshot of what the inventory does not hold sees it: the inventory never reads dc-out.
		deniedFor(t, claim(t, ip), "SharedIP", "VM "+outside.Ref.Value+" in vCenter \"vc-c\" (in a datacenter out of the config's scope)")
	})
	t.Run("an ESXi host's VMkernel address", func(t *testing.T) {
		const ip = "10.40.0.8"
		a.AddHostAddress(attacker.HostRef, ip)
		deniedFor(t, claim(t, ip), "HostIP", attacker.HostRef.Value)
	})
	t.Run("an address outside the allowed ranges", func(t *testing.T) {
		deniedFor(t, claim(t, "198.51.100.7"), "IPOutsideAllowedRanges", "allowedIPRanges")
	})

	names := func(dns string) servingRequest {
		return servingRequest{node: attacker.Name, dns: []string{attacker.Name, dns}, ips: []string{attacker.IPv4}}
	}
	for _, tc := range []struct {
		name, dns, reason, owner string
	}{
		// A Service's name is its namespace's users' claim (alone, the
		// request would wait); the name is not the Node's: denied.
		{"a Service's name", "web", "DNSNotNodes", "\"web\""},
		{"the Node's name under a namespace", attacker.Name + ".default", "ClusterName", "namespace default"},
		{"the API server's configured name", "api.cluster.example", "APIServerName", "controlPlaneEndpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) { deniedFor(t, h.request(t, names(tc.dns)), tc.reason, tc.owner) })
	}
	t.Run("a guest host name outside the allowed domains", func(t *testing.T) {
		const moved = "10.77.0.41" // changed with the host name: the sync point
		host := attacker.Name + ".elsewhere.example"
		a.SetGuest(attacker.Ref, host, nics(moved))
		defer a.SetGuest(attacker.Ref, attacker.Name, nics(attacker.IPv4, attacker.IPv6))
		n := h.waitAddress(t, attacker.Name, moved)
		if slices.Contains(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: host}) {
			t.Errorf("published a host name outside allowedDNSDomains: %v", n.Status.Addresses)
		}
		deniedFor(t, h.request(t, servingRequest{node: attacker.Name, dns: []string{host}, ips: []string{moved}}), "DNSOutsideAllowedDomains", "allowedDNSDomains")
	})

	t.Run("a truthful Node whose guest host name has another first label", func(t *testing.T) {
		// Named like its VM; its guest calls itself web01: the CCM must
		// not publish a Hostname the approver then denies.
		vm := h.fleet.VCenter("vc-b").VMs[1]
		const moved = "10.77.0.51"
		b := h.fleet.VCenter("vc-b")
		b.SetGuest(vm.Ref, "web01.nodes.example", nics(moved))
		defer b.SetGuest(vm.Ref, vm.Name, nics(vm.IPv4, vm.IPv6))
		n := h.waitAddress(t, vm.Name, moved)
		if slices.Contains(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: "web01.nodes.example"}) {
			t.Errorf("published a host name the approver denies: %v", n.Status.Addresses)
		}
		r := h.ownRequest(t, vm)
		h.approvedWithSANs(t, h.request(t, r), r)
	})

	t.Run("an untouched Node, in the same run", func(t *testing.T) {
		r := h.ownRequest(t, truthful)
		h.approvedWithSANs(t, h.request(t, r), r)
	})
	t.Run("the non-RSA usage set", func(t *testing.T) {
		r := h.ownRequest(t, h.fleet.VCenter("vc-b").VMs[2])
		r.usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
		h.approvedWithSANs(t, h.request(t, r), r)
	})
}

func ptr[T any](v T) *T { return &v }
