package inventory

import (
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/notify"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// syncStatus is how current an index's data is: whether a full read has
// completed, whether one is under way again, how the last update round
// ended and when. mu guards every field but the notifier (which locks
// itself) and the clock (set once). The sync loop writes it; lookups and
// Status read it. It never looks at the data: a full read installs its
// data first and marks itself complete after, so a reader that sees
// "synced" sees the new data.
type syncStatus struct {
	clock clock.Clock

	mu        sync.Mutex
	synced    bool // a full read has completed once
	resyncing bool // a full read is under way after a new session or a lost collector
	// objectsRead: before the first full read completes, the data's
	// objects are the hosts, clusters, folders, datacenters and pools
	// read on their own (see readObjects); its VMs are still empty.
	objectsRead bool
	objectsAt   time.Time // when they were read
	// objectsFollow: the objects were read ahead of the collector whose
	// pages arrive now, so its pages keep them valid; a failed round ends
	// it (the next collector reads them again, or they expire).
	objectsFollow bool
	// firstRead: the first full read is under way on a collector (since
	// readingAt); lastPage is when its last page arrived. While pages
	// arrive, its pages answer lookups and the objects read ahead stay
	// valid (see pagesArriving).
	firstRead bool
	readingAt time.Time
	lastPage  time.Time
	fullReads uint64    // full reads completed
	err       error     // the last update round failed
	at        time.Time // last successful update round

	current notify.Notifier // at the next completed full read, or when updates resume
}

// snapshot is a copy of the status, read under one lock.
type snapshot struct {
	synced, resyncing bool
	err               error
	at                time.Time
}

func (s *syncStatus) snapshot() snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot{synced: s.synced, resyncing: s.resyncing, err: s.err, at: s.at}
}

// hasSynced reports whether a full read has completed once.
func (s *syncStatus) hasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

// objectsKnown reports whether the data's objects may place a VM: a full
// read has completed, or the objects were read ahead less than staleAfter
// ago, or the first read they were read ahead of has had a page within
// staleAfter (it is making progress on the same collector; a read that
// keeps failing lets them expire).
func (s *syncStatus) objectsKnown(staleAfter time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced {
		return true
	}
	if !s.objectsRead {
		return false
	}
	last := s.objectsAt
	if s.firstRead && s.objectsFollow && s.lastPage.After(last) {
		last = s.lastPage
	}
	return staleAfter <= 0 || s.clock.Since(last) <= staleAfter
}

// pagesArriving reports whether the first full read is under way and
// has not failed since it began or since its last page. Its pages then
// answer lookups, and a miss in them waits for the next pages, searched
// directly only within the budget (Options.FirstReadSearches). However
// long the vCenter takes for a page (the first of a big vCenter's read is
// the slowest: the vCenter computes the whole view first), that is no
// reason to search it for every lookup: a read that is stuck ends with
// its request's timeout, a failure. limit (Options.PageTimeout) bounds a
// read that went without a page and without a failure.
func (s *syncStatus) pagesArriving(limit time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.readingAt
	if s.lastPage.After(last) {
		last = s.lastPage
	}
	return !s.synced && s.firstRead && !last.IsZero() && s.clock.Since(last) <= limit
}

// pageRead records a page of the first full read: the read makes
// progress, so the failure that preceded it (a first connection, a
// collector lost) is no longer the index's state.
func (s *syncStatus) pageRead() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced {
		return
	}
	s.lastPage = s.clock.Now()
	s.err = nil
}

// objectsReadAhead records that the objects were read ahead of the first
// full read, unless it has completed (then they were not installed).
func (s *syncStatus) objectsReadAhead() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced {
		return
	}
	s.objectsRead = true
	s.objectsAt = s.clock.Now()
	s.objectsFollow = true
}

// beginFullRead marks the data as being read again: until the read
// completes, the old data may still answer "present" but not "absent".
func (s *syncStatus) beginFullRead() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resyncing = s.synced
	s.firstRead = !s.synced
	if s.firstRead {
		s.readingAt, s.lastPage = s.clock.Now(), time.Time{}
	}
}

// fullReadDone records a completed full read: the data is current.
func (s *syncStatus) fullReadDone() {
	s.mu.Lock()
	s.synced = true
	s.objectsRead = false // the data's objects are the full read's now
	s.firstRead = false
	s.fullReads++
	s.resyncing = false
	s.err = nil
	s.at = s.clock.Now()
	s.mu.Unlock()
	s.current.Notify()
}

// roundDone records a successful update round; if the index was failing,
// it is current again and waiters on current are woken. Before the first
// full read it records nothing.
func (s *syncStatus) roundDone() {
	s.mu.Lock()
	if !s.synced {
		s.mu.Unlock()
		return
	}
	failing := s.err != nil
	s.err = nil
	s.at = s.clock.Now()
	wake := failing && !s.resyncing
	s.mu.Unlock()
	if wake {
		s.current.Notify()
	}
}

// roundFailed records a failed update round and reports whether it is
// the first failure of a run (the previous round succeeded, or only
// waited for a first connection).
func (s *syncStatus) roundFailed(err error) (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first = s.err == nil || errors.Is(s.err, vcenter.ErrNotConnectedYet)
	s.err = err
	// A first read that failed a page is not making progress: lookups
	// search directly again until its next page, and the objects read
	// ahead expire StaleAfter after their read unless read again.
	s.readingAt, s.lastPage = time.Time{}, time.Time{}
	s.objectsFollow = false
	return first
}

func (s *syncStatus) fullReadCount() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fullReads
}
