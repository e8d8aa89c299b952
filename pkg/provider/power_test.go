package provider_test

import (
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestPower: the out-of-service policy's proof, against simulated
// vCenters. A VM powered off is proven off only while its vCenter's
// inventory is current and the VM connected; its host not answering, or
// its vCenter down, leave the state unproven; the lookup is by the
// providerID's UUID only (a Node without one, or a VM with another UUID
// under the Node's name, is no proof).
func TestPower(t *testing.T) {
	e := stretched(t, "", nil)
	b := e.fleet.VCenter("vc-b")
	vm := b.VMs[0]
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + vm.UUID}}

	pw, err := e.p.Power(e.ctx, n)
	must.OK(t, err)
	if !pw.Proven || pw.VM.PowerState != types.VirtualMachinePowerStatePoweredOn || pw.VM.Ref != vm.Ref {
		t.Fatalf("running VM: %+v", pw)
	}

	ovm := object.NewVirtualMachine(b.Admin(), vm.Ref)
	task, err := ovm.PowerOff(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	poll.True(t, "powered off and proven", func() bool {
		pw, err = e.p.Power(e.ctx, n)
		return err == nil && pw.Proven && pw.VM.PowerState == types.VirtualMachinePowerStatePoweredOff
	})

	// Its host does not answer: vCenter reports the last state it knew.
	b.SetConnectionState(vm.Ref, types.VirtualMachineConnectionStateDisconnected)
	poll.True(t, "disconnected: unproven", func() bool {
		pw, err = e.p.Power(e.ctx, n)
		return err == nil && !pw.Proven && strings.Contains(pw.Unproven, "does not answer")
	})
	b.SetConnectionState(vm.Ref, types.VirtualMachineConnectionStateConnected)
	poll.True(t, "connected again: proven", func() bool {
		pw, err = e.p.Power(e.ctx, n)
		return err == nil && pw.Proven
	})

	// The vCenter down: never proof.
	must.OK(t, b.SetMode(vcsim.Down))
	poll.True(t, "vCenter down: unproven or an error", func() bool {
		pw, err = e.p.Power(e.ctx, n)
		return err != nil || !pw.Proven
	})
	must.OK(t, b.SetMode(vcsim.Up))

	// No providerID: no lookup by name.
	if _, err := e.p.Power(e.ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}}); err == nil {
		t.Errorf("a Node without providerID got a power proof (by name?)")
	}
	// Another UUID under the Node's name: not this VM.
	other := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211ffff-0000-4000-8000-000000000001"}}
	if pw, err := e.p.Power(e.ctx, other); err == nil {
		t.Errorf("a VM found for an unknown UUID: %+v", pw)
	} else if !strings.Contains(err.Error(), "providerID") {
		t.Errorf("error does not name the providerID: %v", err)
	}
}
