package servingcsr

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// IPOwner implements Cluster. In order: a Service's address (ClusterIP,
// external IP, load balancer IP), a Service range, the API server's
// addresses, a Pod range, another Node's address. Index lookups only:
// the cost does not grow with the number of Nodes or Services (a Pod
// range is looked up once per prefix length).
func (c *ClusterIndex) IPOwner(ip netip.Addr, node *v1.Node) (Owner, bool) {
	ip = ip.Unmap().WithZone("")
	if o, ok := c.serviceIPOwner(ip); ok {
		return o, true
	}
	for _, p := range c.opts.ServiceCIDRs {
		if p.Contains(ip) {
			return Owner{Reason: "ServiceRange", What: fmt.Sprintf("in the Service range %s (nodes.servingCertificates.serviceCIDRs): a free address there is the next Service's", p)}, true
		}
	}
	{
		for _, o := range c.serviceCIDRs() {
			sc := o.(*networkingv1.ServiceCIDR)
			for _, s := range sc.Spec.CIDRs {
				if p, err := netip.ParsePrefix(s); err == nil && p.Contains(ip) {
					return Owner{Reason: "ServiceRange", What: fmt.Sprintf("in the Service range %s (ServiceCIDR %s): a free address there is the next Service's", p, sc.Name)}, true
				}
			}
		}
	}
	if o, ok := c.apiServerIPOwner(ip, node); ok {
		return o, true
	}
	for _, p := range c.opts.PodCIDRs {
		if p.Contains(ip) {
			return Owner{Reason: "PodRange", What: fmt.Sprintf("in the cluster's Pod range %s (nodes.servingCertificates.podCIDRs)", p)}, true
		}
	}
	for bits := minNodePodBits(ip); bits <= ip.BitLen(); bits++ {
		p, err := ip.Prefix(bits)
		if err != nil {
			continue
		}
		if objs, _ := c.nodes.ByIndex(byPodCIDR, p.String()); len(objs) > 0 {
			return Owner{Reason: "PodRange", What: fmt.Sprintf("in the Pod range %s of Node %s", p, objs[0].(*v1.Node).Name)}, true
		}
	}
	objs, _ := c.nodes.ByIndex(byIP, ip.String())
	for _, o := range objs {
		if n := o.(*v1.Node); node == nil || n.Name != node.Name {
			return Owner{Reason: "OtherNodesIP", What: fmt.Sprintf("an address of Node %s (its status.addresses; kept until that Node is deleted, whether its VM is on, off or gone)", n.Name),
				Claim: "Node " + n.Name + "'s kubelet, which writes its status.addresses"}, true
		}
	}
	return Owner{}, false
}

func (c *ClusterIndex) serviceIPOwner(ip netip.Addr) (Owner, bool) {
	objs, _ := c.services.ByIndex(byIP, ip.String())
	var found []Owner
	for _, o := range objs {
		s := o.(*v1.Service)
		for _, a := range serviceAddresses(s) {
			if a.ip == ip {
				o := Owner{Reason: a.reason, What: fmt.Sprintf("the %s of Service %s/%s", a.field, s.Namespace, s.Name)}
				if a.reason != "ServiceIP" { // a ClusterIP is allocated by the API server from its range
					o.Claim = "the users of namespace " + s.Namespace + " or a load balancer controller, who write " + a.field
				}
				found = append(found, o)
				break
			}
		}
	}
	if len(found) == 0 {
		return Owner{}, false
	}
	slices.SortFunc(found, func(a, b Owner) int { return strings.Compare(a.What, b.What) })
	return found[0], true
}

// apiServerIPOwner: an address of the API server. Its EndpointSlices'
// addresses are a control-plane Node's own (kube-apiserver on the host
// network): approved only for a Node with the control-plane label (the
// cluster's word, which a kubelet cannot set on itself), and only when
// the CCM records that address for it; configured endpoints never.
func (c *ClusterIndex) apiServerIPOwner(ip netip.Addr, node *v1.Node) (Owner, bool) {
	for _, e := range c.opts.ControlPlaneEndpoints {
		if a, err := netip.ParseAddr(e); err == nil && a.Unmap() == ip {
			return Owner{Reason: "APIServerIP", What: "the API server's endpoint " + e + " (nodes.servingCertificates.controlPlaneEndpoints)"}, true
		}
	}
	for _, o := range c.slices.List() {
		es := o.(*discoveryv1.EndpointSlice)
		for _, ep := range es.Endpoints {
			for _, text := range ep.Addresses {
				if a, err := netip.ParseAddr(text); err != nil || a.Unmap() != ip {
					continue
				}
				if isControlPlane(node) && hasAddress(node, ip) {
					continue // a control-plane Node's own address
				}
				return Owner{Reason: "APIServerIP", What: fmt.Sprintf("an address of the API server (EndpointSlice %s/%s), a control-plane Node's (labelled %s) at most", es.Namespace, es.Name, ControlPlaneLabel)}, true
			}
		}
	}
	return Owner{}, false
}

