package provider

import (
	"fmt"
	"net"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodeutil "k8s.io/component-helpers/node/util"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// NodeIPError: the kubelet's node IP (--node-ip, which it writes to the
// Node's alpha.kubernetes.io/provided-node-ip annotation) is not an
// address the CCM can give the Node. The framework's node controller
// requires the node IP among the addresses it is given, and would fail
// the Node anyway, with less to go on.
type NodeIPError struct {
	Node   string
	IP     string
	VM     string // its location
	Reason string // why the IP cannot be given
}

func (e *NodeIPError) Error() string {
	return fmt.Sprintf("node %s: the kubelet's node IP %s (--node-ip, annotation %s) %s (VM %s): set the kubelet's --node-ip to an address of the VM, or change the nodes' address rules",
		e.Node, e.IP, cloudproviderapi.AnnotationAlphaProvidedIPAddr, e.Reason, e.VM)
}

// withNodeIPs adds the kubelet's node IPs (see NodeIPError) to addrs, the
// Node's addresses by the rules (Addresses), when addrs does not hold them
// already: a VM with a floating address (a control plane's VIP) or a
// second NIC before the node IP then initializes, where the reference CCM
// gives only its first choice and the framework fails the Node ("failed
// to get node address from cloud provider that matches ip"). A node IP is
// added with the types the rules give it when the guest reports it first
// (InternalIP; ExternalIP too where no rule matched and the first address
// serves as both): the Node then gets what the reference gives it when
// the node IP comes first, as the framework keeps the node IP as the
// Node's only address of each type it is given as.
//
// A node IP is the kubelet's word: it is added only where the VM's guest
// reports it on a NIC (not a guest-only adapter), in a family of the
// vCenter's ipFamily, and where the rules, with it first, choose it as the
// InternalIP (not excluded; in internalNetworkSubnetCidr or on
// internalVmNetworkName when an address is; not a family for which only
// an external rule matches). Otherwise it is a NodeIPError. Without the
// annotation, or where addrs holds each node IP as any type (as the
// framework matches it; every case where the reference succeeds), addrs
// is returned as it is. An annotation that does not parse is left to the
// framework, which reports it.
func withNodeIPs(node *v1.Node, vm inventory.VM, addrs []v1.NodeAddress, rules config.Nodes, families []config.IPFamily) ([]v1.NodeAddress, error) {
	value := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]
	if value == "" {
		return addrs, nil
	}
	ips, err := nodeutil.ParseNodeIPAnnotation(value)
	if err != nil {
		return addrs, nil
	}
	out := addrs
	for _, ip := range ips {
		if ip.IsUnspecified() || slices.ContainsFunc(addrs, func(a v1.NodeAddress) bool { return ip.Equal(net.ParseIP(a.Address)) }) {
			continue
		}
		text, external, why := nodeIPAllowed(ip, vm, rules, families)
		if why != "" {
			return nil, &NodeIPError{Node: node.Name, IP: ip.String(), VM: vm.Location(), Reason: why}
		}
		out = append(slices.Clip(out), v1.NodeAddress{Type: v1.NodeInternalIP, Address: text})
		if external {
			out = append(out, v1.NodeAddress{Type: v1.NodeExternalIP, Address: text})
		}
	}
	return out, nil
}

// nodeIPAllowed returns the VM's address ip as its guest reports it, and
// whether it is the ExternalIP too (see withNodeIPs), or why it cannot be
// an InternalIP of the VM's Node. The rules decide as if the guest
// reported ip first: what the reference gives when the node IP comes
// first is what the Node gets.
func nodeIPAllowed(ip net.IP, vm inventory.VM, rules config.Nodes, families []config.IPFamily) (text string, external bool, why string) {
	fam := config.IPv6
	if ip.To4() != nil {
		fam = config.IPv4
	}
	cands, _ := guestCandidates(vm)
	var reported []string
	var found *inventory.NIC // ip's NIC, with ip alone as the guest writes it
	for _, c := range cands {
		reported = append(reported, c.text)
		if found == nil && c.ip.Equal(ip) {
			found = &inventory.NIC{Network: c.network, IPs: []string{c.text}}
		}
	}
	switch {
	case found == nil:
		return "", false, fmt.Sprintf("is not an address VMware Tools reports on the VM's NICs (it reports %s)", orNone(reported))
	case !slices.Contains(families, fam):
		return "", false, fmt.Sprintf("is %s, which the vCenter's ipFamily (%s) does not include", fam, joinFamilies(families))
	}
	first := vm
	first.Metadata, first.MetadataEncoding = "", "" // no static address before it
	first.NICs = append([]inventory.NIC{*found}, vm.NICs...)
	addrs, err := Addresses(first, rules, []config.IPFamily{fam})
	if err != nil {
		return "", false, fmt.Sprintf("cannot be an address of the Node: %v", err)
	}
	text = found.IPs[0]
	if internal := ofType(addrs, v1.NodeInternalIP); !slices.Contains(internal, text) {
		return "", false, fmt.Sprintf("is not the InternalIP the address rules choose even with it first (they choose %s: see nodes.excludeInternalNetworkSubnetCidr, internalNetworkSubnetCidr and internalVmNetworkName)",
			orNone(internal))
	}
	return text, slices.Contains(ofType(addrs, v1.NodeExternalIP), text), ""
}

// ofType lists the addresses of type t.
func ofType(addrs []v1.NodeAddress, t v1.NodeAddressType) []string {
	var out []string
	for _, a := range addrs {
		if a.Type == t {
			out = append(out, a.Address)
		}
	}
	return out
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

func joinFamilies(fams []config.IPFamily) string {
	s := make([]string, len(fams))
	for i, f := range fams {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}
