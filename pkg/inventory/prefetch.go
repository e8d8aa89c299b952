package inventory

import (
	"context"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// Prefetch reads ahead the details of the VM a lookup by method m for
// value would find, so that the lookup, made soon after (the node
// controller's, for a Node that just registered), finds them kept. It
// makes no request itself: the VM joins the next direct read of its
// vCenter, paced by Options.PrefetchInterval, so that Nodes registering
// together share one. It reports whether it found exactly one VM, with
// its details or read ahead now: a caller trying several methods stops
// there.
//
// Nothing is decided on the value's word: the lookup decides, and a value
// that names another VM (a kubelet's systemUUID is its own word) costs
// that VM's details at most, once. A VM found in two places, in an index
// that cannot answer now, or only in the pages of a first read, is left
// to the lookup. While an index is being read, the key is remembered: the
// read's completion reads the VMs of every key kept in one request.
func (inv *Inventory) Prefetch(ctx context.Context, m config.LookupMethod, value string) bool {
	lk, _, ok := keyFor(m, value)
	if !ok {
		return false
	}
	var found []match
	for _, ix := range inv.indexes {
		ix.interest.remember(lk)
		ix.store.read(func(d *data) {
			found = ix.matches(d, lk, found, false)
		})
	}
	if len(found) != 1 {
		return false
	}
	f := found[0]
	if f.detailed {
		return true
	}
	if !f.ix.answers() {
		return false
	}
	f.ix.interest.want(f.ref)
	f.ix.reader.prefetch(ctx, f.ref)
	return true
}
