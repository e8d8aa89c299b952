package inventory_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// detailReads returns, for each direct read of VM details vc received
// (RetrieveProperties or RetrievePropertiesEx), which of refs it named.
func detailReads(vc *vcsim.VCenter, refs ...types.ManagedObjectReference) [][]string {
	var out [][]string
	for _, r := range vc.Requests() {
		if !bytes.Contains(r.Body, []byte("<RetrieveProperties")) {
			continue
		}
		var named []string
		for _, ref := range refs {
			if bytes.Contains(r.Body, []byte(">"+ref.Value+"<")) {
				named = append(named, ref.Value)
			}
		}
		if len(named) > 0 {
			out = append(out, named)
		}
	}
	return out
}

// TestPrefetch: against simulated vCenters, the VMs of Nodes read ahead
// by UUID within one interval share one direct read of their details,
// which is kept: the lookups made after answer from the index, with no
// request of their own. A lookup waiting for a VM read ahead waits for
// that read (here: the end of the interval), not for a request of its
// own. A UUID no VM has, one found in two vCenters, or a VM already
// detailed, costs nothing.
func TestPrefetch(t *testing.T) {
	e := setup(t)
	fc := clocktesting.NewFakeClock(time.Now())
	const interval = time.Minute
	inv := newInventory(t, e, inventory.Options{MaxWait: time.Second, StaleAfter: time.Hour, EagerDetailsMax: -1,
		FollowInterval: -1, PrefetchInterval: interval, Clock: fc})
	vc := e.fleet.VCenter("vc-a")
	ix := inv.Index("vc-a")
	vms := vc.VMs
	if len(vms) < 4 {
		t.Fatalf("%d VMs in vc-a, want 4", len(vms))
	}
	refs := []types.ManagedObjectReference{vms[0].Ref, vms[1].Ref, vms[2].Ref, vms[3].Ref}
	vc.RecordRequests()
	detailed := func(vm vcsim.VM) func() bool {
		return func() bool { d, ok := ix.VM(vm.Ref); return ok && d.Host == vm.HostRef && len(d.NICs) > 0 }
	}

	// Quiet until now: read at once, alone.
	if !inv.Prefetch(e.ctx, config.LookupUUID, vms[0].UUID) {
		t.Fatal("Prefetch did not find vms[0]")
	}
	poll.True(t, "vms[0] detailed", detailed(vms[0]))

	// Within the interval: together, at its end.
	for _, vm := range vms[1:4] {
		if !inv.Prefetch(e.ctx, config.LookupUUID, vm.UUID) {
			t.Fatalf("Prefetch did not find %s", vm.Name)
		}
	}
	found := make(chan error, 1)
	go func() {
		got, err := inv.FindByUUID(e.ctx, vms[2].UUID)
		if err == nil && got.Host != vms[2].HostRef {
			t.Errorf("the lookup of a VM read ahead returned %+v", got)
		}
		found <- err
	}()
	poll.True(t, "the interval's timer armed", fc.HasWaiters)
	fc.Step(interval)
	if err := <-found; err != nil {
		t.Fatalf("lookup of a VM read ahead: %v", err)
	}
	for _, vm := range vms[1:4] {
		poll.True(t, vm.Name+" detailed", detailed(vm))
	}
	for _, vm := range vms[:4] {
		if got, err := inv.FindByUUID(e.ctx, vm.UUID); err != nil || got.Host != vm.HostRef {
			t.Errorf("lookup of %s after it was read ahead: %+v, %v", vm.Name, got, err)
		}
	}
	want := [][]string{{vms[0].Ref.Value}, {vms[1].Ref.Value, vms[2].Ref.Value, vms[3].Ref.Value}}
	if got := detailReads(vc, refs...); !equalReads(got, want) {
		t.Errorf("direct reads of details %v, want %v: one for the first VM, one for the three read ahead together, none for the lookups", got, want)
	}

	// Nothing to read: no such VM; already detailed.
	if inv.Prefetch(e.ctx, config.LookupUUID, "4211aaaa-0000-4000-8000-00000000dead") {
		t.Error("Prefetch found a UUID no VM has")
	}
	if !inv.Prefetch(e.ctx, config.LookupUUID, vms[0].UUID) {
		t.Error("Prefetch of a VM already detailed: not found")
	}
	if inv.Prefetch(e.ctx, config.LookupUUID, "not-a-uuid") {
		t.Error("Prefetch found a value that is no UUID")
	}
	if fc.HasWaiters() {
		t.Error("a read ahead was scheduled for nothing")
	}
	if got := detailReads(vc, refs...); !equalReads(got, want) {
		t.Errorf("direct reads of details %v after reads ahead of nothing, want %v", got, want)
	}
}

func equalReads(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}
