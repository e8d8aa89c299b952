package servingcsr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeFacts is a fixed inventory: VMs by Node name, IP owners (the
// index) and IP holders (vCenter's search).
type fakeFacts struct {
	vms     map[string]VM
	vmErr   error
	owners  map[netip.Addr][]string
	ipErr   error
	holders map[netip.Addr][]Holder
	holdErr error
	// searched counts IPHolders calls.
	searched *int
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

func (f fakeFacts) IPHolders(_ context.Context, ip netip.Addr, _ time.Time) ([]Holder, error) {
	if f.searched != nil {
		*f.searched++
	}
	return f.holders[ip], f.holdErr
}

// fakeCluster is a fixed set of Node names, Nodes sharing a VM, and
// owners of addresses and names.
type fakeCluster struct {
	names  []string
	shared map[string][]string // Node -> the other Nodes on its VM
	ips    map[netip.Addr]Owner
	dns    map[string]Owner
	// noRange: the Service range is unknown.
	noRange bool
}

func (c fakeCluster) ServiceRangeKnown() bool { return !c.noRange }

func (c fakeCluster) NodeExists(name string) bool    { return slices.Contains(c.names, name) }
func (c fakeCluster) OthersOnVM(n *v1.Node) []string { return c.shared[n.Name] }
func (c fakeCluster) IPOwner(ip netip.Addr, _ *v1.Node) (Owner, bool) {
	o, ok := c.ips[ip]
	return o, ok
}
func (c fakeCluster) NameOwner(name string, n *v1.Node) (Owner, bool) {
	if o, ok := c.dns[name]; ok {
		return o, true
	}
	if name != n.Name && slices.Contains(c.names, name) {
		return Owner{Reason: "DNSNotNodes", What: "the name of Node " + name}, true
	}
	return Owner{}, false
}

// vmOf is a powered-on VM whose guest reports host and ips.
func vmOf(id, name, host string, ips ...string) VM {
	vm := VM{ID: id, VMName: name, Name: "vc/dc/" + name, PoweredOn: true, Guest: GuestReport{HostName: host}}
	for _, s := range ips {
		vm.Guest.Addresses = append(vm.Guest.Addresses, netip.MustParseAddr(s))
	}
	return vm
}

// bound is vm bound to Node name by nodeNameKey k8s.node-name (alone).
func bound(vm VM, name string) VM {
	vm.NameKey, vm.BoundName = "k8s.node-name", name
	if name != "" {
		vm.BoundVMs = 1
	}
	return vm
}

// boundTwice is vm bound to Node name, and a clone of it too.
func boundTwice(vm VM, name string) VM {
	vm = bound(vm, name)
	vm.BoundVMs = 2
	return vm
}

// TestDecide: the adversarial cases known approvers let through, each
// denied or left pending, never approved.
func TestDecide(t *testing.T) {
	ip := netip.MustParseAddr
	node := func(name, providerID string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID}}
	}
	w1 := node("worker-1", "vsphere://4211a1b2-0000-4000-8000-000000000001")
	off := vmOf("vc-a/vm-7", "worker-off", "", "10.0.0.7")
	off.PoweredOn = false
	owners := map[netip.Addr][]string{ip("10.0.0.5"): {"vc-a/vm-1"}, ip("fd00::5"): {"vc-a/vm-1"},
		ip("10.0.0.100"): {"vc-a/vm-1", "vc-b/vm-3"}, ip("10.0.0.6"): {"vc-a/vm-2"}, ip("10.0.0.7"): {"vc-a/vm-7"},
		ip("10.0.0.8"): {"vc-b/vm-9"}, ip("10.96.0.1"): {"vc-a/vm-1"}}
	facts := fakeFacts{
		vms: map[string]VM{
			"worker-1":   vmOf("vc-a/vm-1", "worker-1", "worker-1.example.com", "10.0.0.5", "fd00::5"),
			"worker-off": off,
		},
		owners:  owners,
		holders: map[netip.Addr][]Holder{ip("10.0.0.5"): {{ID: "vc-a/vm-1", What: "VM vm-1"}}},
	}
	with := func(vm VM) fakeFacts { f := facts; f.vms = map[string]VM{"worker-1": vm}; return f }
	req := func(dns []string, ips ...string) Request {
		r := Request{Node: "worker-1", DNSNames: dns}
		for _, s := range ips {
			r.IPs = append(r.IPs, ip(s))
		}
		return r
	}
	// The cluster: Nodes, and what holds addresses and names.
	cluster := fakeCluster{names: []string{"worker-1", "worker-2", "worker-off"},
		ips: map[netip.Addr]Owner{ip("10.96.0.1"): {Reason: "ServiceIP", What: "the spec.clusterIPs of Service default/kubernetes"}},
		dns: map[string]Owner{"kubernetes.default.svc": {Reason: "ClusterName", What: "a Service name"}}}
	for _, tc := range []struct {
		name     string
		req      Request
		node     *v1.Node
		facts    Facts
		decision Decision
		reason   string
		cluster  Cluster // default: cluster above
		bounds   Bounds
	}{
		{name: "the Node's own names and addresses", req: req([]string{"worker-1", "WORKER-1.example.com"}, "10.0.0.5", "fd00::5"), node: w1, facts: facts, decision: Approve, reason: "Proven"},
		{name: "another Node's IP", req: req([]string{"worker-1"}, "10.0.0.6"), node: w1, facts: facts, decision: Deny, reason: "IPNotNodes"},
		{name: "an IP no VM has", req: req([]string{"worker-1"}, "192.0.2.1"), node: w1, facts: facts, decision: Deny, reason: "IPNotNodes"},
		{name: "a VIP two VMs report", req: req(nil, "10.0.0.100"), node: w1, facts: with(vmOf("vc-a/vm-1", "worker-1", "", "10.0.0.100")), decision: Deny, reason: "SharedIP"},
		{name: "another Node's name", req: req([]string{"worker-2"}, "10.0.0.5"), node: w1, facts: facts, decision: Deny, reason: "DNSNotNodes"},
		{name: "the API server's name", req: req([]string{"kubernetes.default.svc"}, "10.0.0.5"), node: w1, facts: facts, decision: Deny, reason: "ClusterName"},
		{name: "a name the Node's name prefixes (kubelet-csr-approver's check)", req: req([]string{"worker-1.attacker.example"}, "10.0.0.5"), node: w1, facts: facts, decision: Deny, reason: "DNSNotNodes"},
		{name: "another Node whose name the Node's prefixes", req: req([]string{"worker-10"}, "10.0.0.5"), node: w1, facts: facts, decision: Deny, reason: "DNSNotNodes"},
		{name: "a name under the host name", req: req([]string{"evil.worker-1.example.com"}, "10.0.0.5"), node: w1, facts: facts, decision: Deny, reason: "DNSNotNodes"},
		{name: "a Node that does not exist", req: req([]string{"worker-1"}), facts: facts, decision: Pending, reason: "NodeNotFound"},
		{name: "a Node without providerID", req: req([]string{"worker-1"}), node: node("worker-1", ""), facts: facts, decision: Pending, reason: "NodeNotInitialized"},
		{name: "a Node of another provider: left to its approver", req: req([]string{"worker-1"}), node: node("worker-1", "aws:///us-east-1a/i-1"), facts: facts, decision: Ignore, reason: "NotThisProvider"},
		{name: "a vSphere providerID naming no UUID", req: req([]string{"worker-1"}), node: node("worker-1", "vsphere://not-a-uuid"), facts: facts, decision: Deny, reason: "BadProviderID"},
		{name: "a Node registered with another Node's VM", req: req([]string{"worker-1"}, "10.0.0.5"), node: w1, facts: facts, decision: Pending, reason: "VMOfTwoNodes",
			cluster: fakeCluster{names: []string{"worker-1", "evil"}, shared: map[string][]string{"worker-1": {"evil"}}}},
		{name: "a Node named after nothing of its VM (another VM's UUID)", req: Request{Node: "evil", DNSNames: []string{"evil"}, IPs: []netip.Addr{ip("10.0.0.5")}},
			node: node("evil", w1.Spec.ProviderID), facts: fakeFacts{vms: map[string]VM{"evil": facts.vms["worker-1"]}, owners: owners}, decision: Deny, reason: "NodeNameNotVMs"},
		{name: "a Node named after nothing, the guest's host name not reported yet", req: Request{Node: "evil", IPs: []netip.Addr{ip("10.0.0.5")}},
			node: node("evil", w1.Spec.ProviderID), facts: fakeFacts{vms: map[string]VM{"evil": vmOf("vc-a/vm-1", "lb-1", "")}, owners: owners}, decision: Pending, reason: "VMNameUnknown"},
		{name: "the guest's host name set to another Node's name", req: req([]string{"worker-2"}, "10.0.0.5"), node: w1,
			facts: with(vmOf("vc-a/vm-1", "worker-1", "worker-2", "10.0.0.5")), decision: Deny, reason: "DNSNotNodes"},
		{name: "the guest's host name set to a Service name", req: req([]string{"kubernetes.default.svc"}, "10.0.0.5"), node: w1,
			facts: with(vmOf("vc-a/vm-1", "worker-1", "kubernetes.default.svc", "10.0.0.5")), decision: Deny, reason: "ClusterName"},
		{name: "a Node named by the guest's host name, not the VM's name", req: req([]string{"worker-1"}, "10.0.0.5"), node: w1,
			facts: with(vmOf("vc-a/vm-1", "k8s-prod-worker-1 (rhel9)", "worker-1", "10.0.0.5")), decision: Approve, reason: "Proven"},
		{name: "nodeNameKey: a Node named as its provisioner bound the VM (--hostname-override, the VM named otherwise)", req: req([]string{"worker-1"}, "10.0.0.5"), node: w1,
			facts: with(bound(vmOf("vc-a/vm-1", "k8s-prod-7", "localhost", "10.0.0.5"), "worker-1")), decision: Approve, reason: "Proven"},
		{name: "nodeNameKey: a Node named like its VM and guest, the VM bound to another Node name", req: req([]string{"worker-1"}, "10.0.0.5"), node: w1,
			facts: with(bound(vmOf("vc-a/vm-1", "worker-1", "worker-1", "10.0.0.5"), "worker-7")), decision: Deny, reason: "NodeNameNotBound"},
		{name: "nodeNameKey: a VM its provisioner did not bind, named like the Node (a kubelet's own --provider-id)", req: req([]string{"worker-1"}, "10.0.0.5"), node: w1,
			facts: with(bound(vmOf("vc-a/vm-1", "worker-1", "worker-1", "10.0.0.5"), "")), decision: Pending, reason: "VMHasNoNodeName"},
		{name: "nodeNameKey: the Node's name bound to two VMs (a clone)", req: req([]string{"worker-1"}, "10.0.0.5"), node: w1,
			facts: with(boundTwice(vmOf("vc-a/vm-1", "k8s-prod-7", "", "10.0.0.5"), "worker-1")), decision: Deny, reason: "SeveralVMsNamedNode"},
		{name: "a powered-off VM", req: Request{Node: "worker-off", IPs: []netip.Addr{ip("10.0.0.7")}}, node: node("worker-off", "vsphere://4211a1b2-0000-4000-8000-000000000007"), facts: facts, decision: Pending, reason: "VMPoweredOff"},
		{name: "no VM for the Node", req: Request{Node: "worker-9", DNSNames: []string{"worker-9"}}, node: node("worker-9", "vsphere://4211a1b2-0000-4000-8000-000000000009"), facts: facts, decision: Deny, reason: "NoVM"},
		{name: "a vCenter down", req: req([]string{"worker-1"}, "10.0.0.5"), node: w1, facts: fakeFacts{vmErr: fmt.Errorf("vc-a: %w", ErrUnknown)}, decision: Pending, reason: "VMUnknown"},
		{name: "a VM found in two vCenters", req: req([]string{"worker-1"}), node: w1, facts: fakeFacts{vmErr: fmt.Errorf("UUID in vc-a and vc-b: %w", ErrUnknown)}, decision: Pending, reason: "VMUnknown"},
		{name: "IP owners not known now", req: req(nil, "10.0.0.5"), node: w1, facts: fakeFacts{vms: facts.vms, ipErr: fmt.Errorf("vc-b not synced: %w", ErrUnknown)}, decision: Pending, reason: "IPOwnersUnknown"},
		{name: "the old IP after the VM's IP changed", req: req(nil, "10.0.0.4"), node: w1, facts: facts, decision: Deny, reason: "IPNotNodes"},
		{name: "an address moving: the VM's details have it, the index names another VM",
			req: req(nil, "10.0.0.8"), node: w1, facts: with(vmOf("vc-a/vm-1", "worker-1", "", "10.0.0.8")), decision: Pending, reason: "IPOwnersUnknown"},
		{name: "an address the index has not seen yet",
			req: req(nil, "10.0.0.9"), node: w1, facts: with(vmOf("vc-a/vm-1", "worker-1", "", "10.0.0.9")), decision: Pending, reason: "IPOwnersUnknown"},

		// The guest's word against the cluster's and vCenter's.
		{name: "the kubernetes Service's ClusterIP on the guest's NIC", req: req([]string{"worker-1"}, "10.96.0.1"), node: w1,
			facts: with(vmOf("vc-a/vm-1", "worker-1", "worker-1", "10.96.0.1")), decision: Deny, reason: "ServiceIP"},
		{name: "the address of a VM outside the configured datacenters", req: req(nil, "10.0.0.5"), node: w1,
			facts: func() fakeFacts {
				f := facts
				f.holders = map[netip.Addr][]Holder{ip("10.0.0.5"): {{ID: "vc-a/vm-1"}, {ID: "vc-a/vm-99", What: "VM vm-99 in vCenter \"vc-a\""}}}
				return f
			}(), decision: Deny, reason: "SharedIP"},
		{name: "an ESXi host's VMkernel address", req: req(nil, "10.0.0.5"), node: w1,
			facts: func() fakeFacts {
				f := facts
				f.holders = map[netip.Addr][]Holder{ip("10.0.0.5"): {{ID: "vc-a/host-21", Host: true, What: "ESXi host host-21"}}}
				return f
			}(), decision: Deny, reason: "HostIP"},
		{name: "vCenter's search not answered", req: req(nil, "10.0.0.5"), node: w1,
			facts: func() fakeFacts { f := facts; f.holdErr = fmt.Errorf("vc-b down: %w", ErrUnknown); return f }(), decision: Pending, reason: "IPOwnersUnknown"},
		{name: "an address outside the allowed ranges", req: req(nil, "10.0.0.5"), node: w1, facts: facts,
			bounds: Bounds{IPRanges: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}, decision: Deny, reason: "IPOutsideAllowedRanges"},
		{name: "an address inside the allowed ranges", req: req(nil, "10.0.0.5"), node: w1, facts: facts,
			bounds: Bounds{IPRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}}, decision: Approve, reason: "Proven"},
		{name: "a guest host name outside the allowed domains", req: req([]string{"worker-1.example.com"}, "10.0.0.5"), node: w1, facts: facts,
			bounds: Bounds{DNSDomains: []string{"corp.example"}}, decision: Deny, reason: "DNSOutsideAllowedDomains"},
		{name: "a guest host name inside the allowed domains", req: req([]string{"worker-1.example.com"}, "10.0.0.5"), node: w1, facts: facts,
			bounds: Bounds{DNSDomains: []string{"example.com"}}, decision: Approve, reason: "Proven"},
		{name: "the Node's name whatever the allowed domains", req: req([]string{"worker-1"}, "10.0.0.5"), node: w1, facts: facts,
			bounds: Bounds{DNSDomains: []string{"corp.example"}}, decision: Approve, reason: "Proven"},
		// A denial the cluster decides needs no vCenter.
		{name: "the ClusterIP while vCenter cannot tell", req: req(nil, "10.96.0.1"), node: w1, facts: fakeFacts{vmErr: fmt.Errorf("vc-a: %w", ErrUnknown)}, decision: Deny, reason: "ServiceIP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cluster
			if c == nil {
				c = cluster
			}
			v := Decide(context.Background(), tc.req, tc.node, tc.facts, c, tc.bounds)
			if v.Decision != tc.decision || v.Reason != tc.reason || v.Message == "" {
				t.Fatalf("verdict %+v, want %s %s", v, tc.decision, tc.reason)
			}
		})
	}
}

