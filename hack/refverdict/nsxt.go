package main

import (
	"sort"
	"strings"

	lbconfig "k8s.io/cloud-provider-vsphere/pkg/cloudprovider/vsphere/loadbalancer/config"
	routeconfig "k8s.io/cloud-provider-vsphere/pkg/cloudprovider/vsphere/route/config"
	nsxtconfig "k8s.io/cloud-provider-vsphere/pkg/nsxt/config"
)

// network is what the reference's NSX-T readers make of a cloud-config, as
// its start-up calls them (cloud.go): its load balancer runs when
// ReadLBConfig succeeds and the config is enabled, with a default class and
// the configured ones; its route controller when routerPath is set.
type network struct {
	LoadBalancer        bool     `json:"loadBalancer,omitempty"`
	LoadBalancerRefused string   `json:"loadBalancerRefused,omitempty"`
	Classes             []string `json:"classes,omitempty"`
	RouterPath          string   `json:"routerPath,omitempty"`
	Manager             string   `json:"manager,omitempty"`
}

func readNetwork(b []byte) *network {
	n := &network{}
	lb, err := lbconfig.ReadLBConfig(b)
	switch {
	case err != nil:
		// Its reader fails on files without the sections too (YAML whose
		// shape it does not expect, then INI): a refusal counts only where
		// the sections are.
		if strings.Contains(strings.ToLower(string(b)), "loadbalancer") {
			n.LoadBalancerRefused = err.Error()
		}
	case lb.IsEnabled():
		n.LoadBalancer = true
		n.Classes = []string{lbconfig.DefaultLoadBalancerClass}
		for name := range lb.LoadBalancerClass {
			if name != lbconfig.DefaultLoadBalancerClass {
				n.Classes = append(n.Classes, name)
			}
		}
		sort.Strings(n.Classes)
	}
	if r, err := routeconfig.ReadRouteConfig(b); err == nil {
		n.RouterPath = r.Route.RouterPath
	}
	if c, err := nsxtconfig.ReadNsxtConfig(b); err == nil {
		n.Manager = c.Host
	}
	if n.LoadBalancer || n.LoadBalancerRefused != "" || n.RouterPath != "" || n.Manager != "" {
		return n
	}
	return nil
}

// withVCenter completes a fragment (the NSX-T readers' own test configs
// have no vCenter) with one vCenter, so that the CPI config reads too; a
// file that names a vCenter is left as it is. pkg/config's
// TestNSXTReadings does the same.
func withVCenter(b []byte, format string) []byte {
	if strings.Contains(strings.ToLower(string(b)), "vcenter") || strings.Contains(strings.ToLower(string(b)), "virtualcenter") {
		return b
	}
	if format == "ini" {
		return append(append([]byte{}, b...), "\n[VirtualCenter \"vc.example.com\"]\nuser = u\npassword = p\n"...)
	}
	return append(append([]byte{}, b...), "\nvcenter:\n  vc.example.com:\n    server: vc.example.com\n    user: u\n    password: p\n"...)
}
