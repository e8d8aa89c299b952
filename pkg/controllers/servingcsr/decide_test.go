package servingcsr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
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
			"worker-1": {ID: "vc-a/vm-1", Name: "vc-a/dc-1/worker-1", PoweredOn: true, HostName: "worker-1.example.com",
				Addresses: []netip.Addr{ip("10.0.0.5"), ip("fd00::5")}},
			"worker-off": {ID: "vc-a/vm-7", Name: "vc-a/dc-1/worker-off", Addresses: []netip.Addr{ip("10.0.0.7")}},
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
	}{
		{"the Node's own names and addresses", req([]string{"worker-1", "WORKER-1.example.com"}, "10.0.0.5", "fd00::5"), w1, facts, Approve, "Proven"},
		{"another Node's IP", req([]string{"worker-1"}, "10.0.0.6"), w1, facts, Deny, "IPNotNodes"},
		{"an IP no VM has", req([]string{"worker-1"}, "192.0.2.1"), w1, facts, Deny, "IPNotNodes"},
		{"a VIP two VMs report", req(nil, "10.0.0.100"), w1, fakeFacts{vms: map[string]VM{"worker-1": {ID: "vc-a/vm-1", PoweredOn: true, Addresses: []netip.Addr{ip("10.0.0.100")}}}, owners: facts.owners}, Deny, "SharedIP"},
		{"another Node's name", req([]string{"worker-2"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes"},
		{"the API server's name", req([]string{"kubernetes.default.svc"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes"},
		{"a name the Node's name prefixes (kubelet-csr-approver's check)", req([]string{"worker-1.attacker.example"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes"},
		{"another Node whose name the Node's prefixes", req([]string{"worker-10"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes"},
		{"a name under the host name", req([]string{"evil.worker-1.example.com"}, "10.0.0.5"), w1, facts, Deny, "DNSNotNodes"},
		{"a Node that does not exist", req([]string{"worker-1"}), nil, facts, Pending, "NodeNotFound"},
		{"a Node without providerID", req([]string{"worker-1"}), node("worker-1", ""), facts, Pending, "NodeNotInitialized"},
		{"a Node of another provider", req([]string{"worker-1"}), node("worker-1", "aws:///us-east-1a/i-1"), facts, Deny, "NotThisProvider"},
		{"a powered-off VM", Request{Node: "worker-off", IPs: []netip.Addr{ip("10.0.0.7")}}, node("worker-off", "vsphere://x"), facts, Pending, "VMPoweredOff"},
		{"no VM for the Node", Request{Node: "worker-9", DNSNames: []string{"worker-9"}}, node("worker-9", "vsphere://y"), facts, Deny, "NoVM"},
		{"a vCenter down", req([]string{"worker-1"}, "10.0.0.5"), w1, fakeFacts{vmErr: fmt.Errorf("vc-a: %w", ErrUnknown)}, Pending, "VMUnknown"},
		{"a VM found in two vCenters", req([]string{"worker-1"}), w1, fakeFacts{vmErr: fmt.Errorf("UUID in vc-a and vc-b: %w", ErrUnknown)}, Pending, "VMUnknown"},
		{"IP owners not known now", req(nil, "10.0.0.5"), w1, fakeFacts{vms: facts.vms, ipErr: fmt.Errorf("vc-b not synced: %w", ErrUnknown)}, Pending, "IPOwnersUnknown"},
		{"the old IP after the VM's IP changed", req(nil, "10.0.0.4"), w1, facts, Deny, "IPNotNodes"},
		{"an address moving: the VM's details have it, the index names another VM",
			req(nil, "10.0.0.8"), w1, fakeFacts{vms: map[string]VM{"worker-1": {ID: "vc-a/vm-1", PoweredOn: true, Addresses: []netip.Addr{ip("10.0.0.8")}}}, owners: facts.owners}, Pending, "IPOwnersUnknown"},
		{"an address the index has not seen yet",
			req(nil, "10.0.0.9"), w1, fakeFacts{vms: map[string]VM{"worker-1": {ID: "vc-a/vm-1", PoweredOn: true, Addresses: []netip.Addr{ip("10.0.0.9")}}}, owners: facts.owners}, Pending, "IPOwnersUnknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(context.Background(), tc.req, tc.node, tc.facts)
			if v.Decision != tc.decision || v.Reason != tc.reason || v.Message == "" {
				t.Fatalf("verdict %+v, want %s %s", v, tc.decision, tc.reason)
			}
		})
	}
}
