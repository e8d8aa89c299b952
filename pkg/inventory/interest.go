package inventory

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/vim25/types"
)

// interest is the set of VMs whose details the collector follows (the
// Nodes' VMs; every VM in eager mode), and what the sync loop still has to
// change in its list view. mu guards every field but wantCh (a channel)
// and allDetails (set once). Lookups add to it; the sync loop applies it
// to the list view between polls, and prunes it when VMs leave. It never
// looks at the data: callers pass what they read from it.
type interest struct {
	allDetails bool          // every VM's details are read: no list view, no interest
	wantCh     chan struct{} // signalled when pending grows

	mu       sync.Mutex
	set      map[string]bool // the VMs of interest, by reference value
	pending  map[string]bool // to add to the list view
	dropping map[string]bool // to remove from the list view: left the scope
	polling  *collector      // the collector whose long poll is under way, if any
	lastAdd  time.Time       // when VMs were last added to the list view
	eager    bool            // the vCenter has at most EagerDetailsMax VMs: every VM is of interest
	// collecting: a full read is under way; the keys of the lookups made
	// meanwhile are kept in wanted, resolved when it completes.
	collecting bool
	wanted     []lookupKey
	// reading mirrors collecting, for remember's check without the lock:
	// a lookup that sees it false runs after the read's takeWanted, or
	// before its beginFullRead, and finds the data either way.
	reading atomic.Bool
}

func newInterest(allDetails bool) *interest {
	in := &interest{allDetails: allDetails, wantCh: make(chan struct{}, 1), set: map[string]bool{},
		pending: map[string]bool{}, dropping: map[string]bool{}, collecting: true}
	in.reading.Store(true)
	return in
}

// maxWanted bounds the keys remembered while an index is being read.
const maxWanted = 100000

// want adds VMs to the interest.
func (in *interest) want(refs ...string) {
	if in.allDetails {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.wantLocked(refs...)
}

func (in *interest) wantLocked(refs ...string) {
	grew := false
	for _, r := range refs {
		if in.set[r] {
			continue
		}
		in.set[r] = true
		in.pending[r] = true
		grew = true
	}
	if grew {
		select {
		case in.wantCh <- struct{}{}:
		default:
		}
	}
}

// of returns those of refs that are of interest (all, with allDetails).
func (in *interest) of(refs []string) []string {
	if in.allDetails {
		return refs
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.DeleteFunc(refs, func(r string) bool { return !in.set[r] })
}

// wantIfEager adds VMs created since the full read, in eager mode.
func (in *interest) wantIfEager(refs ...string) {
	if in.allDetails || len(refs) == 0 {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.eager {
		in.wantLocked(refs...)
	}
}

// forget drops VMs from the interest: they left the scope (deleted, or
// moved out of the configured datacenters). A VM the eager mode or a
// lookup wants again is added again.
func (in *interest) forget(refs ...string) {
	if len(refs) == 0 {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, r := range refs {
		in.forgetLocked(r)
	}
}

func (in *interest) forgetLocked(r string) {
	if !in.set[r] {
		return
	}
	delete(in.set, r)
	if in.pending[r] {
		delete(in.pending, r) // never added to the view
		return
	}
	in.dropping[r] = true
}

// remember keeps a lookup's key while a full read is under way.
func (in *interest) remember(k lookupKey) {
	if in.allDetails || !in.reading.Load() { // every lookup of every index: no lock when idle
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.collecting && len(in.wanted) < maxWanted {
		in.wanted = append(in.wanted, k)
	}
}

// beginFullRead starts keeping lookups' keys.
func (in *interest) beginFullRead() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.collecting = true
	in.reading.Store(true)
}

// takeWanted stops keeping lookups' keys and returns those kept: call it
// after the full read's data is installed, so that every lookup either
// found the new data or left its key here.
func (in *interest) takeWanted() []lookupKey {
	in.mu.Lock()
	defer in.mu.Unlock()
	keys := in.wanted
	in.wanted, in.collecting = nil, false
	in.reading.Store(false)
	return keys
}

// afterFullRead brings the interest in line with a full read: the VMs of
// interest not in scope (deleted, or moved out of scope while no
// collector followed them) are forgotten, so that no list view is asked
// for them; want (the VMs the lookups made during the read found) is
// added; in eager mode every VM in scope is. inScope maps every VM in
// scope to whether it is a VM (not a template).
func (in *interest) afterFullRead(inScope map[string]bool, want []string, eager bool) {
	if in.allDetails {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for r := range in.set {
		if _, ok := inScope[r]; !ok {
			in.forgetLocked(r)
		}
	}
	in.wantLocked(want...)
	in.eager = eager
	if eager {
		for r, vm := range inScope {
			if vm {
				in.wantLocked(r)
			}
		}
	}
}

// restart returns every VM of interest, for a new list view, and clears
// what the old view still had to change.
func (in *interest) restart() []types.ManagedObjectReference {
	in.mu.Lock()
	defer in.mu.Unlock()
	clear(in.pending)
	clear(in.dropping)
	return vmRefs(in.set)
}

// changes returns what the list view has to add and remove; VMs are
// added at most once per every (see Options.FollowInterval). With nothing
// to change now, st is recorded as polling, so that the next VM asked for
// (or the interval's end) interrupts its poll.
func (in *interest) changes(st *collector, now time.Time, every time.Duration) (add, drop []types.ManagedObjectReference) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.untilDueLocked(now, every) > 0 {
		if len(in.pending) > 0 {
			// Held back: the interrupter ends the poll at the interval's
			// end (it may have taken the last signal before this).
			select {
			case in.wantCh <- struct{}{}:
			default:
			}
		}
	} else {
		add = vmRefs(in.pending)
	}
	if len(add) == 0 && len(in.dropping) == 0 {
		in.polling = st
		return nil, nil
	}
	return add, vmRefs(in.dropping)
}

// untilDue is how long until VMs may be added to the list view again.
func (in *interest) untilDue(now time.Time, every time.Duration) time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.untilDueLocked(now, every)
}

func (in *interest) untilDueLocked(now time.Time, every time.Duration) time.Duration {
	if in.lastAdd.IsZero() || every <= 0 {
		return 0
	}
	return every - now.Sub(in.lastAdd)
}

// removed records VMs removed from the list view.
func (in *interest) removed(refs []types.ManagedObjectReference) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, r := range refs {
		delete(in.dropping, r.Value)
	}
}

// added records VMs added to the list view at now; gone are those the
// view refused because they no longer exist.
func (in *interest) added(refs, gone []types.ManagedObjectReference, now time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.lastAdd = now
	for _, r := range refs {
		delete(in.pending, r.Value)
	}
	for _, r := range gone {
		in.forgetLocked(r.Value)
		delete(in.dropping, r.Value) // never in the view
	}
}

// dueCollector returns the collector whose poll is under way when VMs
// wait to be added and may be now; else nil (nothing to interrupt).
func (in *interest) dueCollector(now time.Time, every time.Duration) *collector {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.pending) == 0 || in.untilDueLocked(now, every) > 0 {
		return nil
	}
	return in.polling
}

// polled records that the poll under way has ended.
func (in *interest) polled() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.polling = nil
}

func vmRefs(set map[string]bool) []types.ManagedObjectReference {
	out := make([]types.ManagedObjectReference, 0, len(set))
	for r := range set {
		out = append(out, types.ManagedObjectReference{Type: "VirtualMachine", Value: r})
	}
	return out
}
