package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// TestServingHostname: with approval on, a Node is never published a
// guest host name the serving-csr controller would deny it.
func TestServingHostname(t *testing.T) {
	addrs := func(host string) []v1.NodeAddress {
		return []v1.NodeAddress{{Type: v1.NodeHostName, Address: host}, {Type: v1.NodeInternalIP, Address: "10.0.0.5"}}
	}
	ipOnly := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}}
	on := config.ServingCertificates{Approve: true}
	for _, tc := range []struct {
		name string
		host string
		sc   config.ServingCertificates
		want []v1.NodeAddress
	}{
		{"approval off: as the reference publishes it", "web01.example.com", config.ServingCertificates{}, addrs("web01.example.com")},
		{"the Node's name", "worker-1", on, addrs("worker-1")},
		{"the Node's name under a domain", "worker-1.example.com", on, addrs("worker-1.example.com")},
		{"another first label (a Node named like its VM)", "web01.example.com", on, ipOnly},
		{"outside the allowed domains", "worker-1.example.com", config.ServingCertificates{Approve: true, AllowedDNSDomains: []string{"corp.example"}}, ipOnly},
		{"inside the allowed domains", "worker-1.corp.example", config.ServingCertificates{Approve: true, AllowedDNSDomains: []string{"corp.example"}}, addrs("worker-1.corp.example")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
			if diff := cmp.Diff(tc.want, servingHostname(node, addrs(tc.host), tc.sc)); diff != "" {
				t.Error(diff)
			}
		})
	}
}
