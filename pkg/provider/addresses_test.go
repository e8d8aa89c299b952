package provider_test

import (
	"encoding/base64"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
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

// The reference's guestId table, not substrings: the whole table is
// compared with the reference's by make parity.
func TestInstanceType(t *testing.T) {
	cases := []struct {
		guestID string
		mem     int32
		want    string
	}{
		{"ubuntu64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-ubuntu"},
		{"vmwarePhoton64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-photon"},
		{"rhel7_64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-rhel7"},
		{"rhel9_64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-unknown"},
		{"windows9Server64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-win10server"},
		{"debian12_64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-unknown"},
		{"darwin16_64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-darwin"},
		{"otherLinux64Guest", 1536, "vsphere-vm.cpu-4.mem-1gb.os-linux"},
		{"", 512, "vsphere-vm.cpu-4.mem-0gb.os-unknown"},
	}
	for _, tc := range cases {
		if got := provider.InstanceType(inventory.VM{GuestID: tc.guestID, NumCPU: 4, MemoryMB: tc.mem}); got != tc.want {
			t.Errorf("%q, %d MB: %s, want %s", tc.guestID, tc.mem, got, tc.want)
		}
	}
}
