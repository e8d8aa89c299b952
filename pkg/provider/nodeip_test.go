package provider_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	cloudproviderapi "k8s.io/cloud-provider/api"
	cloudnodeutil "k8s.io/cloud-provider/node/helpers"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// TestNodeIPOnSimulator: a VM whose guest reports a floating address (a
// control plane's VIP) before its own, and a kubelet started with
// --node-ip set to its own (kubernetes/cloud-provider-vsphere#614): the
// Node gets its node IP as InternalIP, through the framework's own filter,
// and so does its serving identity. A node IP the VM does not report is a
// NodeIPNotOnVM event naming what it reports.
func TestNodeIPOnSimulator(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	e := stretchedWith(t, "", "", nil, provider.Options{Events: eventsTo(rec)})
	c := e.fleet.VCenter("vc-c")
	vm := c.VMs[0]
	c.SetGuest(vm.Ref, vm.Name, []types.GuestNicInfo{
		{Network: "VM Network", DeviceConfigId: 4000, IpAddress: []string{"10.99.0.100", "10.99.0.5"}},
	})
	n := node(vm)
	poll.True(t, "guest info", func() bool {
		md, err := e.p.InstanceMetadata(e.ctx, n)
		return err == nil && slices.Contains(md.NodeAddresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.99.0.100"})
	})

	n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.99.0.5"}
	md, err := e.p.InstanceMetadata(e.ctx, n)
	must.OK(t, err)
	want := []v1.NodeAddress{{Type: v1.NodeHostName, Address: vm.Name}, {Type: v1.NodeInternalIP, Address: "10.99.0.100"},
		{Type: v1.NodeExternalIP, Address: "10.99.0.100"}, {Type: v1.NodeInternalIP, Address: "10.99.0.5"}, {Type: v1.NodeExternalIP, Address: "10.99.0.5"}}
	if !slices.Equal(md.NodeAddresses, want) {
		t.Fatalf("addresses\n got %v\nwant %v", md.NodeAddresses, want)
	}
	onNode, err := cloudnodeutil.GetNodeAddressesFromNodeIP("10.99.0.5", md.NodeAddresses)
	must.OK(t, err)
	// What the reference gives with the node IP first.
	wantOnNode := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.99.0.5"}, {Type: v1.NodeExternalIP, Address: "10.99.0.5"},
		{Type: v1.NodeHostName, Address: vm.Name}}
	if !slices.Equal(onNode, wantOnNode) {
		t.Errorf("the framework's addresses\n got %v\nwant %v", onNode, wantOnNode)
	}
	n.Spec.ProviderID = md.ProviderID
	id, err := e.p.ServingIdentity(e.ctx, n)
	must.OK(t, err)
	if !slices.Contains(id.IPs, netip.MustParseAddr("10.99.0.5")) {
		t.Errorf("serving identity IPs %v: the node IP is missing", id.IPs)
	}

	n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr] = "10.99.0.9"
	if _, err := e.p.InstanceMetadata(e.ctx, n); err == nil || !strings.Contains(err.Error(), "it reports 10.99.0.100, 10.99.0.5") {
		t.Errorf("a node IP the VM does not report: %v", err)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, "Warning "+provider.ReasonNodeIPNotOnVM+" ") || !strings.Contains(ev, "10.99.0.9") {
			t.Errorf("event %q", ev)
		}
	case <-e.ctx.Done():
		t.Error("no event")
	}
}
