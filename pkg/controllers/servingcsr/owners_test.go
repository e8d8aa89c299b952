package servingcsr

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// startIndex is a ClusterIndex over objs, synced.
func startIndex(t *testing.T, opts ClusterOptions, objs ...runtime.Object) *ClusterIndex {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	kube := fake.NewClientset(objs...)
	inf := informers.NewSharedInformerFactory(kube, 0)
	c, err := NewClusterIndex(kube, inf.Core().V1().Nodes(), opts)
	must.OK(t, err)
	inf.Start(ctx.Done())
	c.Start(ctx)
	t.Cleanup(func() { cancel(); c.Shutdown(); inf.Shutdown() })
	poll.True(t, "the cluster's informers synced", c.HasSynced)
	return c
}

// TestClusterOwners: every class of address and name the cluster holds
// is found with its owner, the requesting Node's own are not.
func TestClusterOwners(t *testing.T) {
	node := func(name string, podCIDR string, labels map[string]string, addrs ...v1.NodeAddress) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:   v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-00000000000" + name[len(name)-1:], PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
			Status: v1.NodeStatus{Addresses: addrs}}
	}
	ip := func(s string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: s} }
	host := func(s string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeHostName, Address: s} }
	w1 := node("worker-1", "10.244.1.0/24", nil, ip("10.0.0.5"), host("worker-1"))
	w2 := node("worker-2", "10.244.2.0/24", nil, ip("10.0.0.6"), host("worker-2.example.com"))
	cp := node("cp-3", "10.244.3.0/24", map[string]string{ControlPlaneLabel: ""}, ip("10.0.0.3"))
	lb := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"},
			ExternalIPs: []string{"192.0.2.50"}, LoadBalancerIP: "192.0.2.60"},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.61"}, {Hostname: "web.lb.example.net"}}}}}
	kubernetes := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"}}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
		Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.3"}}, {Addresses: []string{"10.0.0.4"}}}}
	cidr := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "fd00:96::/112"}}}
	nsShop := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	c := startIndex(t, ClusterOptions{ServiceCIDRAPI: true, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.245.0.0/16")},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.97.0.0/16")}, ControlPlaneEndpoints: []string{"10.0.0.100", "api.example.com"}},
		w1, w2, cp, lb, kubernetes, slice, cidr, nsShop,
		// A kubelet may register its Node with any Pod range: one wider
		// than a Node's is not believed (it would deny every address).
		node("greedy-9", "0.0.0.0/0", nil))

	for _, tc := range []struct {
		ip     string
		node   *v1.Node
		reason string // "" when nothing holds it
	}{
		{"10.96.0.1", w1, "ServiceIP"},
		{"10.96.0.20", w1, "ServiceIP"},
		{"10.96.0.77", w1, "ServiceRange"}, // free: the next Service's
		{"fd00:96::9", w1, "ServiceRange"},
		{"10.97.3.3", w1, "ServiceRange"}, // configured
		{"192.0.2.50", w1, "ExternalIP"},
		{"192.0.2.60", w1, "LoadBalancerIP"},
		{"192.0.2.61", w1, "LoadBalancerIP"},
		{"10.0.0.4", w1, "APIServerIP"},
		{"10.0.0.3", w1, "APIServerIP"},   // a control-plane Node's, asked by a worker
		{"10.0.0.3", cp, ""},              // the control-plane Node's own
		{"10.0.0.100", cp, "APIServerIP"}, // a configured endpoint: never
		{"10.244.2.7", w1, "PodRange"},
		{"10.244.1.7", w1, "PodRange"}, // its own Pod range too
		{"10.245.9.9", w1, "PodRange"}, // configured
		{"10.0.0.6", w1, "OtherNodesIP"},
		{"10.0.0.5", w1, ""},
		{"10.0.0.9", w1, ""},
		{"198.51.100.1", w1, ""}, // in greedy-9's 0.0.0.0/0
	} {
		o, ok := c.IPOwner(netip.MustParseAddr(tc.ip), tc.node)
		if o.Reason != tc.reason || ok != (tc.reason != "") || (ok && o.What == "") {
			t.Errorf("IPOwner(%s, %s) = %+v, %v; want %q", tc.ip, tc.node.Name, o, ok, tc.reason)
		}
	}
	for _, tc := range []struct {
		name   string
		node   *v1.Node
		reason string
	}{
		{"kubernetes", w1, "ServiceName"},
		{"web", w1, "ServiceName"},
		{"web.shop", w1, "ClusterName"},
		{"worker-1.shop", w1, "ClusterName"}, // the Node's name under a namespace
		{"web.shop.svc", w1, "ClusterName"},
		{"10-244-2-7.shop.pod", w1, "ClusterName"},
		{"pod-0.web.shop", w1, "ClusterName"}, // a headless Service's Pod
		{"node1.svc.corp.example", w1, ""},    // svc inside a name: no cluster name
		{"anything.cluster.local", w1, "ClusterName"},
		{"api.example.com", w1, "APIServerName"},
		{"web.lb.example.net", w1, "LoadBalancerName"},
		{"worker-2", w1, "DNSNotNodes"},
		{"Worker-2.Example.com.", w1, "DNSNotNodes"}, // another Node's host name
		{"worker-1", w1, ""},
		{"worker-1.example.com", w1, ""},
		{"worker-1.nowhere", w1, ""}, // no such namespace
	} {
		o, ok := c.NameOwner(tc.name, tc.node)
		if o.Reason != tc.reason || ok != (tc.reason != "") {
			t.Errorf("NameOwner(%s, %s) = %+v, %v; want %q", tc.name, tc.node.Name, o, ok, tc.reason)
		}
	}
	if others := c.OthersOnVM(node("evil-1", "", nil)); len(others) != 1 || others[0] != "worker-1" {
		t.Errorf("OthersOnVM: %v", others)
	}
	// The other byte order of the same UUID.
	swapped := node("evil-2", "", nil)
	swapped.Spec.ProviderID = "vsphere://b2a11142-0000-0040-8000-000000000001"
	if others := c.OthersOnVM(swapped); len(others) != 1 || others[0] != "worker-1" {
		t.Errorf("OthersOnVM, byte-swapped: %v", others)
	}
}

