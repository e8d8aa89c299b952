// Package nodeaddresses is what k8s.io/cloud-provider's node controller
// (v0.37: updateNodeAddress, nodeAddressesChangeDetected) makes of the
// addresses a cloud provider gives a Node, reproduced for the parts of
// this CCM that must write or predict exactly what it writes: the
// node-topology controller, which writes a guest's new address before the
// framework's status pass, and migrate preflight, which tells what a
// switch would change.
package nodeaddresses

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	cloudnodeutil "k8s.io/cloud-provider/node/helpers"
)

// Framework is what the node controller writes as node's addresses when
// the provider gives cloud: the Node's own Hostname address added when
// the provider gives none, and the kubelet's --node-ip (the
// alpha.kubernetes.io/provided-node-ip annotation) applied by the
// framework's own helper. ok is false where the framework writes nothing:
// no address given; an error is a node IP the addresses do not hold (the
// framework logs it and writes nothing).
func Framework(node *v1.Node, cloud []v1.NodeAddress) (addrs []v1.NodeAddress, ok bool, err error) {
	if len(cloud) == 0 {
		return nil, false, nil
	}
	addrs = slices.Clone(cloud)
	if !slices.ContainsFunc(addrs, func(a v1.NodeAddress) bool { return a.Type == v1.NodeHostName }) {
		for _, a := range node.Status.Addresses {
			if a.Type == v1.NodeHostName {
				addrs = append(addrs, a)
			}
		}
	}
	if ip, has := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]; has {
		if addrs, err = cloudnodeutil.GetNodeAddressesFromNodeIP(ip, addrs); err != nil {
			return nil, false, err
		}
	}
	return addrs, true, nil
}

// ChangeDetected is the node controller's test of a change, after which
// it writes would: another length, or an address of would that is not the
// last address of its type in current. A mere reordering is no change;
// with two addresses of one type it always sees one.
func ChangeDetected(current, would []v1.NodeAddress) bool {
	if len(current) != len(would) {
		return true
	}
	last := map[v1.NodeAddressType]string{}
	for _, a := range current {
		last[a.Type] = a.Address
	}
	for _, a := range would {
		if last[a.Type] != a.Address {
			return true
		}
	}
	return false
}