// TestDecideSearchesLast: vCenter is searched (a request per vCenter)
// only for a request every other check approves.
func TestDecideSearchesLast(t *testing.T) {
	ip := netip.MustParseAddr
	n := 0
	facts := fakeFacts{vms: map[string]VM{"worker-1": vmOf("vc-a/vm-1", "worker-1", "worker-1", "10.0.0.5")},
		owners: map[netip.Addr][]string{ip("10.0.0.5"): {"vc-a/vm-1"}}, searched: &n}
	w1 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-000000000001"}}
	cluster := fakeCluster{names: []string{"worker-1"}}
	for _, r := range []Request{
		{Node: "worker-1", IPs: []netip.Addr{ip("10.0.0.6")}},                             // not the VM's
		{Node: "worker-1", DNSNames: []string{"evil"}, IPs: []netip.Addr{ip("10.0.0.5")}}, // a name not the Node's
	} {
		if v := Decide(context.Background(), r, w1, facts, cluster, Bounds{}); v.Decision != Deny {
			t.Fatalf("%+v: %+v", r, v)
		}
	}
	if n != 0 {
		t.Errorf("vCenter searched %d times for requests denied without it", n)
	}
	if v := Decide(context.Background(), Request{Node: "worker-1", IPs: []netip.Addr{ip("10.0.0.5")}}, w1, facts, cluster, Bounds{}); v.Decision != Approve || n != 1 {
		t.Errorf("verdict %+v after %d searches, want approved after 1", v, n)
	}
}
