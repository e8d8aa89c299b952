package provider

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// TestAbsences: since when a VM has been proven gone and not found since;
// checks further apart than a pass of the lifecycle controller may take
// keep it, a silence longer than the gap or the VM found (in either byte
// order, in any case) starts it over.
func TestAbsences(t *testing.T) {
	const uuid = "4211a1b2-0000-4000-8000-000000000001"
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	fake := clocktesting.NewFakePassiveClock(start)
	a := newAbsences(fake)
	const gap = 10 * time.Minute
	at := func(d time.Duration) time.Time { return start.Add(d) }
	steps := []struct {
		name      string
		at        time.Duration
		found     string // the VM found at this check instead, by this UUID
		since     time.Time
		restarted bool
	}{
		{name: "first proof", since: start},
		{name: "a check later", at: 5 * time.Second, since: start},
		{name: "after a slow pass", at: 3 * time.Minute, since: start},
		{name: "at the gap", at: 13 * time.Minute, since: start},
		{name: "beyond the gap: starts over", at: 23*time.Minute + time.Second, since: at(23*time.Minute + time.Second), restarted: true},
		{name: "found in the other byte order", at: 24 * time.Minute, found: inventory.SwapUUID(uuid)},
		{name: "gone again: starts over", at: 25 * time.Minute, since: at(25 * time.Minute)},
		{name: "found in upper case", at: 26 * time.Minute, found: "4211A1B2-0000-4000-8000-000000000001"},
		{name: "gone again, in upper case", at: 27 * time.Minute, since: at(27 * time.Minute)},
	}
	for _, s := range steps {
		fake.SetTime(at(s.at))
		if s.found != "" {
			a.found(s.found)
			continue
		}
		key := uuid
		if s.name == "gone again, in upper case" {
			key = "4211A1B2-0000-4000-8000-000000000001"
		}
		since, now, restarted := a.proven(key, gap)
		if !since.Equal(s.since) || !now.Equal(fake.Now()) || restarted != s.restarted {
			t.Errorf("%s: since %v (now %v, restarted %v), want %v (restarted %v)", s.name, since, now, restarted, s.since, s.restarted)
		}
	}
	// Another VM's record, silent beyond the gap, is dropped.
	a.proven("other", gap)
	fake.SetTime(fake.Now().Add(gap + time.Second))
	a.proven(uuid, gap)
	if _, ok := a.seen["other"]; ok || len(a.seen) != 1 || a.size.Load() != 1 {
		t.Errorf("records %v (size %d): the silent one kept", a.seen, a.size.Load())
	}
}
