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
// Node's addresses by the rules (Addresses), as InternalIP when addrs does
// not hold them already: a VM with a floating address (a control plane's
// VIP) or a second NIC before the node IP then initializes, where the
// reference CCM gives only its first choice and the framework fails the
// Node ("failed to get node address from cloud provider that matches ip").
// The framework then keeps the node IP as the Node's only InternalIP.
//
// A node IP is the kubelet's word: it is added only where the VM's guest
// reports it on a NIC (not a guest-only adapter), in a family the
// vCenter's ipFamily reports, and where the rules allow it as an internal
// address: not in excludeInternalNetworkSubnetCidr, and in an
// internalNetworkSubnetCidr (or on internalVmNetworkName) when those are
// set. Otherwise it is a NodeIPError. Without the annotation, or where
// addrs holds each node IP (every case where the reference succeeds),
// addrs is returned as it is. An annotation that does not parse is left
// to the framework, which reports it.
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
		if ip.IsUnspecified() || slices.ContainsFunc(addrs, func(a v1.NodeAddress) bool {
			return (a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP) && ip.Equal(net.ParseIP(a.Address))
		}) {
			continue
		}
		text, why := nodeIPAllowed(ip, vm, rules, families)
		if why != "" {
			return nil, &NodeIPError{Node: node.Name, IP: ip.String(), VM: vm.Location(), Reason: why}
		}
		out = append(slices.Clip(out), v1.NodeAddress{Type: v1.NodeInternalIP, Address: text})
	}
	return out, nil
}

// nodeIPAllowed returns the VM's address ip as its guest reports it, or
// why it cannot be an InternalIP of the VM's Node.
func nodeIPAllowed(ip net.IP, vm inventory.VM, rules config.Nodes, families []config.IPFamily) (text, why string) {
	fam := config.IPv6
	if ip.To4() != nil {
		fam = config.IPv4
	}
	var reported []string
	var found *candidate
	for _, nic := range vm.NICs {
		if nic.DeviceConfigID == -1 {
			continue
		}
		for _, t := range nic.IPs {
			c := candidate{t, net.ParseIP(t), nic.Network}
			if !usable(c.ip) {
				continue
			}
			reported = append(reported, t)
			if found == nil && c.ip.Equal(ip) {
				found = &c
			}
		}
	}
	switch {
	case found == nil:
		return "", fmt.Sprintf("is not an address VMware Tools reports on the VM's NICs (it reports %s)", orNone(reported))
	case !slices.Contains(families, fam):
		return "", fmt.Sprintf("is %s, which the vCenter's ipFamily (%s) does not include", fam, joinFamilies(families))
	case len(excluding([]candidate{*found}, rules.ExcludeInternalSubnets)) == 0:
		return "", "is in nodes.excludeInternalNetworkSubnetCidr"
	case len(rules.InternalSubnets) > 0:
		if inSubnets([]candidate{*found}, rules.InternalSubnets) == nil {
			return "", "is in no nodes.internalNetworkSubnetCidr"
		}
	case rules.InternalVMNetworkName != "":
		if !strings.EqualFold(found.network, rules.InternalVMNetworkName) {
			return "", fmt.Sprintf("is on network %q, not on nodes.internalVmNetworkName %q", found.network, rules.InternalVMNetworkName)
		}
	}
	return found.text, ""
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
