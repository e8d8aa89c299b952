package inventory

import (
	"sync"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/notify"
)

// store holds an index's data. mu guards the data pointer and every map
// in the data it points to; the notifier locks itself. Writers: the sync
// loop (a full read installed, updates applied, the objects read ahead of
// the first full read) and Index.detail (details read directly). Readers
// take copies (data.complete) before the lock is released: nothing read
// from the data outlives the lock.
type store struct {
	mu   sync.RWMutex
	data *data
	// pages is the first full read's data so far, while it is under way
	// (nil otherwise): the pages it has applied answer lookups before it
	// completes (see Index.lookup).
	pages   *data
	changed notify.Notifier // details, identities or objects changed, or a full read was installed
	// paged is notified after each page of a first full read.
	paged notify.Notifier
	// findable is notified when VMs became findable (see findKeys) in
	// an update, after the first full read.
	findable notify.Notifier
}

func newStore() *store { return &store{data: newData()} }

// read calls fn with the data, read-locked.
func (s *store) read(fn func(d *data)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.data)
}

// write calls fn with the data, locked; if fn reports a change, waiters
// on changed are woken.
func (s *store) write(fn func(d *data) (changed bool)) {
	s.mu.Lock()
	changed := fn(s.data)
	s.mu.Unlock()
	if changed {
		s.changed.Notify()
	}
}

// readPages calls fn with the first full read's data so far (nil when
// none is under way), read-locked.
func (s *store) readPages(fn func(d *data)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.pages)
}

// beginPages makes d, a first full read's staging data, readable by
// lookups as its pages are applied (applyPage).
func (s *store) beginPages(d *data) {
	s.mu.Lock()
	s.pages = d
	s.mu.Unlock()
}

// applyPage calls fn, which applies a page to the staging data d. When
// d is a first read's published pages (lookups may be reading it), fn
// runs locked and the waiters on paged are woken after; otherwise (a
// resync: nothing else reads d) without the lock. Only the sync loop
// changes pages, so the check cannot go stale.
func (s *store) applyPage(d *data, fn func()) {
	s.mu.RLock()
	published := s.pages == d
	s.mu.RUnlock()
	if !published {
		fn()
		return
	}
	s.mu.Lock()
	fn()
	s.mu.Unlock()
	s.paged.Notify()
}

// install replaces the data with a full read's (without the details of
// VMs no longer in scope), and ends the pages of a first read: d may be
// them, so it is changed under the lock. It wakes no waiter: the index
// does, once its status says the data is current.
func (s *store) install(d *data) {
	s.mu.Lock()
	d.dropStrayDetails()
	s.data = d
	s.pages = nil
	s.mu.Unlock()
}