// TestClaimsPend: what rests on another party's own word (another Node's
// status.addresses, a Service's externalIPs, load balancer addresses or
// name, which a kubelet or a namespace's users write) makes a request
// wait, never denies it; what the cluster itself allocates or the admin
// configures still denies. And a name under a label named like a
// namespace is the cluster's only where it resolves in a Pod.
func TestClaimsPend(t *testing.T) {
	w1 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-000000000001"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}}}}
	// Node evil claims worker-1's address and host name in its own status.
	evil := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "evil"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-000000000009"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeHostName, Address: "worker-1.corp.internal"}}}}
	// A namespace user's Service: named like the Node, claiming its address.
	squat := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Namespace: "team"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.30", ClusterIPs: []string{"10.96.0.30"}, ExternalIPs: []string{"10.0.0.6"}}}
	internal := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "internal"}}
	team := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	c := startIndex(t, ClusterOptions{ClusterDomain: "cluster.local", ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}, w1, evil, squat, internal, team)

	for _, tc := range []struct {
		ip, reason string
		claim      bool
	}{
		{"10.0.0.5", "OtherNodesIP", true},
		{"10.0.0.6", "ExternalIP", true},
		{"10.96.0.30", "ServiceIP", false},
	} {
		o, ok := c.IPOwner(netip.MustParseAddr(tc.ip), w1)
		if !ok || o.Reason != tc.reason || (o.Claim != "") != tc.claim {
			t.Errorf("IPOwner(%s) = %+v; want %s, claim %v", tc.ip, o, tc.reason, tc.claim)
		}
	}
	for _, tc := range []struct {
		name, reason string
		claim        bool
	}{
		{"worker-1", "ServiceName", true},               // a Service in namespace team
		{"evil", "DNSNotNodes", false},                  // another Node's name: unique
		{"web.team", "ClusterName", false},              // <svc>.<ns>: resolves in every Pod
		{"pod-0.worker-1.team", "ClusterName", true},    // under Service team/worker-1
		{"x.nosvc.team", "", false},                     // no such Service: resolves as itself
		{"worker-1.corp.internal", "DNSNotNodes", true}, // evil's host name claim, not the namespace
	} {
		o, ok := c.NameOwner(tc.name, w1)
		if ok != (tc.reason != "") || o.Reason != tc.reason || (o.Claim != "") != tc.claim {
			t.Errorf("NameOwner(%s) = %+v, %v; want %q, claim %v", tc.name, o, ok, tc.reason, tc.claim)
		}
	}
	// Without evil's claim, worker-1.corp.internal is no cluster name,
	// though a namespace is named internal.
	c2 := startIndex(t, ClusterOptions{ClusterDomain: "cluster.local"}, w1, internal)
	if o, ok := c2.NameOwner("worker-1.corp.internal", w1); ok {
		t.Errorf("worker-1.corp.internal held by %+v: a namespace named like its last label", o)
	}

	// Decided: the claims pend, with the claimant named; nothing is denied.
	ip := netip.MustParseAddr("10.0.0.5")
	facts := fakeFacts{vms: map[string]VM{"worker-1": vmOf("vc-a/vm-1", "worker-1", "worker-1", "10.0.0.5")},
		owners: map[netip.Addr][]string{ip: {"vc-a/vm-1"}}, holders: map[netip.Addr][]Holder{ip: {{ID: "vc-a/vm-1", What: "VM vm-1"}}}}
	req := Request{Node: "worker-1", DNSNames: []string{"worker-1"}, IPs: []netip.Addr{ip}}
	v := Decide(context.Background(), req, w1, facts, c, Bounds{})
	if v.Decision != Pending || v.Reason != "OtherNodesIP" || !strings.Contains(v.Message, "the word of Node evil's kubelet") {
		t.Errorf("a request claimed by others: %+v, want pending naming the claimant", v)
	}
	// A claim never hides a denial: another VM's address is denied.
	other := netip.MustParseAddr("10.0.0.6") // team/worker-1's externalIPs, and no address of worker-1's VM
	v = Decide(context.Background(), Request{Node: "worker-1", IPs: []netip.Addr{other}}, w1, facts, c, Bounds{})
	if v.Decision != Deny || v.Reason != "IPNotNodes" {
		t.Errorf("a claimed address that is not the VM's: %+v, want denied IPNotNodes", v)
	}
}

