package provider_test

import (
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
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

	// The live check agrees while the VM is off, and refuses once it is on.
	must.OK(t, e.p.ConfirmPoweredOff(e.ctx, n, pw.VM))

	// The kubelet runs on another machine (a clone under a new UUID).
	clone := n.DeepCopy()
	clone.Status.NodeInfo.SystemUUID = "4211EEEE-0000-4000-8000-000000000001"
	if pw, err := e.p.Power(e.ctx, clone); err != nil || pw.Proven || !strings.Contains(pw.Unproven, "machine UUID") {
		t.Errorf("kubelet on another machine: %+v, %v; want unproven", pw, err)
	}
	same := n.DeepCopy()
	same.Status.NodeInfo.SystemUUID = strings.ToUpper(vm.UUID)
	if pw, err := e.p.Power(e.ctx, same); err != nil || !pw.Proven {
		t.Errorf("kubelet on the VM: %+v, %v; want proven", pw, err)
	}
	// Labelled with another vCenter.
	moved := n.DeepCopy()
	moved.Labels = map[string]string{provider.LabelVCenter: "vc-c"}
	if pw, err := e.p.Power(e.ctx, moved); err != nil || pw.Proven {
		t.Errorf("labelled with another vCenter: %+v, %v; want unproven", pw, err)
	}
	// A VM elsewhere whose identity cannot be read may be a running duplicate.
	c := e.fleet.VCenter("vc-c")
	c.SetConnectionState(c.VMs[0].Ref, types.VirtualMachineConnectionStateInaccessible)
	poll.True(t, "unproven while another vCenter has an unreadable VM", func() bool {
		pw, err = e.p.Power(e.ctx, n)
		return err == nil && !pw.Proven && strings.Contains(pw.Unproven, "cannot be ruled out")
	})
	c.SetConnectionState(c.VMs[0].Ref, types.VirtualMachineConnectionStateConnected)
	poll.True(t, "proven again", func() bool {
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

	poll.True(t, "proven after the outage", func() bool {
		pw, err = e.p.Power(e.ctx, n)
		return err == nil && pw.Proven
	})
	task, err = ovm.PowerOn(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	if err := e.p.ConfirmPoweredOff(e.ctx, n, pw.VM); err == nil || !strings.Contains(err.Error(), "poweredOn") {
		t.Errorf("live check of a VM powered on: %v, want an error saying so", err)
	}

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