func isControlPlane(n *v1.Node) bool {
	if n == nil {
		return false
	}
	_, ok := n.Labels[ControlPlaneLabel]
	return ok
}

func hasAddress(n *v1.Node, ip netip.Addr) bool {
	return slices.ContainsFunc(n.Status.Addresses, func(a v1.NodeAddress) bool {
		p, err := netip.ParseAddr(a.Address)
		return err == nil && p.Unmap() == ip
	})
}

// NameOwner implements Cluster. In order: a name in the cluster domain
// or with a label svc, the API server's configured names, a name under
// an existing namespace (<name>.<namespace> resolves in every Pod), a
// Service's name (a bare name resolves in the Service's namespace) or
// load balancer host name, another Node's name or host name.
func (c *ClusterIndex) NameOwner(name string, node *v1.Node) (Owner, bool) {
	n := dnsKey(name)
	labels := strings.Split(n, ".")
	switch {
	case n == c.opts.ClusterDomain || strings.HasSuffix(n, "."+c.opts.ClusterDomain):
		return Owner{Reason: "ClusterName", What: "a name in the cluster domain " + c.opts.ClusterDomain}, true
	case len(labels) > 1 && (labels[len(labels)-1] == "svc" || labels[len(labels)-1] == "pod"):
		// <svc>.<ns>.svc and <ip>.<ns>.pod resolve under cluster.local
		// (every Pod's search path).
		return Owner{Reason: "ClusterName", What: "a Service or Pod name (ending in ." + labels[len(labels)-1] + ")"}, true
	case slices.Contains(c.opts.ControlPlaneEndpoints, n):
		return Owner{Reason: "APIServerName", What: "the API server's name (nodes.servingCertificates.controlPlaneEndpoints)"}, true
	}
	// In every Pod, <svc>.<ns> and <host>.<svc>.<ns> resolve through the
	// search path svc.<cluster domain>: a name of two labels under an
	// existing namespace, or of three under a Service of that namespace.
	// Any other name under a label named like a namespace
	// (worker-1.corp.internal, with a namespace internal) resolves as
	// itself.
	switch {
	case len(labels) == 2:
		if _, ok, _ := c.namespaces.GetByKey(labels[1]); ok {
			return Owner{Reason: "ClusterName", What: fmt.Sprintf("a name under namespace %s (in every Pod, %s resolves as %s.svc.%s)", labels[1], n, n, c.opts.ClusterDomain)}, true
		}
	case len(labels) == 3:
		if objs, _ := c.services.ByIndex(byName, labels[1]); slices.ContainsFunc(objs, func(o any) bool { return o.(*v1.Service).Namespace == labels[2] }) {
			return Owner{Reason: "ClusterName", What: fmt.Sprintf("a name under Service %s/%s (in every Pod, %s resolves as %s.svc.%s)", labels[2], labels[1], n, n, c.opts.ClusterDomain),
				Claim: "the users of namespace " + labels[2] + ", who create its Services"}, true
		}
	}
	if objs, _ := c.services.ByIndex(byName, n); len(objs) > 0 {
		s := objs[0].(*v1.Service)
		claim := "the users of namespace " + s.Namespace + ", who create its Services"
		if len(labels) == 1 && s.Name == n {
			return Owner{Reason: "ServiceName", What: fmt.Sprintf("the name of Service %s/%s (it resolves in the Pods of its namespace)", s.Namespace, s.Name), Claim: claim}, true
		}
		return Owner{Reason: "LoadBalancerName", What: fmt.Sprintf("a load balancer host name of Service %s/%s", s.Namespace, s.Name), Claim: claim + " and their load balancer controller"}, true
	}
	objs, _ := c.nodes.ByIndex(byName, n)
	for _, o := range objs {
		other := o.(*v1.Node)
		switch {
		case node != nil && other.Name == node.Name:
		case other.Name == n:
			// A Node's name is unique in the cluster: never another's.
			return Owner{Reason: "DNSNotNodes", What: "the name of Node " + other.Name}, true
		default:
			return Owner{Reason: "DNSNotNodes", What: "a host name of Node " + other.Name + " (its status.addresses)",
				Claim: "Node " + other.Name + "'s kubelet, which writes its status.addresses"}, true
		}
	}
	return Owner{}, false
}
