package provider_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
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

// TestInstanceTypeFromTag: labels.instanceType gives the Node's instance
// type from a vSphere tag; a VM without one gets the generated type, and
// explain says where each came from.
func TestInstanceTypeFromTag(t *testing.T) {
	// Tags attached after the start are seen at the next refresh (10 s).
	e := stretchedWith(t, "global:\n  connectTimeout: 5s\n  requestTimeout: 3s\n  tagRefreshInterval: 10s\n",
		"labels:\n  zone: k8s-zone\n  region: k8s-region\n  instanceType: k8s-instance-type\n", nil, provider.Options{})
	b := e.fleet.VCenter("vc-b")
	tagged, plain := b.VMs[0], b.VMs[1]
	must.OK(t, b.Tag(e.ctx, "k8s-instance-type", "db-large", tagged.Ref))
	poll.NoError(t, "the tag seen", time.Minute, func() error {
		md, err := e.p.InstanceMetadata(e.ctx, node(tagged))
		if err == nil && md.InstanceType != "db-large" {
			err = fmt.Errorf("instance type %q", md.InstanceType)
		}
		return err
	})
	md, err := e.p.InstanceMetadata(e.ctx, node(plain))
	must.OK(t, err)
	if !strings.HasPrefix(md.InstanceType, "vsphere-vm.cpu-") {
		t.Errorf("untagged VM: instance type %q, want the generated one", md.InstanceType)
	}
	ex := e.p.Explain(e.ctx, provider.ExplainOptions{})
	for _, pl := range ex.Placements {
		switch pl.VM {
		case tagged.Name:
			if pl.InstanceType.Value != "db-large" || !strings.Contains(pl.InstanceType.From, "tag k8s-instance-type:db-large on VM") {
				t.Errorf("explain, tagged: %+v", pl.InstanceType)
			}
		case plain.Name:
			if !strings.HasPrefix(pl.InstanceType.Value, "vsphere-vm.") || !strings.Contains(pl.InstanceType.From, "CPUs, memory and guest OS") {
				t.Errorf("explain, untagged: %+v", pl.InstanceType)
			}
		}
	}
}

// TestPlacementLabels: labels.placement sets the host, cluster and
// datacenter labels at initialization, and after a vMotion Observe lists
// the labels to patch (the node-topology controller patches them).
func TestPlacementLabels(t *testing.T) {
	e := stretched(t, "labels:\n  zone: k8s-zone\n  region: k8s-region\n  placement: [host, cluster, datacenter]\n", nil)
	b := e.fleet.VCenter("vc-b")
	vm := b.VMs[0]
	n := node(vm)
	md, err := e.p.InstanceMetadata(e.ctx, n)
	must.OK(t, err)
	if md.AdditionalLabels[provider.LabelHost] != provider.LabelValue(vm.Host) || md.AdditionalLabels[provider.LabelCluster] != provider.LabelValue(vm.Cluster) ||
		md.AdditionalLabels[provider.LabelDatacenter] != vm.Datacenter {
		t.Fatalf("placement labels at initialization: %v (VM on %s in %s)", md.AdditionalLabels, vm.Host, vm.Cluster)
	}
	// Initialized with those labels, as the framework writes them.
	n.Labels = md.AdditionalLabels
	n.Spec.ProviderID = md.ProviderID
	obs, err := e.p.Observe(e.ctx, n)
	must.OK(t, err)
	if len(obs.PlacementLabels) != 0 {
		t.Fatalf("placement drift before any move: %+v", obs.PlacementLabels)
	}
	to, ok := b.OtherHost(vm)
	if !ok {
		t.Fatal("vc-b's cluster has one host only")
	}
	must.OK(t, b.Relocate(e.ctx, vm.Ref, to))
	poll.True(t, "the host label to patch", func() bool {
		obs, err = e.p.Observe(e.ctx, n)
		return err == nil && len(obs.PlacementLabels) == 1 && obs.PlacementLabels[0].Label == provider.LabelHost &&
			obs.PlacementLabels[0].Now != "" && obs.PlacementLabels[0].Now != n.Labels[provider.LabelHost]
	})
}

