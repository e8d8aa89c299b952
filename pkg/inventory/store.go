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
	mu      sync.RWMutex
	data    *data
	changed notify.Notifier // details, identities or objects changed, or a full read was installed
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

// install replaces the data with a full read's. It wakes no waiter:
// the index does, once its status says the data is current.
func (s *store) install(d *data) {
	s.mu.Lock()
	s.data = d
	s.mu.Unlock()
}
