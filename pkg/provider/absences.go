package provider

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// minAbsenceGap is the least silence between two proofs of a VM's absence
// after which its nodes.deletionDelay starts over (the gap is the larger
// of this and the delay). The node lifecycle controller asks about each
// NotReady Node once a pass, every --node-monitor-period (5 s by default)
// after the last pass ended, one Node at a time: a pass over many gone VMs
// (a host removed with its VMs) takes seconds per VM. A longer silence
// means the Node was Ready meanwhile, or this replica did not lead.
const minAbsenceGap = 5 * time.Minute

// absences remembers since when each VM, by BIOS UUID, has been proven
// gone and not found since (nodes.deletionDelay). It lives in memory: a
// new leader starts every delay over, which only keeps Nodes longer.
type absences struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	seen  map[string]absence
	// size is len(seen), read without the lock: every successful lookup
	// forgets its VM, and the map is nearly always empty.
	size atomic.Int64
}

type absence struct{ since, last time.Time }

func newAbsences(c clock.PassiveClock) *absences {
	return &absences{clock: c, seen: map[string]absence{}}
}

// proven records that the VM with BIOS UUID uuid is proven gone now and
// returns since when it has been, without being found in between nor a
// silence longer than gap; restarted says a silence started it over.
// Records silent longer than gap are dropped.
func (a *absences) proven(uuid string, gap time.Duration) (since, now time.Time, restarted bool) {
	uuid = strings.ToLower(uuid)
	a.mu.Lock()
	defer a.mu.Unlock()
	now = a.clock.Now()
	r, ok := a.seen[uuid]
	restarted = ok && now.Sub(r.last) > gap
	for k, s := range a.seen {
		if now.Sub(s.last) > gap {
			delete(a.seen, k)
		}
	}
	if !ok || restarted {
		r.since = now
	}
	r.last = now
	a.seen[uuid] = r
	a.size.Store(int64(len(a.seen)))
	return r.since, now, restarted
}

// found forgets the VM with BIOS UUID uuid, in either byte order (a
// Node's providerID may name it in the other): it exists.
func (a *absences) found(uuid string) {
	if a.size.Load() == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.seen, strings.ToLower(uuid))
	delete(a.seen, strings.ToLower(inventory.SwapUUID(uuid)))
	a.size.Store(int64(len(a.seen)))
}

// DeletionDelayedError: a Node's VM is proven gone, but not yet for
// nodes.deletionDelay; the Node is kept meanwhile.
type DeletionDelayedError struct {
	Node         string
	Since, Until time.Time
	Delay        time.Duration
}

func (e *DeletionDelayedError) Error() string {
	return fmt.Sprintf("node %s: its VM is gone (its BIOS UUID is in no vCenter), first proven at %s and not found since; the Node is kept until %s (nodes.deletionDelay %s), and for good if the VM comes back before",
		e.Node, e.Since.UTC().Format(time.RFC3339), e.Until.UTC().Format(time.RFC3339), e.Delay)
}