// TestCustomAttributes: a VM custom attribute gives the instance type
// (labels.instanceTypeAttribute, when no instance type tag does) and a
// label (labels.additional with attribute); a value that cannot be a
// label value is an error naming the attribute, the VM and the value.
func TestCustomAttributes(t *testing.T) {
	var b *vcsim.VCenter
	var typed, plain, bad vcsim.VM
	e := stretchedWith(t, "", "labels:\n  zone: k8s-zone\n  region: k8s-region\n  instanceTypeAttribute: instance-type\n"+
		"  additional:\n  - attribute: cost-center\n    label: example.com/cost-center\n", nil, provider.Options{},
		func(ctx context.Context, f *vcsim.Fleet) {
			b = f.VCenter("vc-b")
			typed, plain, bad = b.VMs[0], b.VMs[1], f.VCenter("vc-c").VMs[0]
			must.OK(t, b.SetAttribute(ctx, typed.Ref, "instance-type", "db.large"))
			must.OK(t, b.SetAttribute(ctx, typed.Ref, "cost-center", "cc-42"))
			must.OK(t, f.VCenter("vc-c").SetAttribute(ctx, bad.Ref, "cost-center", "not a label!"))
		})
	md, err := e.p.InstanceMetadata(e.ctx, node(typed))
	must.OK(t, err)
	if md.InstanceType != "db.large" || md.AdditionalLabels["example.com/cost-center"] != "cc-42" {
		t.Errorf("attributes: instance type %q, labels %v", md.InstanceType, md.AdditionalLabels)
	}
	md, err = e.p.InstanceMetadata(e.ctx, node(plain))
	must.OK(t, err)
	if !strings.HasPrefix(md.InstanceType, "vsphere-vm.") || md.AdditionalLabels["example.com/cost-center"] != "" {
		t.Errorf("no attributes: instance type %q, labels %v", md.InstanceType, md.AdditionalLabels)
	}
	_, err = e.p.InstanceMetadata(e.ctx, node(bad))
	if err == nil || !strings.Contains(err.Error(), `custom attribute "cost-center"`) || !strings.Contains(err.Error(), `"not a label!"`) {
		t.Errorf("invalid attribute value: %v", err)
	}
}

// TestAbsenceWithNodesElsewhere: while any Node is labelled with a vCenter
// that is not configured, no VM is proven absent: the VM not found may
// have moved there (a cross-vCenter vMotion, then that vCenter removed
// from the config: found by the fault soak). Once no such Node remains,
// absence is proven again.
func TestAbsenceWithNodesElsewhere(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 1})
	must.OK(t, err)
	defer f.Close()
	cfg, _, err := config.Parse("t.yaml", []byte(f.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 3s\n", nil)), config.Options{})
	must.OK(t, err)
	gone := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone", Labels: map[string]string{provider.LabelVCenter: "vc-a"}},
		Spec: v1.NodeSpec{ProviderID: "vsphere://4211aaaa-0000-4000-8000-0000000000ff"}}
	elsewhere := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Labels: map[string]string{provider.LabelVCenter: "vc-removed"}}}
	kube := fake.NewClientset(gone, elsewhere)
	p, err := provider.New(cfg, provider.Options{})
	must.OK(t, err)
	must.OK(t, p.Start(ctx, kube))
	defer p.Close()
	must.OK(t, p.WaitForSync(ctx))

	ok, err := p.InstanceExists(ctx, gone)
	var nc *provider.NotConfiguredError
	if ok || !errors.As(err, &nc) || !nc.Other || nc.VCenter != "vc-removed" {
		t.Fatalf("with a Node labelled with an unconfigured vCenter: InstanceExists = %v, %v; want an unproven absence naming it", ok, err)
	}
	must.OK(t, kube.CoreV1().Nodes().Delete(ctx, "elsewhere", metav1.DeleteOptions{}))
	if ok, err := p.InstanceExists(ctx, gone); ok || err != nil {
		t.Errorf("no such Node left: InstanceExists = %v, %v; want false, nil (gone)", ok, err)
	}
}
