package provider_test

import (
	"encoding/base64"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vmware/govmomi/vim25/types"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// The reference's own answers for these layouts and many more are checked
// by make parity (test/parity); these cases pin the rules one by one.
func TestAddresses(t *testing.T) {
	pfx := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	nics := []inventory.NIC{
		{Network: "mgmt", DeviceConfigID: 4000, IPs: []string{"10.0.0.100", "10.0.0.5", "fd00::5", "fe80::1"}},
		{Network: "public", DeviceConfigID: 4001, IPs: []string{"192.0.2.7", "2001:DB8:0:0::7"}},
		{Network: "docker", DeviceConfigID: -1, IPs: []string{"172.17.0.1"}},
	}
	static := base64.StdEncoding.EncodeToString([]byte("network:\n  version: 2\n  ethernets:\n    id0:\n      addresses:\n      - 10.0.0.5/24\n"))
	a := func(t v1.NodeAddressType, s string) v1.NodeAddress { return v1.NodeAddress{Type: t, Address: s} }
	in, ex, host := v1.NodeInternalIP, v1.NodeExternalIP, v1.NodeHostName
	v4, v6 := []config.IPFamily{config.IPv4}, []config.IPFamily{config.IPv6}
	cases := []struct {
		name     string
		metadata string
		rules    config.Nodes
		fams     []config.IPFamily
		want     []v1.NodeAddress
	}{
		{"no rules: Hostname first, the first address as both", "", config.Nodes{}, v4,
			[]v1.NodeAddress{a(host, "guest"), a(in, "10.0.0.100"), a(ex, "10.0.0.100")}},
		{"static address before the VIP", static, config.Nodes{}, v4,
			[]v1.NodeAddress{a(host, "guest"), a(in, "10.0.0.5"), a(ex, "10.0.0.5")}},
		{"VIP excluded from both", "", config.Nodes{ExcludeInternalSubnets: pfx("10.0.0.100/32"), ExcludeExternalSubnets: pfx("10.0.0.100/32")}, v4,
			[]v1.NodeAddress{a(host, "guest"), a(in, "10.0.0.5"), a(ex, "10.0.0.5")}},
		{"subnets", "", config.Nodes{InternalSubnets: pfx("10.0.0.0/8"), ExternalSubnets: pfx("192.0.2.0/24"), ExcludeInternalSubnets: pfx("10.0.0.100/32")}, v4,
			[]v1.NodeAddress{a(host, "guest"), a(in, "10.0.0.5"), a(ex, "192.0.2.7")}},
		{"the first CIDR in config order wins, not the first NIC", "", config.Nodes{InternalSubnets: pfx("192.0.2.0/24", "10.0.0.0/8")}, v4,
			[]v1.NodeAddress{a(host, "guest"), a(in, "192.0.2.7")}},
		{"network names", "", config.Nodes{InternalVMNetworkName: "MGMT", ExternalVMNetworkName: "public"}, v4,
			[]v1.NodeAddress{a(host, "guest"), a(in, "10.0.0.100"), a(ex, "192.0.2.7")}},
		{"internal rule only: no external guess", "", config.Nodes{InternalSubnets: pfx("192.0.2.0/24")}, v4,
			[]v1.NodeAddress{a(host, "guest"), a(in, "192.0.2.7")}},
		{"dual-stack, ipv6 first", "", config.Nodes{}, []config.IPFamily{config.IPv6, config.IPv4},
			[]v1.NodeAddress{a(host, "guest"), a(in, "fd00::5"), a(ex, "fd00::5"), a(in, "10.0.0.100"), a(ex, "10.0.0.100")}},
		{"ipv6 skips link-local, text as reported", "", config.Nodes{ExternalSubnets: pfx("2001:db8::/32"), InternalSubnets: pfx("fd00::/8")}, v6,
			[]v1.NodeAddress{a(host, "guest"), a(in, "fd00::5"), a(ex, "2001:DB8:0:0::7")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := inventory.VM{Name: "vm", GuestHostname: "guest", NICs: nics, Metadata: tc.metadata}
			if tc.metadata != "" {
				vm.MetadataEncoding = "base64"
			}
			got, err := provider.Addresses(vm, tc.rules, tc.fams)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v, %v\nwant %v", got, err, tc.want)
			}
		})
	}
	fails := []struct {
		name  string
		vm    inventory.VM
		rules config.Nodes
		fams  []config.IPFamily
		want  string
	}{
		{"only a guest-only NIC", inventory.VM{GuestHostname: "g", NICs: nics[2:]}, config.Nodes{}, v4, "no usable address"},
		{"no guest host name", inventory.VM{NICs: nics}, config.Nodes{}, v4, "no guest host name"},
		{"no NIC", inventory.VM{GuestHostname: "g"}, config.Nodes{}, v4, "no guest NIC"},
		{"a family without an address", inventory.VM{GuestHostname: "g", NICs: []inventory.NIC{{IPs: []string{"192.0.2.7"}}}}, config.Nodes{}, []config.IPFamily{config.IPv4, config.IPv6}, "no usable ipv6 address"},
		{"on neither named network", inventory.VM{GuestHostname: "g", NICs: nics}, config.Nodes{InternalVMNetworkName: "a", ExternalVMNetworkName: "b"}, v4, "no NIC on network"},
		{"unreadable metadata", inventory.VM{GuestHostname: "g", NICs: nics, Metadata: "%%", MetadataEncoding: "base64"}, config.Nodes{}, v4, "guestinfo.metadata"},
	}
	for _, tc := range fails {
		t.Run(tc.name, func(t *testing.T) {
			got, err := provider.Addresses(tc.vm, tc.rules, tc.fams)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, %v; want an error with %q", got, err, tc.want)
			}
		})
	}
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
