package inventory_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// fired reports whether ch is closed, without waiting.
func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// wantTwo fails t unless the lookup of uuid is ambiguous between two VMs.
func wantTwo(t *testing.T, inv *inventory.Inventory, uuid, what string) {
	t.Helper()
	_, err := inv.FindByUUID(t.Context(), uuid)
	var amb *inventory.AmbiguousError
	if !errors.As(err, &amb) || len(amb.Candidates) != 2 {
		t.Fatalf("%s: %v, want an AmbiguousError with 2 candidates", what, err)
	}
}

// TestSharedUUIDIsAChange: a VM entering the scope is no change (a new
// VM is nobody's until a lookup asks for it), but it is announced
// (Findable); a clone that keeps its source's BIOS UUID is a change at once
// (the source's Node is now ambiguous), without waiting for anything to
// re-read every Node.
func TestSharedUUIDIsAChange(t *testing.T) {
	e := setup(t)
	inv := newInventory(t, e, inventory.Options{MaxWait: time.Second, StaleAfter: time.Hour, EagerDetailsMax: -1})
	vc := e.fleet.VCenter("vc-a")
	ix := inv.Index("vc-a")
	src := vc.VMs[0]

	// A first clone: once it is announced, the full read's own
	// notifications are past, and the index is quiet.
	findable := ix.Findable()
	_, err := vc.Clone(e.ctx, src.Ref, "first-clone", "")
	must.OK(t, err)
	poll.True(t, "Findable fired for the first clone", func() bool { return fired(findable) })

	changed, findable := ix.Changed(), ix.Findable()
	_, err = vc.Clone(e.ctx, src.Ref, "fresh-clone", "")
	must.OK(t, err)
	poll.True(t, "Findable fired for the new VM", func() bool { return fired(findable) })
	// Sync point: the update that announced it was applied before
	// Findable fired, and a change would have fired Changed first.
	if fired(changed) {
		t.Error("Changed fired for a new VM with its own UUID")
	}
	if _, err := inv.FindByUUID(e.ctx, src.UUID); err != nil {
		t.Fatalf("the source after a clone with a new UUID: %v", err)
	}

	changed = ix.Changed()
	twin, err := vc.Clone(e.ctx, src.Ref, "twin", src.UUID)
	must.OK(t, err)
	poll.True(t, "Changed fired for the clone sharing the source's UUID", func() bool { return fired(changed) })
	wantTwo(t, inv, src.UUID, "the source's UUID with its twin")

	// Its leaving is TestApplyIdentityChanges': vcsim, re-sending the
	// whole view when one of its VMs is deleted, may drop the leave.
	_ = twin
}

// TestSharedUUIDAcrossVCentersIsAChange: a copy of a VM of vc-a in vc-b
// that keeps its BIOS UUID (a restored or replicated copy, a cross-vCenter
// clone) is a change of vc-b's index at once: the Node of vc-a's VM is now
// ambiguous, and nothing else would re-observe it before the next
// resync (a new VM with its own UUID is no change where details are
// followed on demand).
func TestSharedUUIDAcrossVCentersIsAChange(t *testing.T) {
	e := setup(t)
	inv := newInventory(t, e, inventory.Options{MaxWait: time.Second, StaleAfter: time.Hour, EagerDetailsMax: -1})
	a, b := e.fleet.VCenter("vc-a"), e.fleet.VCenter("vc-b")
	ixB := inv.Index("vc-b")
	src := a.VMs[0]

	// A first clone with its own UUID: once it is announced, the full
	// read's own notifications are past, and the index is quiet.
	findable := ixB.Findable()
	_, err := b.Clone(e.ctx, b.VMs[0].Ref, "first-clone", "")
	must.OK(t, err)
	poll.True(t, "Findable fired for the first clone", func() bool { return fired(findable) })

	changed := ixB.Changed()
	_, err = b.Clone(e.ctx, b.VMs[0].Ref, "copy-of-a", src.UUID)
	must.OK(t, err)
	poll.True(t, "vc-b's Changed fired for the copy of vc-a's VM", func() bool { return fired(changed) })
	wantTwo(t, inv, src.UUID, "vc-a's VM's UUID with its copy in vc-b")
}
