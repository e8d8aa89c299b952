package provider

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// absenceGap is the longest time between two proofs of a VM's absence
// that still counts as proven throughout (nodes.deletionDelay): the node
// lifecycle controller asks about a NotReady Node every
// --node-monitor-period (5 s by default). A longer silence (the Node was
// Ready meanwhile, or this replica was not the leader) starts over.
const absenceGap = time.Minute

// absences remembers since when each VM, by BIOS UUID, has been proven
// gone at every check (nodes.deletionDelay). It lives in memory: a new
// leader starts every delay over, which only keeps Nodes longer.
type absences struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	seen map[string]absence
}

type absence struct{ since, last time.Time }

func newAbsences(c clock.PassiveClock) *absences {
	return &absences{clock: c, seen: map[string]absence{}}
}

// proven records that the VM with BIOS UUID uuid is proven gone now and
// returns since when it has been, at every check. Records older than the
// gap are dropped, so the map holds only VMs being proven gone.
func (a *absences) proven(uuid string) (since, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now = a.clock.Now()
	for k, r := range a.seen {
		if now.Sub(r.last) > absenceGap {
			delete(a.seen, k)
		}
	}
	r, ok := a.seen[uuid]
	if !ok {
		r.since = now
	}
	r.last = now
	a.seen[uuid] = r
	return r.since, now
}

// found forgets the VM with BIOS UUID uuid: it exists, or its absence is
// no longer proven.
func (a *absences) found(uuid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.seen, uuid)
}

// DeletionDelayedError: a Node's VM is proven gone, but not yet for
// nodes.deletionDelay; the Node is kept meanwhile.
type DeletionDelayedError struct {
	Node         string
	Since, Until time.Time
	Delay        time.Duration
}

func (e *DeletionDelayedError) Error() string {
	return fmt.Sprintf("node %s: its VM is gone (its BIOS UUID is in no vCenter), proven at every check since %s; the Node is kept until %s (nodes.deletionDelay %s), and for good if the VM comes back before",
		e.Node, e.Since.UTC().Format(time.RFC3339), e.Until.UTC().Format(time.RFC3339), e.Delay)
}
