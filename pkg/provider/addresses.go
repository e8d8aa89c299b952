package provider

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

type candidate struct {
	ip      netip.Addr
	network string
}

// Addresses picks a node's addresses from the VM's guest NICs, for each IP
// family in order:
//
//   - NICs with deviceConfigId -1 (guest-only adapters) are skipped, and so
//     are loopback, link-local and unspecified addresses;
//   - InternalIP is the first address in internalNetworkSubnetCidr, else the
//     first on the NIC named internalVmNetworkName, never one in
//     excludeInternalNetworkSubnetCidr; ExternalIP likewise;
//   - a type without rules, or whose rules match nothing, gets no address,
//     unless neither type found one: then the first address not excluded is
//     used for both, so a single-NIC VM gets its address as InternalIP and
//     ExternalIP, as with the reference CCM.
//
// The Hostname address (guest host name, else the node name) comes last.
func Addresses(vm inventory.VM, nodeName string, rules config.Nodes, families []config.IPFamily) ([]v1.NodeAddress, error) {
	var out []v1.NodeAddress
	add := func(t v1.NodeAddressType, a string) {
		na := v1.NodeAddress{Type: t, Address: a}
		if !slices.Contains(out, na) {
			out = append(out, na)
		}
	}
	for _, fam := range families {
		var cands []candidate
		for _, nic := range vm.NICs {
			if nic.DeviceConfigID == -1 {
				continue
			}
			for _, ip := range nic.IPs {
				if usable(ip) && (ip.Is4() == (fam == config.IPv4)) {
					cands = append(cands, candidate{ip, nic.Network})
				}
			}
		}
		if len(cands) == 0 {
			continue
		}
		in, inOK := pick(cands, rules.InternalSubnets, rules.InternalVMNetworkName, rules.ExcludeInternalSubnets, false)
		ex, exOK := pick(cands, rules.ExternalSubnets, rules.ExternalVMNetworkName, rules.ExcludeExternalSubnets, false)
		if !inOK && !exOK { // no rule matched, or none configured: the first address serves as both
			in, inOK = pick(cands, nil, "", rules.ExcludeInternalSubnets, true)
			ex, exOK = pick(cands, nil, "", rules.ExcludeExternalSubnets, true)
		}
		if inOK {
			add(v1.NodeInternalIP, in.String())
		}
		if exOK {
			add(v1.NodeExternalIP, ex.String())
		}
	}
	if len(out) == 0 {
		fams := make([]string, len(families))
		for i, f := range families {
			fams[i] = string(f)
		}
		return nil, fmt.Errorf("VM %s reports no usable %s address on its NICs (VMware Tools must be running; excluded subnets and guest-only adapters are skipped): it will be retried",
			vm.Location(), strings.Join(fams, "/"))
	}
	host := vm.GuestHostname
	if host == "" {
		host = nodeName
	}
	add(v1.NodeHostName, host)
	return out, nil
}

func usable(ip netip.Addr) bool {
	return ip.IsValid() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsLinkLocalMulticast() &&
		!ip.IsUnspecified() && !ip.IsMulticast()
}

// pick returns the first candidate not excluded that is in subnets, else
// the first on network; with first set, simply the first not excluded.
func pick(cands []candidate, subnets []netip.Prefix, network string, exclude []netip.Prefix, first bool) (netip.Addr, bool) {
	var ok []candidate
	for _, c := range cands {
		if !within(c.ip, exclude) {
			ok = append(ok, c)
		}
	}
	if len(subnets) > 0 {
		for _, c := range ok {
			if within(c.ip, subnets) {
				return c.ip, true
			}
		}
	}
	if network != "" {
		for _, c := range ok {
			if strings.EqualFold(c.network, network) {
				return c.ip, true
			}
		}
	}
	if first && len(ok) > 0 {
		return ok[0].ip, true
	}
	return netip.Addr{}, false
}

func within(ip netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// osFamilies maps fragments of a vSphere guestId to the short OS name of
// the instance type, checked in order.
var osFamilies = []struct{ fragment, name string }{
	{"photon", "photon"}, {"ubuntu", "ubuntu"}, {"centos", "centos"}, {"rhel", "rhel"},
	{"rocky", "rocky"}, {"alma", "almalinux"}, {"oraclelinux", "oraclelinux"}, {"sles", "sles"},
	{"debian", "debian"}, {"coreos", "coreos"}, {"fedora", "fedora"}, {"freebsd", "freebsd"},
	{"win", "windows"}, {"linux", "linux"},
}

// InstanceType is vsphere-vm.cpu-<n>.mem-<gb>gb.os-<short os>, the
// reference CCM's format.
func InstanceType(vm inventory.VM) string {
	os := "unknown"
	g := strings.ToLower(vm.GuestID)
	for _, f := range osFamilies {
		if strings.Contains(g, f.fragment) {
			os = f.name
			break
		}
	}
	return fmt.Sprintf("vsphere-vm.cpu-%d.mem-%dgb.os-%s", vm.NumCPU, vm.MemoryMB/1024, os)
}
