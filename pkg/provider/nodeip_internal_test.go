package provider

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	cloudnodeutil "k8s.io/cloud-provider/node/helpers"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// TestWithNodeIPs: the kubelet's node IP is added as InternalIP where the
// rules chose another address, only where the VM's guest reports it and
// the rules allow it as internal; the framework's own filter then keeps
// it as the Node's InternalIP. Without the annotation, or with the node
// IP chosen already, the addresses are the rules' (the reference's).
func TestWithNodeIPs(t *testing.T) {
	vm := inventory.VM{Name: "worker-1", GuestHostname: "worker-1", NICs: []inventory.NIC{
		{Network: "VM Network", DeviceConfigID: 4000, IPs: []string{"10.0.0.100", "10.0.0.5", "fe80::1", "fd00::5"}},
		{Network: "storage", DeviceConfigID: 4001, IPs: []string{"192.168.7.5"}},
		{Network: "", DeviceConfigID: -1, IPs: []string{"172.17.0.1"}},
	}}
	pfx := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	v4, dual := []config.IPFamily{config.IPv4}, []config.IPFamily{config.IPv4, config.IPv6}
	both := func(ip string) []v1.NodeAddress {
		return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeExternalIP, Address: ip}}
	}
	internal := func(ip string) []v1.NodeAddress { return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}} }
	cases := []struct {
		name     string
		host     string // the guest host name, if not the VM's
		nodeIP   string // the annotation; "" none
		rules    config.Nodes
		fams     []config.IPFamily
		added    []v1.NodeAddress // added to the rules' addresses
		final    []string         // InternalIPs the framework keeps (nil: not checked)
		errorHas string
	}{
		{name: "no annotation", fams: v4},
		{name: "the rules' choice", nodeIP: "10.0.0.100", fams: v4, final: []string{"10.0.0.100"}},
		// No rule: the first address serves as both, so does the node IP
		// (the reference's answer with it first).
		{name: "after a VIP", nodeIP: "10.0.0.5", fams: v4, added: both("10.0.0.5"), final: []string{"10.0.0.5"}},
		{name: "on a second NIC", nodeIP: "192.168.7.5", fams: v4, added: both("192.168.7.5"), final: []string{"192.168.7.5"}},
		{name: "dual-stack pair", nodeIP: "10.0.0.5,fd00::5", fams: dual, added: both("10.0.0.5"), final: []string{"10.0.0.5", "fd00::5"}},
		{name: "the guest host name is the node IP", host: "10.0.0.5", nodeIP: "10.0.0.5", fams: v4},
		{name: "IPv6 in another spelling", nodeIP: "fd00:0::5", fams: []config.IPFamily{config.IPv6}, final: []string{"fd00::5"}},
		{name: "unspecified", nodeIP: "0.0.0.0", fams: v4},
		{name: "does not parse: left to the framework", nodeIP: "10.0.0", fams: v4},
		{name: "not on the VM", nodeIP: "10.0.0.9", fams: v4,
			errorHas: "10.0.0.9 (--node-ip, annotation alpha.kubernetes.io/provided-node-ip) is not an address VMware Tools reports on the VM's NICs (it reports 10.0.0.100, 10.0.0.5, fd00::5, 192.168.7.5)"},
		{name: "on a guest-only adapter", nodeIP: "172.17.0.1", fams: v4, errorHas: "is not an address VMware Tools reports"},
		{name: "link-local", nodeIP: "fe80::1", fams: dual, errorHas: "is not an address VMware Tools reports"},
		{name: "family not reported", nodeIP: "fd00::5", fams: v4, errorHas: "is ipv6, which the vCenter's ipFamily (ipv4) does not include"},
		{name: "excluded", nodeIP: "192.168.7.5", fams: v4, rules: config.Nodes{ExcludeInternalSubnets: pfx("192.168.0.0/16")},
			errorHas: "is not the InternalIP the address rules choose even with it first (they choose 10.0.0.100: see nodes.excludeInternalNetworkSubnetCidr"},
		{name: "excluded as external only", nodeIP: "192.168.7.5", fams: v4, rules: config.Nodes{ExcludeExternalSubnets: pfx("192.168.0.0/16")},
			added: internal("192.168.7.5"), final: []string{"192.168.7.5"}},
		{name: "outside the internal subnets", nodeIP: "192.168.7.5", fams: v4, rules: config.Nodes{InternalSubnets: pfx("10.0.0.0/24")},
			errorHas: "they choose 10.0.0.100"},
		{name: "in the internal subnets after a VIP", nodeIP: "10.0.0.5", fams: v4, rules: config.Nodes{InternalSubnets: pfx("10.0.0.0/24")},
			added: internal("10.0.0.5"), final: []string{"10.0.0.5"}},
		{name: "no address in the internal subnets: the first serves as both", nodeIP: "10.0.0.5", fams: v4, rules: config.Nodes{InternalSubnets: pfx("172.16.0.0/12")},
			added: both("10.0.0.5"), final: []string{"10.0.0.5"}},
		{name: "not on the internal network", nodeIP: "192.168.7.5", fams: v4, rules: config.Nodes{InternalVMNetworkName: "VM Network"},
			errorHas: "they choose 10.0.0.100"},
		{name: "on the internal network, in another case", nodeIP: "10.0.0.5", fams: v4, rules: config.Nodes{InternalVMNetworkName: "vm network"},
			added: internal("10.0.0.5"), final: []string{"10.0.0.5"}},
		{name: "only an external rule matches", nodeIP: "10.0.0.5", fams: v4, rules: config.Nodes{ExternalSubnets: pfx("192.168.0.0/16")},
			errorHas: "they choose none"},
		{name: "an external rule chose another", nodeIP: "10.0.0.5", fams: v4, rules: config.Nodes{InternalSubnets: pfx("10.0.0.0/24"), ExternalSubnets: pfx("192.168.0.0/16")},
			added: internal("10.0.0.5"), final: []string{"10.0.0.5"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
			if tc.nodeIP != "" {
				n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: tc.nodeIP}
			}
			vm := vm
			if tc.host != "" {
				vm.GuestHostname = tc.host
			}
			rules, err := Addresses(vm, tc.rules, tc.fams)
			if err != nil {
				t.Fatal(err)
			}
			got, err := withNodeIPs(n, vm, rules, tc.rules, tc.fams)
			if tc.errorHas != "" {
				var ne *NodeIPError
				if !errors.As(err, &ne) || !strings.Contains(err.Error(), tc.errorHas) || reason(err, false) != ReasonNodeIPNotOnVM {
					t.Fatalf("got %v, %v; want a NodeIPError with %q", got, err, tc.errorHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := append(slices.Clone(rules), tc.added...)
			if !slices.Equal(got, want) {
				t.Fatalf("addresses\n got %v\nwant %v", got, want)
			}
			if len(tc.added) == 0 && len(got) > 0 && &got[0] != &rules[0] {
				t.Error("nothing added, yet the rules' addresses were copied")
			}
			if tc.final == nil {
				return
			}
			// What the framework's node controller makes of them.
			final, err := cloudnodeutil.GetNodeAddressesFromNodeIP(tc.nodeIP, got)
			if err != nil {
				t.Fatalf("the framework refuses them: %v", err)
			}
			var internal []string
			for _, a := range final {
				if a.Type == v1.NodeInternalIP {
					internal = append(internal, a.Address)
				}
			}
			if !slices.Equal(internal, tc.final) {
				t.Errorf("InternalIPs on the Node %v, want %v (all: %v)", internal, tc.final, final)
			}
		})
	}
}
