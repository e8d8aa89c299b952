//go:build parity

package parity

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// The layouts changed after the reference and ours have seen them running.
const (
	destroyedLayout = "one-nic-dual"        // destroyed
	stoppedLayout   = "two-nics-mgmt-first" // powered off, guest info kept
	clearedLayout   = "two-nics-k8s-first"  // powered off, guest info gone
	orphanedLayout  = "orphaned"            // reconnected
)

type changes struct {
	wait []string // layouts ours must see changed before it is asked
}

// changeCorpus destroys, powers off and reconnects VMs of the corpus.
func changeCorpus(ctx context.Context, t *testing.T, f *vcsim.Fleet, vms []vcsim.VM, ls []layout) changes {
	t.Helper()
	vmOf := func(name string) (vcsim.VM, *vcsim.VCenter) {
		for i, l := range ls {
			if l.name == name {
				return vms[i], f.VCenter(vms[i].VCenter)
			}
		}
		t.Fatalf("no layout %s", name)
		return vcsim.VM{}, nil
	}
	vm, v := vmOf(destroyedLayout)
	obj := object.NewVirtualMachine(v.Admin(), vm.Ref)
	if err := wait(ctx)(obj.PowerOff(ctx)); err != nil {
		t.Fatal(err)
	}
	if err := wait(ctx)(obj.Destroy(ctx)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{stoppedLayout, clearedLayout} {
		vm, v := vmOf(name)
		if err := wait(ctx)(object.NewVirtualMachine(v.Admin(), vm.Ref).PowerOff(ctx)); err != nil {
			t.Fatal(err)
		}
		if name == clearedLayout {
			v.SetGuest(vm.Ref, "", nil)
		}
	}
	vm, v = vmOf(orphanedLayout)
	v.SetConnectionState(vm.Ref, types.VirtualMachineConnectionStateConnected)
	return changes{wait: []string{destroyedLayout, stoppedLayout, clearedLayout, orphanedLayout}}
}

// seen reports whether ours has seen the change of c's layout.
func (changes) seen(ctx context.Context, p *provider.Provider, c nodeCase) bool {
	vm, err := p.FindVM(ctx, c.node.DeepCopy())
	switch c.layout {
	case destroyedLayout:
		return errors.Is(err, inventory.ErrNotFound)
	case stoppedLayout, clearedLayout:
		return err == nil && vm.PowerState == types.VirtualMachinePowerStatePoweredOff
	case orphanedLayout:
		return err == nil && vm.ConnectionState == types.VirtualMachineConnectionStateConnected
	}
	return false
}

// cases are the Nodes asked about after the changes.
func (ch changes) cases(byLayout map[string]nodeCase) []nodeCase {
	var out []nodeCase
	for _, name := range ch.wait {
		out = append(out, byLayout[name])
	}
	skipped := byLayout[destroyedLayout]
	skipped.name += "/SKIP_NODE_DELETION"
	skipped.skip = true
	for _, c := range strangers(vcsim.VM{}) {
		if strings.HasPrefix(c.name, "destroyed-") {
			out = append(out, c)
		}
	}
	return append(out, skipped)
}
