package servingcsr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeFacts is a fixed inventory: VMs by Node name and IP owners.
type fakeFacts struct {
	vms    map[string]VM
	vmErr  error
	owners map[netip.Addr][]string
	ipErr  error
}

func (f fakeFacts) NodeVM(_ context.Context, node *v1.Node) (VM, error) {
	if f.vmErr != nil {
		return VM{}, f.vmErr
	}
	vm, ok := f.vms[node.Name]
	if !ok {
		return VM{}, errors.New("no VM has its UUID in any vCenter")
	}
	return vm, nil
}

func (f fakeFacts) IPOwners(_ context.Context, ip netip.Addr) ([]string, error) {
	return f.owners[ip], f.ipErr
}

// fakeCluster is a fixed set of Node names and of Nodes sharing a VM.
type fakeCluster struct {
	names  []string
	shared map[string][]string // Node -> the other Nodes on its VM
}

func (c fakeCluster) NodeExists(name string) bool    { return slices.Contains(c.names, name) }
func (c fakeCluster) OthersOnVM(n *v1.Node) []string { return c.shared[n.Name] }

// TestDecide: the adversarial cases known approvers let through, each
// denied or left pending, never approved.
func TestDecide(t *testing.T) {
	ip := netip.MustParseAddr
	node := func(name, providerID string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID}}
	}
	w1 := node("worker-1", "vsphere://4211a1b2-0000-4000-8000-000000000001")
	facts := fakeFacts{
		vms: map[string]VM{
			"worker-1": {ID: "vc-a/vm-1", VMName: "worker-1", Name: "vc-a/dc-1/worker-1", PoweredOn: true, HostName: "worker-1.example.com",
				Addresses: []netip.Addr{ip("10.0.0.5"), ip("fd00::5")}},
			"worker-off": {ID: "vc-a/vm-7", VMName: "worker-off", Name: "vc-a/dc-1/worker-off", Addresses: []netip.Addr{ip("10.0.0.7")}},
		},
		owners: map[netip.Addr][]string{ip("10.0.0.5"): {"vc-a/vm-1"}, ip("fd00::5"): {"vc-a/vm-1"},
			ip("10.0.0.100"): {"vc-a/vm-1", "vc-b/vm-3"}, ip("10.0.0.6"): {"vc-a/vm-2"}, ip("10.0.0.7"): {"vc-a/vm-7"},
			ip("10.0.0.8"): {"vc-b/vm-9"}},
	}
	req := func(dns []string, ips ...string) Request {
		r := Request{Node: "worker-1", DNSNames: dns}
		for _, s := range ips {
			r.IPs = append(r.IPs, ip(s))
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		req      Request
		node     *v1.Node
		facts    Facts
		decision Decision
		reason   string
		cluster  Cluster // default: the Nodes worker-1, worker-2, worker-off
	}{
		{"the Node's own names and addresses", req([]string{"worker-1", "WORKER-1.example.com"}, "10.0.0.5", "fd00::5"), w1, facts, Approve, "Proven", nil},
		{"another Node's IP", req([]string{"worker-1"}, "10.0.0.6"), w1, facts, Deny, "IPNotNodes", nil},
		{"an IP no VM has", req([]string{"worker-1"}, "192.0.2.1"), w1, facts, Deny, "IPNotNodes", nil},
		{"a VIP two VMs report", req(nil, "10.0.0.100"), w1, fakeFacts{vms: map[string]VM{"worker-1": {ID: "vc-a/vm-1", VMName: "worker-1", PoweredOn: true, Addresses: []netip.Addr{ip("10.0.0.100")}}}, owners: facts.owners}, Deny, "SharedIP", nil},
		{"another Node's name", req([]string{"worker-2"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes", nil},
		{"the API server's name", req([]string{"kubernetes.default.svc"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes", nil},
		{"a name the Node's name prefixes (kubelet-csr-approver's check)", req([]string{"worker-1.attacker.example"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes", nil},
		{"another Node whose name the Node's prefixes", req([]string{"worker-10"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes", nil},
		{"a name under the host name", req([]string{"evil.worker-1.example.com"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes", nil},
		{"a Node that does not exist", req([]string{"worker-1"}), nil, facts, Pending, "NodeNotFound", nil},
		{"a Node without providerID", req([]string{"worker-1"}), node("worker-1", ""), facts, Pending, "NodeNotInitialized", nil},
		{"a Node of another provider: left to its approver", req([]string{"worker-1"}), node("worker-1", "aws:///us-east-1a/i-1"), facts, Ignore, "NotThisProvider", nil},
		{"a vSphere providerID naming no UUID", req([]string{"worker-1"}), node("worker-1", "vsphere://not-a-uuid"), facts, Deny, "BadProviderID", nil},
		{"a Node registered with another Node's VM", req([]string{"worker-1"}, "10.0.0.5"), w1, facts, Pending, "VMOfTwoNodes",
			fakeCluster{names: []string{"worker-1", "evil"}, shared: map[string][]string{"worker-1": {"evil"}}}},
		{"a Node named after nothing of its VM (another VM's UUID)", Request{Node: "evil", DNSNames: []string{"evil"}, IPs: []netip.Addr{ip("10.0.0.5")}},
			node("evil", w1.Spec.ProviderID), fakeFacts{vms: map[string]VM{"evil": facts.vms["worker-1"]}, owners: facts.owners}, Deny, "NodeNameNotVMs", nil},
		{"a Node named after nothing, the guest's host name not reported yet", Request{Node: "evil", IPs: []netip.Addr{ip("10.0.0.5")}},
			node("evil", w1.Spec.ProviderID), fakeFacts{vms: map[string]VM{"evil": {ID: "vc-a/vm-1", VMName: "lb-1", PoweredOn: true}}, owners: facts.owners}, Pending, "VMNameUnknown", nil},
		{"the guest's host name set to another Node's name", req([]string{"worker-2"}, "10.0.0.5"), w1,
			fakeFacts{vms: map[string]VM{"worker-1": {ID: "vc-a/vm-1", VMName: "worker-1", PoweredOn: true, HostName: "worker-2", Addresses: []netip.Addr{ip("10.0.0.5")}}}, owners: facts.owners}, Deny, "DNSNotNodes", nil},
		{"the guest's host name set to a Service name", req([]string{"kubernetes.default.svc.cluster.local"}, "10.0.0.5"), w1,
			fakeFacts{vms: map[string]VM{"worker-1": {ID: "vc-a/vm-1", VMName: "worker-1", PoweredOn: true, HostName: "kubernetes.default.svc.cluster.local", Addresses: []netip.Addr{ip("10.0.0.5")}}}, owners: facts.owners}, Deny, "DNSNotNodes", nil},
		{"a Service name under the Node's", req([]string{"worker-1.default.svc"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes", nil},
		{"the guest's host name, another Node's FQDN name", req([]string{"worker-1.example.com"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes",
			fakeCluster{names: []string{"worker-1", "worker-1.example.com"}}},
		{"a Node named by the guest's host name, not the VM's name", Request{Node: "worker-1", DNSNames: []string{"worker-1"}, IPs: []netip.Addr{ip("10.0.0.5")}}, w1,
			fakeFacts{vms: map[string]VM{"worker-1": {ID: "vc-a/vm-1", VMName: "k8s-prod-worker-1 (rhel9)", HostName: "worker-1", PoweredOn: true, Addresses: []netip.Addr{ip("10.0.0.5")}}}, owners: facts.owners}, Approve, "Proven", nil},
		{"a powered-off VM", Request{Node: "worker-off", IPs: []netip.Addr{ip("10.0.0.7")}}, node("worker-off", "vsphere://4211a1b2-0000-4000-8000-000000000007"), facts, Pending, "VMPoweredOff", nil},
		{"no VM for the Node", Request{Node: "worker-9", DNSNames: []string{"worker-9"}}, node("worker-9", "vsphere://4211a1b2-0000-4000-8000-000000000009"), facts, Deny, "NoVM", nil},
		{"a vCenter down", req([]string{"worker-1"}, "10.0.0.5"), w1, fakeFacts{vmErr: fmt.Errorf("vc-a: %w", ErrUnknown)}, Pending, "VMUnknown", nil},
		{"a VM found in two vCenters", req([]string{"worker-1"}), w1, fakeFacts{vmErr: fmt.Errorf("UUID in vc-a and vc-b: %w", ErrUnknown)}, Pending, "VMUnknown", nil},
		{"IP owners not known now", req(nil, "10.0.0.5"), w1, fakeFacts{vms: facts.vms, ipErr: fmt.Errorf("vc-b not synced: %w", ErrUnknown)}, Pending, "IPOwnersUnknown", nil},
		{"the old IP after the VM's IP changed", req(nil, "10.0.0.4"), w1, facts, Deny, "IPNotNodes", nil},
		{"an address moving: the VM's details have it, the index names another VM",
			req(nil, "10.0.0.8"), w1, fakeFacts{vms: map[string]VM{"worker-1": {ID: "vc-a/vm-1", VMName: "worker-1", PoweredOn: true, Addresses: []netip.Addr{ip("10.0.0.8")}}}, owners: facts.owners}, Pending, "IPOwnersUnknown", nil},
		{"an address the index has not seen yet",
			req(nil, "10.0.0.9"), w1, fakeFacts{vms: map[string]VM{"worker-1": {ID: "vc-a/vm-1", VMName: "worker-1", PoweredOn: true, Addresses: []netip.Addr{ip("10.0.0.9")}}}, owners: facts.owners}, Pending, "IPOwnersUnknown", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := tc.cluster
			if cluster == nil {
				cluster = fakeCluster{names: []string{"worker-1", "worker-2", "worker-off"}}
			}
			v := Decide(context.Background(), tc.req, tc.node, tc.facts, cluster)
			if v.Decision != tc.decision || v.Reason != tc.reason || v.Message == "" {
				t.Fatalf("verdict %+v, want %s %s", v, tc.decision, tc.reason)
			}
		})
	}
}
