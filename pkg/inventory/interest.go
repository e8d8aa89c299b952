package inventory

// The interest: the VMs whose details the collector follows (the Nodes'
// VMs; every VM in eager mode). Changed under Index.mu; the sync loop
// applies pending and dropping to its list view between polls.

// wantLocked adds a VM to the interest.
func (ix *Index) wantLocked(r string) {
	if ix.allDetails || ix.interest[r] {
		return
	}
	ix.interest[r] = true
	ix.pending[r] = true
	select {
	case ix.wantCh <- struct{}{}:
	default:
	}
}

// forgetLocked drops a VM from the interest: it left the scope (deleted,
// or moved out of the configured datacenters). A VM the eager mode or a
// lookup wants again is added again.
func (ix *Index) forgetLocked(r string) {
	if !ix.interest[r] {
		return
	}
	delete(ix.interest, r)
	if ix.pending[r] {
		delete(ix.pending, r) // never added to the view
		return
	}
	ix.dropping[r] = true
}
