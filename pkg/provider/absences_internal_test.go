package provider

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestAbsences: since when a VM has been proven gone at every check; a
// silence longer than absenceGap, or the VM found, starts over.
func TestAbsences(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	fake := clocktesting.NewFakePassiveClock(start)
	a := newAbsences(fake)
	steps := []struct {
		name  string
		step  time.Duration
		found bool // the VM found at this check instead
		since time.Time
	}{
		{name: "first proof", since: start},
		{name: "a check later", step: 5 * time.Second, since: start},
		{name: "at the gap", step: absenceGap, since: start},
		{name: "beyond the gap: starts over", step: absenceGap + time.Second, since: start.Add(5*time.Second + 2*absenceGap + time.Second)},
		{name: "found", step: time.Second, found: true},
		{name: "gone again: starts over", step: time.Second, since: start.Add(7*time.Second + 2*absenceGap + time.Second)},
	}
	for _, s := range steps {
		fake.SetTime(fake.Now().Add(s.step))
		if s.found {
			a.found("u")
			continue
		}
		since, now := a.proven("u")
		if !since.Equal(s.since) || !now.Equal(fake.Now()) {
			t.Errorf("%s: since %v (now %v), want %v", s.name, since, now, s.since)
		}
	}
	// Another VM's records, silent beyond the gap, are dropped.
	a.proven("other")
	fake.SetTime(fake.Now().Add(absenceGap + time.Second))
	a.proven("u")
	if _, ok := a.seen["other"]; ok || len(a.seen) != 1 {
		t.Errorf("records %v: the silent one kept", a.seen)
	}
}
