package preflight

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// Unmanaged is one object of the cluster whose NSX-T counterpart the
// reference CCM managed (a load balancer for a Service, a static route for
// a Node's Pod range) and this CCM will not: after the switch it stays in
// NSX-T as it is, changes are not applied and nothing deletes it.
type Unmanaged struct {
	// Kind is Service or Node; Name is namespace/name or the Node's name.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// NSXT says what the reference kept in NSX-T for it.
	NSXT string `json:"nsxt"`
}

// UnmanagedAfterSwitch says what stops after the switch and what to do,
// for the report.
const UnmanagedAfterSwitch = "after the switch this CCM runs no load balancer or route controller: " +
	"the NSX-T load balancers keep serving their current addresses and members, but new Services of type LoadBalancer get no address, " +
	"changes (ports, Nodes joining or leaving) are not applied, and the NSX-T virtual servers, pools and routes are left behind when a Service or Node is deleted. " +
	"Before switching, move these Services to another load balancer (NSX Advanced Load Balancer with AKO, or the per-site recipes in docs/operations.md) " +
	"and Pod routing to the CNI (or keep the routes and remove them by hand); then run migrate preflight with --acknowledge-nsxt"

// LoadBalanced lists the Services of type LoadBalancer that the reference's
// NSX-T load balancer served with this config: no spec.loadBalancerClass
// (the framework's service controller leaves the others to their
// controller), and a loadbalancer.vmware.io/class the config has (none is
// the default class). Sorted by namespace and name.
func LoadBalanced(n config.NSXT, services []v1.Service) []Unmanaged {
	var out []Unmanaged
	for i := range services {
		s := &services[i]
		if s.Spec.Type != v1.ServiceTypeLoadBalancer || s.Spec.LoadBalancerClass != nil {
			continue
		}
		class := s.Annotations[config.LoadBalancerClassAnnotation]
		if !n.Serves(class) {
			continue
		}
		if class == "" {
			class = config.DefaultLoadBalancerClass
		}
		what := fmt.Sprintf("load balancer (class %s)", class)
		var ips []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ips = append(ips, in.IP)
			}
		}
		if len(ips) > 0 {
			what += " at " + strings.Join(ips, ", ")
		}
		out = append(out, Unmanaged{Kind: "Service", Name: s.Namespace + "/" + s.Name, NSXT: what})
	}
	slices.SortFunc(out, func(a, b Unmanaged) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Routed lists the Nodes whose Pod ranges the reference's route controller
// routed on route.routerPath (it runs when the controller manager allocates
// Pod ranges and configures cloud routes). Sorted by name.
func Routed(n config.NSXT, nodes []v1.Node) []Unmanaged {
	if n.RouterPath == "" {
		return nil
	}
	var out []Unmanaged
	for i := range nodes {
		cidrs := nodes[i].Spec.PodCIDRs
		if len(cidrs) == 0 && nodes[i].Spec.PodCIDR != "" {
			cidrs = []string{nodes[i].Spec.PodCIDR}
		}
		if len(cidrs) == 0 {
			continue
		}
		out = append(out, Unmanaged{Kind: "Node", Name: nodes[i].Name,
			NSXT: fmt.Sprintf("static route for %s on %s", strings.Join(cidrs, ", "), n.RouterPath)})
	}
	slices.SortFunc(out, func(a, b Unmanaged) int { return strings.Compare(a.Name, b.Name) })
	return out
}
