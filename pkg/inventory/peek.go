package inventory

import (
	"strings"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// Peek says what a lookup by method m for value would find now, without
// a request and without remembering anything: found, some index that can
// answer holds the key (in its data, or in the pages its first read has
// read so far);
// settled, no index would make the lookup wait (each is current, or would
// be searched directly). A lookup that failed for want of a read is worth
// retrying once found or settled (a page with its VM arrived, a read
// completed, a vCenter came back), not at every page of every vCenter.
func (inv *Inventory) Peek(m config.LookupMethod, value string) (found, settled bool) {
	lk, searchable, ok := keyFor(m, value)
	if !ok {
		return false, true // answered at once: nothing to look up
	}
	settled = true
	for _, ix := range inv.indexes {
		found = found || ix.holds(lk)
		ok, _, _ := ix.Status()
		if !ok && !(searchable && ix.searchedOnMiss()) {
			settled = false
		}
	}
	return found, settled
}

// keyFor returns the key a lookup by method m for value searches, and
// whether a miss is searched directly where an index is not current; ok
// is false when there is nothing to look up (not a UUID, an unknown
// method). Peek and Prefetch agree with the Find methods through it.
func keyFor(m config.LookupMethod, value string) (lk lookupKey, searchable, ok bool) {
	switch m {
	case config.LookupUUID:
		k, err := uuidLookup(value)
		if err != nil {
			return lookupKey{}, false, false
		}
		return k, true, true
	case config.LookupVMName:
		return lookupKey{name: value}, false, true
	case config.LookupGuestHostname:
		return lookupKey{host: strings.ToLower(value)}, true, true
	}
	return lookupKey{}, false, false
}

// holds reports whether a lookup with key k would find a VM (not a
// template) here and be answered: in the index's data while it answers,
// or in its first read's pages while they answer (see find).
func (ix *Index) holds(k lookupKey) (found bool) {
	has := func(d *data) {
		if d == nil {
			return
		}
		found = len(k.vms(d)) > 0
	}
	if ix.answers() {
		ix.store.read(has)
	} else if !ix.HasSynced() && ix.pagesAnswer() {
		ix.store.readPages(has)
	}
	return found
}
