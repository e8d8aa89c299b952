package inventory_test

import (
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestNodeNameFollowed: the kubelet key fingerprint a guest publishes and
// the Node name a provisioner sets in a VM's extraConfig are followed for
// every VM (KeyOwners, BoundName), changes included; a VM without a name
// has none; an inventory that does not follow the key cannot tell.
func TestNodeNameFollowed(t *testing.T) {
	const keyKey, nameKey = "guestinfo.vsphere-ccm.kubelet-client-key", "k8s.node-name"
	e := connect(t, "", nil, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 3})
	start := func(opts inventory.Options) *inventory.Inventory {
		opts.MaxWait = time.Second
		return newInventory(t, e, opts)
	}
	inv := start(inventory.Options{KubeletKeyProperty: keyKey, NodeNameProperty: nameKey})
	vc := e.fleet.VCenter("vc-a")
	bound, other := vc.VMs[0], vc.VMs[1]
	for _, kv := range [][2]string{{keyKey, "ab12"}, {nameKey, "worker-a"}} {
		if err := vc.PublishGuestInfo(e.ctx, bound.Ref, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	poll.True(t, "the owner of the key with its Node name", func() bool {
		owners, err := inv.KeyOwners("AB12")
		return err == nil && len(owners) == 1 && owners[0].Ref == bound.Ref && owners[0].NodeName == "worker-a"
	})
	if name, ok := inv.BoundName("vc-a", bound.Ref); !ok || name != "worker-a" {
		t.Errorf("BoundName = %q, %v; want worker-a", name, ok)
	}
	if name, ok := inv.BoundName("vc-a", other.Ref); !ok || name != "" {
		t.Errorf("BoundName of a VM without the key = %q, %v; want \"\", true", name, ok)
	}
	if err := vc.PublishGuestInfo(e.ctx, bound.Ref, nameKey, "worker-b"); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the new Node name", func() bool { name, _ := inv.BoundName("vc-a", bound.Ref); return name == "worker-b" })
	// A clone carries the key too: both hold the name.
	if err := vc.PublishGuestInfo(e.ctx, other.Ref, nameKey, "Worker-B"); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "two VMs holding the name", func() bool {
		vms, err := inv.BoundTo("worker-b")
		return err == nil && len(vms) == 2
	})
	if vms, err := inv.BoundTo("worker-z"); err != nil || len(vms) != 0 {
		t.Errorf("BoundTo a name no VM holds: %v, %v", vms, err)
	}

	plain := start(inventory.Options{})
	if name, ok := plain.BoundName("vc-a", bound.Ref); ok {
		t.Errorf("an inventory that does not follow the key told %q", name)
	}
	if _, err := plain.BoundTo("worker-b"); err == nil {
		t.Error("an inventory that does not follow the key listed the VMs bound to a name without an error")
	}
}
