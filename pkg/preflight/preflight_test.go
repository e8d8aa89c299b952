package preflight

import (
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

const uuid = "vsphere://4211a1b2-0000-4000-8000-000000000001"

// referenceNode is a Node as the reference CCM leaves it: providerID, GA and
// beta zone, region and instance type labels, addresses.
func referenceNode(mut func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{
			v1.LabelTopologyZone: "zone-a", v1.LabelFailureDomainBetaZone: "zone-a",
			v1.LabelTopologyRegion: "region-1", v1.LabelFailureDomainBetaRegion: "region-1",
			v1.LabelInstanceTypeStable: "vsphere-vm.cpu-2.mem-4gb.os-ubuntu", v1.LabelInstanceType: "vsphere-vm.cpu-2.mem-4gb.os-ubuntu",
		}},
		Spec: v1.NodeSpec{ProviderID: uuid},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeHostName, Address: "worker-1"},
			{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeExternalIP, Address: "10.0.0.5"},
		}},
	}
	if mut != nil {
		mut(n)
	}
	return n
}

func metadata(mut func(*cloudprovider.InstanceMetadata)) *cloudprovider.InstanceMetadata {
	md := &cloudprovider.InstanceMetadata{ProviderID: uuid, InstanceType: "vsphere-vm.cpu-2.mem-4gb.os-ubuntu",
		Zone: "zone-a", Region: "region-1",
		NodeAddresses: []v1.NodeAddress{{Type: v1.NodeHostName, Address: "worker-1"},
			{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeExternalIP, Address: "10.0.0.5"}}}
	if mut != nil {
		mut(md)
	}
	return md
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name   string
		node   *v1.Node
		md     *cloudprovider.InstanceMetadata
		err    error
		fields []string // fields of the differences, in order
		blocks bool
		impact Impact            // of the addresses difference, if any
		labels map[string]Impact // of the label differences
	}{
		{name: "same", node: referenceNode(nil), md: metadata(nil)},
		{name: "providerID case only", node: referenceNode(func(n *v1.Node) { n.Spec.ProviderID = "vsphere://4211A1B2-0000-4000-8000-000000000001" }),
			md: metadata(nil), fields: []string{"providerID"}},
		{name: "other providerID", node: referenceNode(nil),
			md: metadata(func(m *cloudprovider.InstanceMetadata) {
				m.ProviderID = "vsphere://4211a1b2-0000-4000-8000-000000000002"
			}),
			fields: []string{"providerID"}, blocks: true},
		{name: "other zone", node: referenceNode(nil), md: metadata(func(m *cloudprovider.InstanceMetadata) { m.Zone = "zone-b" }),
			fields: []string{"zone (topology.kubernetes.io/zone)", "zone (failure-domain.beta.kubernetes.io/zone)"}, blocks: true},
		{name: "zone lost", node: referenceNode(nil), md: metadata(func(m *cloudprovider.InstanceMetadata) { m.Zone = "" }),
			fields: []string{"zone (topology.kubernetes.io/zone)", "zone (failure-domain.beta.kubernetes.io/zone)"}, blocks: true},
		{name: "beta label only differs", node: referenceNode(func(n *v1.Node) { n.Labels[v1.LabelFailureDomainBetaRegion] = "old" }),
			md: metadata(nil), fields: []string{"region (failure-domain.beta.kubernetes.io/region)"}, blocks: true},
		{name: "no zone label, one would be set", node: referenceNode(func(n *v1.Node) {
			delete(n.Labels, v1.LabelTopologyZone)
			delete(n.Labels, v1.LabelFailureDomainBetaZone)
		}), md: metadata(nil), fields: []string{"zone (topology.kubernetes.io/zone)", "zone (failure-domain.beta.kubernetes.io/zone)"}},
		{name: "instance type", node: referenceNode(nil), md: metadata(func(m *cloudprovider.InstanceMetadata) { m.InstanceType = "vsphere-vm.cpu-4.mem-8gb.os-ubuntu" }),
			fields: []string{"instanceType (node.kubernetes.io/instance-type)", "instanceType (beta.kubernetes.io/instance-type)"}},
		{name: "addresses", node: referenceNode(nil), md: metadata(func(m *cloudprovider.InstanceMetadata) {
			m.NodeAddresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}}
		}), fields: []string{"addresses"}, impact: Changes},
		{name: "the VIP instead of the address", node: referenceNode(nil), md: metadata(func(m *cloudprovider.InstanceMetadata) {
			m.NodeAddresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeInternalIP, Address: "10.0.0.100"}, {Type: v1.NodeExternalIP, Address: "10.0.0.100"}}
		}), fields: []string{"addresses"}, impact: Changes},
		{name: "Hostname moved: order only, not written", node: referenceNode(nil), md: metadata(func(m *cloudprovider.InstanceMetadata) {
			m.NodeAddresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"},
				{Type: v1.NodeExternalIP, Address: "10.0.0.5"}, {Type: v1.NodeHostName, Address: "worker-1"}}
		}), fields: []string{"addresses"}, impact: Note},
		{name: "dual-stack families swapped: written", node: referenceNode(func(n *v1.Node) {
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeInternalIP, Address: "fd00::5"}}
		}), md: metadata(func(m *cloudprovider.InstanceMetadata) {
			m.NodeAddresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeInternalIP, Address: "fd00::5"}, {Type: v1.NodeInternalIP, Address: "10.0.0.5"}}
		}), fields: []string{"addresses"}, impact: Changes},
		{name: "labels this CCM adds", node: referenceNode(func(n *v1.Node) { n.Labels["vsphere.vsphere-ccm.io/datacenter"] = "dc-1" }),
			md: metadata(func(m *cloudprovider.InstanceMetadata) {
				m.AdditionalLabels = map[string]string{"vsphere.vsphere-ccm.io/vcenter": "vc-a", "vsphere.vsphere-ccm.io/datacenter": "dc-1",
					"vsphere.vsphere-ccm.io/host": "esx-1", "example.com/rack": "r7", "vsphere.vsphere-ccm.io/vm": "vm-42"}
			}),
			// The record of the VM (vcenter, vm) is written on every Node.
			fields: []string{"label example.com/rack", "label vsphere.vsphere-ccm.io/host", "label vsphere.vsphere-ccm.io/vcenter", "label vsphere.vsphere-ccm.io/vm"},
			labels: map[string]Impact{"label example.com/rack": Note, "label vsphere.vsphere-ccm.io/host": Changes,
				"label vsphere.vsphere-ccm.io/vcenter": Changes, "label vsphere.vsphere-ccm.io/vm": Changes}},
		{name: "not initialized yet", node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"},
			Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}}},
			md: metadata(func(m *cloudprovider.InstanceMetadata) {
				m.AdditionalLabels = map[string]string{"vsphere.vsphere-ccm.io/host": "esx-1"}
			})},
		{name: "joined without the taint: no CCM initializes it", node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}, md: metadata(nil),
			fields: []string{"initialization"}, labels: map[string]Impact{"initialization": Note}},
		{name: "no VM", node: referenceNode(nil), err: errors.New("not found"), fields: []string{"vm"}, blocks: true},
		// The kubelet's node IP: the addresses compared as the framework
		// makes them the Node's.
		{name: "dual-stack with a node IP: the other family dropped by the framework, as on the Node", node: referenceNode(func(n *v1.Node) {
			n.Annotations = map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.0.0.5"}
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeHostName, Address: "worker-1"}}
		}), md: metadata(func(m *cloudprovider.InstanceMetadata) {
			m.NodeAddresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeInternalIP, Address: "fd00::5"}}
		})},
		{name: "a node IP after a VIP", node: referenceNode(func(n *v1.Node) {
			n.Annotations = map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.0.0.5"}
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeExternalIP, Address: "10.0.0.5"},
				{Type: v1.NodeHostName, Address: "worker-1"}}
		}), md: metadata(func(m *cloudprovider.InstanceMetadata) {
			m.NodeAddresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: "worker-1"},
				{Type: v1.NodeInternalIP, Address: "10.0.0.100"}, {Type: v1.NodeExternalIP, Address: "10.0.0.100"},
				{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeExternalIP, Address: "10.0.0.5"}}
		})},
		{name: "a node IP not among the addresses", node: referenceNode(func(n *v1.Node) {
			n.Annotations = map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.0.0.9"}
		}), md: metadata(nil), fields: []string{"addresses"}, impact: Note},
		{name: "a node IP this CCM cannot give", node: referenceNode(nil),
			err:    &provider.NodeIPError{Node: "worker-1", IP: "10.0.0.9", VM: "vc-a/dc-1/worker-1", Reason: "is not an address VMware Tools reports"},
			fields: []string{"addresses"}, impact: Note},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := Compare(tc.node, tc.md, tc.err, []string{"vsphere.vsphere-ccm.io/host"})
			var fields []string
			for _, d := range ds {
				fields = append(fields, d.Field)
				if d.Why == "" || d.Node != tc.node.Name {
					t.Errorf("difference %+v: no node or why", d)
				}
			}
			if !slices.Equal(fields, tc.fields) {
				t.Errorf("fields %q, want %q", fields, tc.fields)
			}
			for _, d := range ds {
				if d.Field == "addresses" && d.Impact != tc.impact {
					t.Errorf("addresses difference %+v: impact %s, want %s", d, d.Impact, tc.impact)
				}
				if want, ok := tc.labels[d.Field]; ok && d.Impact != want {
					t.Errorf("%s: impact %s, want %s", d.Field, d.Impact, want)
				}
			}
			if Blocks(ds) != tc.blocks {
				t.Errorf("blocks = %v, want %v: %+v", Blocks(ds), tc.blocks, ds)
			}
		})
	}
}
