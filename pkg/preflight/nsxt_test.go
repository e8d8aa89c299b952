package preflight

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

func service(ns, name string, typ v1.ServiceType, class string, lbClass *string, ips ...string) v1.Service {
	s := v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{Type: typ, LoadBalancerClass: lbClass}}
	if class != "" {
		s.Annotations = map[string]string{config.LoadBalancerClassAnnotation: class}
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func TestLoadBalanced(t *testing.T) {
	metallb := "metallb.io/metallb"
	services := []v1.Service{
		service("web", "shop", v1.ServiceTypeLoadBalancer, "", nil, "10.0.0.5"),
		service("web", "api", v1.ServiceTypeLoadBalancer, "public", nil),
		service("web", "typo", v1.ServiceTypeLoadBalancer, "pubic", nil),  // a class the config lacks: the reference never served it
		service("web", "other", v1.ServiceTypeLoadBalancer, "", &metallb), // another controller's
		service("web", "internal", v1.ServiceTypeClusterIP, "", nil),      // no load balancer
		service("a", "first", v1.ServiceTypeLoadBalancer, "default", nil, "10.0.0.6", "10.0.0.7"),
	}
	on := config.NSXT{LoadBalancer: true, Classes: []string{"default", "public"}}
	want := []Unmanaged{
		{Kind: "Service", Name: "a/first", NSXT: "load balancer (class default) at 10.0.0.6, 10.0.0.7"},
		{Kind: "Service", Name: "web/api", NSXT: "load balancer (class public)"},
		{Kind: "Service", Name: "web/shop", NSXT: "load balancer (class default) at 10.0.0.5"},
	}
	if diff := cmp.Diff(want, LoadBalanced(on, services)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := LoadBalanced(config.NSXT{LoadBalancerRefused: "no size"}, services); len(got) != 0 {
		t.Errorf("a load balancer the reference refused served %v", got)
	}
}

func TestRouted(t *testing.T) {
	nodes := []v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:1::/64"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{PodCIDR: "10.244.0.0/24"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, // no Pod range: no route
	}
	want := []Unmanaged{
		{Kind: "Node", Name: "a", NSXT: "static route for 10.244.0.0/24 on /infra/tier-1s/t1"},
		{Kind: "Node", Name: "b", NSXT: "static route for 10.244.1.0/24, fd00:1::/64 on /infra/tier-1s/t1"},
	}
	if diff := cmp.Diff(want, Routed(config.NSXT{RouterPath: "/infra/tier-1s/t1"}, nodes)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := Routed(config.NSXT{}, nodes); got != nil {
		t.Errorf("without a router path: %v", got)
	}
}
