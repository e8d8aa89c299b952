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

// TestSharedUUIDIsAChange: a VM entering the scope is no change (a new
// VM is nobody's until a lookup asks for it), but it is announced
// (Entered); a clone that keeps its source's BIOS UUID is a change at once
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
	entered := ix.Findable()
	_, err := vc.Clone(e.ctx, src.Ref, "first-clone", "")
	must.OK(t, err)
	poll.True(t, "Findable fired for the first clone", func() bool { return fired(entered) })

	changed, entered := ix.Changed(), ix.Findable()
	_, err = vc.Clone(e.ctx, src.Ref, "fresh-clone", "")
	must.OK(t, err)
	poll.True(t, "Findable fired for the new VM", func() bool { return fired(entered) })
	// Sync point: the update that announced it was applied before
	// Entered fired, and a change would have fired Changed first.
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
	_, err = inv.FindByUUID(e.ctx, src.UUID)
	var amb *inventory.AmbiguousError
	if !errors.As(err, &amb) || len(amb.Candidates) != 2 {
		t.Fatalf("the source's UUID with its twin: %v, want an AmbiguousError with 2 candidates", err)
	}

	// Its leaving is TestApplyIdentityChanges': vcsim, re-sending the
	// whole view when one of its VMs is deleted, may drop the leave.
	_ = twin
}
