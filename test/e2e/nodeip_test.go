//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestKubeletNodeIP: kubelets started with --node-ip, through the real
// node controller (kubernetes/cloud-provider-vsphere#614). A VM whose guest
// reports a VIP before its own address gets its node IP as its only
// InternalIP and ExternalIP (what the reference gives with it first); a
// node IP its guest does not report leaves the Node uninitialized with a
// NodeIPNotOnVM event that says what the guest reports; a Node without
// --node-ip gets the rules' address as before.
func TestKubeletNodeIP(t *testing.T) {
	t.Parallel()
	h := setup(t)
	vms := h.fleet.VMs()
	vip, wrong, plain := vms[0], vms[1], vms[2]
	h.fleet.VCenter(vip.VCenter).SetGuest(vip.Ref, vip.Name, []types.GuestNicInfo{
		{Network: "VM Network", DeviceConfigId: 4000, Connected: true, IpAddress: []string{"10.99.1.100", "10.99.1.5"}}})
	for _, k := range []struct {
		vm     vcsim.VM
		nodeIP string
	}{{vip, "10.99.1.5"}, {wrong, "10.99.2.9"}, {plain, ""}} {
		h.register(t, k.vm, false)
		if k.nodeIP == "" {
			continue
		}
		n, err := h.node(k.vm.Name)
		must.OK(t, err)
		n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: k.nodeIP}
		_, err = h.kube.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
		must.OK(t, err)
	}
	h.startCCM()

	h.waitInitialized(t, plain)
	poll.NoError(t, vip.Name+" initialized with its node IP", 60*time.Second, func() error {
		n, err := h.node(vip.Name)
		if err != nil {
			return err
		}
		if hasTaint(n, uninitializedTaint) {
			return errNotYet
		}
		want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.99.1.5"}, {Type: v1.NodeExternalIP, Address: "10.99.1.5"},
			{Type: v1.NodeHostName, Address: vip.Name}}
		if !slices.Equal(n.Status.Addresses, want) {
			return fmt.Errorf("addresses %v, want %v", n.Status.Addresses, want)
		}
		return nil
	})
	h.waitEvent(t, wrong.Name, provider.ReasonNodeIPNotOnVM, "10.99.2.9", "it reports "+wrong.IPv4)
	h.uninitialized(t, wrong)
}
