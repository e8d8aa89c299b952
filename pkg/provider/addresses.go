package provider

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/guestinfo"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// candidate is one address of a guest NIC, as reported.
type candidate struct {
	text    string // as VMware Tools reports it
	ip      net.IP
	network string
}

// Addresses computes a Node's addresses from its VM the way the reference
// CCM does (k8s.io/cloud-provider-vsphere, nodemanager.go DiscoverNode and
// discoverIPs), so that a cluster it initialized keeps its addresses; make
// parity proves it against the reference's own code:
//
//   - the Hostname (guest host name) comes first; a VM whose guest reports
//     no host name or no NIC yet cannot be answered for (the reference
//     fails the lookup and retries);
//   - NICs with deviceConfigId -1 (guest-only adapters such as docker0)
//     are skipped; loopback, link-local and unspecified addresses dropped;
//     the addresses guestinfo.metadata configures statically come first,
//     so a VIP held on the same NIC is never taken for the Node's address;
//   - with both internalVmNetworkName and externalVmNetworkName set, a VM
//     on neither network cannot be answered for;
//   - for each IP family in order: InternalIP is the first address (not in
//     excludeInternalNetworkSubnetCidr) in the first internal CIDR, in
//     config order, that holds one; else the first on internalVmNetworkName;
//     ExternalIP likewise; when neither is found, the first address serves
//     as both. A family with no address for either type fails the lookup.
//
// Address text is kept as the guest reports it.
func Addresses(vm inventory.VM, rules config.Nodes, families []config.IPFamily) ([]v1.NodeAddress, error) {
	if vm.GuestHostname == "" {
		return nil, fmt.Errorf("VM %s reports no guest host name yet (VMware Tools must be running): it will be retried", vm.Location())
	}
	if len(vm.NICs) == 0 {
		return nil, fmt.Errorf("VM %s reports no guest NIC yet (VMware Tools must be running): it will be retried", vm.Location())
	}
	out := []v1.NodeAddress{{Type: v1.NodeHostName, Address: vm.GuestHostname}}
	add := func(t v1.NodeAddressType, a string) {
		na := v1.NodeAddress{Type: t, Address: a}
		if !slices.Contains(out, na) {
			out = append(out, na)
		}
	}
	cands, networks := guestCandidates(vm)
	in, ex := rules.InternalVMNetworkName, rules.ExternalVMNetworkName
	if in != "" && ex != "" && !containsFold(networks, in) && !containsFold(networks, ex) {
		return nil, fmt.Errorf("VM %s has no NIC on network %q (nodes.internalVmNetworkName) or %q (nodes.externalVmNetworkName)", vm.Location(), in, ex)
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("VM %s reports no usable address on its NICs (VMware Tools must be running; loopback, link-local and guest-only adapters are skipped): it will be retried", vm.Location())
	}
	static, err := guestinfo.StaticOrder(vm.Metadata, vm.MetadataEncoding)
	if err != nil {
		return nil, fmt.Errorf("VM %s: %w", vm.Location(), err)
	}
	if static != nil {
		slices.SortStableFunc(cands, func(a, b candidate) int {
			ai, aok := static[a.text]
			bi, bok := static[b.text]
			switch {
			case aok && !bok, aok && bok && ai < bi:
				return -1
			case bok && !aok, aok && bok && bi < ai:
				return 1
			}
			return 0
		})
	}
	for _, fam := range families {
		var of []candidate
		for _, c := range cands {
			if (c.ip.To4() != nil) == (fam == config.IPv4) {
				of = append(of, c)
			}
		}
		inC := excluding(of, rules.ExcludeInternalSubnets)
		exC := excluding(of, rules.ExcludeExternalSubnets)
		var inIP, exIP *candidate
		if len(inC) > 0 || len(exC) > 0 {
			inIP, exIP = inSubnets(inC, rules.InternalSubnets), inSubnets(exC, rules.ExternalSubnets)
			if inIP == nil && in != "" {
				inIP = onNetwork(inC, in)
			}
			if exIP == nil && ex != "" {
				exIP = onNetwork(exC, ex)
			}
			if inIP == nil && exIP == nil { // no rule matched, or none: the first serves as both
				inIP, exIP = first(inC), first(exC)
			}
		}
		if inIP == nil && exIP == nil {
			return nil, fmt.Errorf("VM %s reports no usable %s address for InternalIP or ExternalIP (check nodes' CIDRs, exclusions and network names, and the vCenter's ipFamily): it will be retried", vm.Location(), fam)
		}
		if inIP != nil {
			add(v1.NodeInternalIP, inIP.text)
		}
		if exIP != nil {
			add(v1.NodeExternalIP, exIP.text)
		}
	}
	return out, nil
}

// guestCandidates are the usable addresses of vm's NICs, in NIC order, and
// the networks of those NICs, guest-only adapters (deviceConfigId -1)
// skipped.
func guestCandidates(vm inventory.VM) (cands []candidate, networks []string) {
	for _, nic := range vm.NICs {
		if nic.DeviceConfigID == -1 {
			continue
		}
		networks = append(networks, nic.Network)
		for _, text := range nic.IPs {
			if ip := net.ParseIP(text); usable(ip) {
				cands = append(cands, candidate{text, ip, nic.Network})
			}
		}
	}
	return cands, networks
}

// usable is false for what is only reachable inside the guest (and for text
// that is no address).
func usable(ip net.IP) bool {
	return ip != nil && !ip.IsUnspecified() && !ip.IsLinkLocalMulticast() && !ip.IsLinkLocalUnicast() && !ip.IsLoopback()
}

func excluding(cands []candidate, exclude []netip.Prefix) []candidate {
	var out []candidate
	for _, c := range cands {
		if !slices.ContainsFunc(exclude, func(p netip.Prefix) bool { return ipNet(p).Contains(c.ip) }) {
			out = append(out, c)
		}
	}
	return out
}

// inSubnets is the first candidate in the first subnet, in config order,
// that holds one.
func inSubnets(cands []candidate, subnets []netip.Prefix) *candidate {
	for _, p := range subnets {
		n := ipNet(p)
		for i := range cands {
			if n.Contains(cands[i].ip) {
				return &cands[i]
			}
		}
	}
	return nil
}

func onNetwork(cands []candidate, network string) *candidate {
	for i := range cands {
		if strings.EqualFold(cands[i].network, network) {
			return &cands[i]
		}
	}
	return nil
}

func first(cands []candidate) *candidate {
	if len(cands) == 0 {
		return nil
	}
	return &cands[0]
}

// ipNet is p as net.IPNet, whose Contains also matches an IPv4-mapped
// IPv6 address against an IPv4 subnet, as the reference's does.
func ipNet(p netip.Prefix) *net.IPNet {
	p = p.Masked()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(e string) bool { return strings.EqualFold(e, s) })
}
