package provider_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// TestDeletionDelay: with nodes.deletionDelay, a VM proven gone is
// reported gone only once it has been proven gone, and not found since,
// for the delay, with checks (the node lifecycle controller's) up to the
// gap apart; a VM that comes back (a VM registered again with its UUID)
// starts it over, and so does a silence longer than the gap.
func TestDeletionDelay(t *testing.T) {
	e := stretched(t, "labels:\n  zone: k8s-zone\n  region: k8s-region\nnodes:\n  deletionDelay: 10m\n", nil)
	fake := clocktesting.NewFakeClock(time.Now())
	e.p.SetAbsenceClock(fake)
	const uuid = "4299ffff-0000-4000-8000-0000000000aa"
	ghost := ghost("ghost", uuid)
	delayedSince := func(at string) time.Time {
		t.Helper()
		ok, err := e.p.InstanceExists(e.ctx, ghost)
		var de *provider.DeletionDelayedError
		if ok || !errors.As(err, &de) {
			t.Fatalf("%s: InstanceExists = %v, %v; want a DeletionDelayedError", at, ok, err)
		}
		return de.Since
	}
	start := fake.Now()
	for i, step := range []time.Duration{0, 3 * time.Minute, 5 * time.Minute} { // passes slower than a minute
		fake.Step(step)
		if since := delayedSince(fmt.Sprintf("check %d", i)); !since.Equal(start) {
			t.Fatalf("check %d: since %v, want %v", i, since, start)
		}
	}
	fake.Step(2 * time.Minute) // 10 minutes in
	if ok, err := e.p.InstanceExists(e.ctx, ghost); ok || err != nil {
		t.Fatalf("after the delay: InstanceExists = %v, %v; want false (gone)", ok, err)
	}

	// A silence beyond the gap (the delay, 10 minutes): starts over.
	fake.Step(11 * time.Minute)
	if since := delayedSince("after a silence"); !since.Equal(fake.Now()) {
		t.Errorf("after a silence: since %v, want %v", since, fake.Now())
	}

	// The VM comes back (registered again: a VM with its UUID), then goes.
	b := e.fleet.VCenter("vc-b")
	vm := b.VMs[0]
	b.SetUUID(vm.Ref, uuid)
	poll.True(t, "the VM back", func() bool {
		ok, err := e.p.InstanceExists(e.ctx, ghost)
		return ok && err == nil
	})
	b.SetUUID(vm.Ref, vm.UUID)
	fake.Step(30 * time.Second) // within the gap: only the VM found starts it over
	poll.True(t, "the VM gone again, delayed from now", func() bool {
		ok, err := e.p.InstanceExists(e.ctx, ghost)
		var de *provider.DeletionDelayedError
		return !ok && errors.As(err, &de) && de.Since.Equal(fake.Now())
	})
}
