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
	var lk lookupKey
	searchable := false // a miss is searched directly where an index is not current
	switch m {
	case config.LookupUUID:
		_, k, err := uuidLookup(value)
		if err != nil {
			return false, true // answered at once: not a UUID
		}
		lk, searchable = k, true
	case config.LookupVMName:
		lk = lookupKey{name: value}
	case config.LookupGuestHostname:
		lk, searchable = lookupKey{host: strings.ToLower(value)}, true
	default:
		return false, true
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