// TestServiceRangeUnknown: without the ServiceCIDR API (before Kubernetes
// 1.33) and without serviceCIDRs, a free address of the Service range
// cannot be told from a Node's: a request with an IP SAN waits, with the
// reason, instead of being approved.
func TestServiceRangeUnknown(t *testing.T) {
	w1 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-000000000001"}}
	c := startIndex(t, ClusterOptions{ClusterDomain: "cluster.local"}, w1)
	if c.ServiceRangeKnown() {
		t.Fatal("the Service range known without the API or the config")
	}
	v := Decide(context.Background(), Request{Node: "worker-1", IPs: []netip.Addr{netip.MustParseAddr("10.96.0.77")}}, w1, fakeFacts{}, c, Bounds{})
	if v.Decision != Pending || v.Reason != "ServiceRangeUnknown" {
		t.Errorf("%+v, want pending ServiceRangeUnknown", v)
	}
	v = Decide(context.Background(), Request{Node: "worker-1", DNSNames: []string{"worker-1"}}, w1, fakeFacts{}, c, Bounds{})
	if v.Reason == "ServiceRangeUnknown" {
		t.Errorf("a request without IP SANs waits for the Service range: %+v", v)
	}
}

// TestPodPoolCNIs: the CNIs whose Pod addresses come from pools of their
// own are told from the API server's discovery (an API server that serves
// Calico's IPPools and Cilium's nodes), so that their pools missing from
// podCIDRs is warned about at start.
func TestPodPoolCNIs(t *testing.T) {
	served := map[string]string{
		"/apis/crd.projectcalico.org/v1": `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"crd.projectcalico.org/v1","resources":[{"name":"ippools","namespaced":false,"kind":"IPPool","verbs":["list"]}]}`,
		"/apis/cilium.io/v2":             `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"cilium.io/v2","resources":[{"name":"ciliumnodes","namespaced":false,"kind":"CiliumNode","verbs":["list"]}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := served[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	must.OK(t, err)
	cnis, err := PodPoolCNIs(context.Background(), kube)
	must.OK(t, err)
	if !slices.Equal(cnis, []string{"Calico", "Cilium"}) {
		t.Errorf("CNIs %v, want [Calico Cilium]", cnis)
	}
	delete(served, "/apis/crd.projectcalico.org/v1")
	delete(served, "/apis/cilium.io/v2")
	if cnis, err := PodPoolCNIs(context.Background(), kube); err != nil || len(cnis) != 0 {
		t.Errorf("no pool API served: %v, %v", cnis, err)
	}
}
