package inventory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Run keeps the index current until ctx ends: a full read (in pages of
// at most maxObjectUpdates objects, each page its own request with its own
// timeout), then incremental updates (long polls of at most maxWait).
//
// A failed round keeps the collector and its version, so the next round
// continues where the last one stopped (a page, or the updates since the
// last version); only a new session, or a fault about the collector
// itself, starts a new full read, during which the index says it is not
// complete. While the vCenter is down the loop waits for its health to
// change instead of polling.
func (ix *Index) Run(ctx context.Context, maxWait time.Duration) {
	ix.log = klog.FromContext(ctx).WithName("inventory").WithValues("vcenter", ix.VCenter())
	var wg sync.WaitGroup
	var st *collector
	defer func() {
		if st != nil {
			st.close(ctx)
		}
		wg.Wait()
	}()
	if !ix.allDetails {
		wg.Go(func() { ix.interruptForInterest(ctx) })
	}
	bo := retryBackoff()
	for ctx.Err() == nil {
		health := ix.client.HealthChanged()
		err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
			if st != nil && st.session.VIM != s.VIM { // a new SOAP session (a renewed vAPI session keeps it)
				old := st
				st = nil
				ix.store.beginPages(nil) // its pages are no longer read
				go old.close(ctx)        // best effort: the collector may be gone with its session
			}
			if st == nil {
				var err error
				if st, err = ix.newCollector(ctx, s); err != nil {
					st = nil
					return err
				}
				ix.status.beginFullRead()
				ix.interest.beginFullRead()
			}
			return ix.waitOnce(ctx, st, maxWait)
		})
		if err == nil {
			bo = retryBackoff()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if st != nil && !isTransient(err) {
			old := st
			st = nil
			ix.store.beginPages(nil) // its pages are no longer read
			go old.close(ctx)
		}
		first := ix.status.roundFailed(err)
		switch {
		case errors.Is(err, vcenter.ErrNotConnectedYet):
			// Start-up: the first read begins when the vCenter connects.
		case first:
			ix.log.Error(err, "Inventory updates failed; lookups in this vCenter cannot say a VM is absent until they recover")
		}
		// A vCenter that is down: nothing to do until its health changes.
		// One that answered with a fault: retry after a back-off too.
		d := bo.Step()
		if errors.Is(err, vcenter.ErrUnavailable) {
			d = 0
		}
		if vcenter.Pause(ctx, ix.clock, d, health) != nil {
			return
		}
	}
}

// retryBackoff paces retries of failed update rounds on a vCenter that is
// up (a fault, not an outage): 1s doubling to 10s.
func retryBackoff() *wait.Backoff {
	return vcenter.Backoff(time.Second, 10*time.Second)
}

// isTransient reports whether a failed round may be retried on the same
// collector: the request did not reach the vCenter or timed out. A fault
// (for example about the collector or its version) starts over.
func isTransient(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, vcenter.ErrUnavailable) || errors.As(err, &ne)
}

// maxObjectUpdates bounds one page of the full read (a vCenter may page
// smaller: the simulator and vCenter's default is 100).
const maxObjectUpdates = 1000

// waitOnce makes one WaitForUpdatesEx call and applies what it returns:
// a page of the full read to st's staging data, installed when the last
// page arrives; or, once the index is current, the updates to its data.
func (ix *Index) waitOnce(ctx context.Context, st *collector, maxWait time.Duration) error {
	if st.version == "" {
		st.staging = newData() // the first call returns the full state at once
		if !ix.HasSynced() {
			ix.store.beginPages(st.staging) // lookups read its pages as they arrive
		}
	}
	if added, err := ix.addPending(ctx, st); err != nil || added {
		return err // added: poll again, which returns their details
	}
	set, err := ix.poll(ctx, st, maxWait)
	if err != nil || set == nil {
		return err
	}
	st.version = set.Version
	if st.staging != nil {
		ix.store.applyPage(st.staging, func() { st.staging.applyPage(set, st.details, ix.specOptions()) })
		ix.status.pageRead()
		if set.Truncated != nil && *set.Truncated {
			return nil // more pages to come
		}
		ix.installFullRead(ctx, st.staging)
		st.staging = nil
		return nil
	}
	ix.applyIncrement(set, st.details)
	return nil
}

// poll makes one WaitForUpdatesEx call on st: at once during a full read,
// otherwise waiting up to maxWait. A nil set with a nil error: nothing
// changed within maxWait (the index is current), or the poll was
// interrupted to add VMs of interest.
func (ix *Index) poll(ctx context.Context, st *collector, maxWait time.Duration) (*types.UpdateSet, error) {
	secs := int32(maxWait / time.Second)
	if st.version == "" {
		secs = 0 // the first call returns the full state at once (in pages, at once too)
	}
	res, err := methods.WaitForUpdatesEx(ctx, st.session.VIM, &types.WaitForUpdatesEx{
		This: st.pc.Reference(), Version: st.version,
		Options: &types.WaitOptions{MaxWaitSeconds: &secs, MaxObjectUpdates: maxObjectUpdates},
	})
	ix.interest.polled()
	switch {
	case isCanceled(err):
		return nil, nil // interrupted to add VMs of interest
	case err != nil:
		return nil, err
	case res.Returnval == nil:
		ix.status.roundDone()
		return nil, nil
	}
	return res.Returnval, nil
}

// installFullRead makes a completed full read the index's data, brings
// the interest in line with it, and marks the index current. The VMs the
// lookups made during the read look for are read ahead, together.
func (ix *Index) installFullRead(ctx context.Context, d *data) {
	ix.store.install(d)
	// The lookups made until now found nothing, or left their key.
	keys := ix.interest.takeWanted()
	var (
		inScope map[string]bool // every VM in scope: is it a VM (not a template)
		want    []string
		ahead   []string // want's VMs, not templates: read ahead
		n       int
	)
	ix.store.read(func(d *data) {
		n = len(d.vms)
		inScope = make(map[string]bool, n)
		for r, id := range d.vms {
			inScope[r] = !id.template
		}
		for _, k := range keys {
			for _, id := range k.idents(d) {
				want = append(want, id.ref)
				if !id.template {
					ahead = append(ahead, id.ref)
				}
			}
		}
	})
	// A vCenter of moderate size: keep every VM's details (one request
	// adds them all), so that no lookup ever waits for them.
	eager := !ix.allDetails && n <= ix.eagerMax
	ix.interest.afterFullRead(inScope, want, eager)
	if !eager && !ix.allDetails && len(ahead) > 0 {
		ix.reader.prefetch(ctx, ahead...)
	}
	ix.status.fullReadDone()
	// Woken only now: a consumer woken by a change must find the index
	// current.
	ix.store.changed.Notify()
	ix.log.V(1).Info("Inventory synced", "vms", n)
}

// applyIncrement applies updates to the index's data and the interest:
// VMs that left the scope are no longer followed; in eager mode, VMs that
// became findable (entered it, or templates made VMs) are.
func (ix *Index) applyIncrement(set *types.UpdateSet, details types.ManagedObjectReference) {
	var res applied
	ix.store.write(func(d *data) bool {
		res = d.apply(set, details, ix.specOptions())
		for _, r := range res.detailed {
			if d.vms[r] == nil { // details of a VM that left the scope
				delete(d.details, r)
				res.left = append(res.left, r)
			}
		}
		return res.changed
	})
	ix.interest.forget(res.left...)
	ix.interest.wantIfEager(res.findable...)
	ix.status.roundDone()
	if !res.changed && ix.sharedElsewhere(res.uuids) {
		ix.store.changed.Notify()
	}
	if len(res.findable) > 0 {
		ix.store.findable.Notify()
	}
}

// sharedElsewhere reports whether another vCenter's index has a VM (not a
// template) with one of uuids (either byte order): a VM that joined or
// left one of them here made that VM's lookups ambiguous, or answerable
// again. The copy of a VM in another vCenter that keeps its BIOS UUID (a
// restored or replicated copy, a cross-vCenter clone) is then a change at
// once, as a copy within one vCenter is (data.sharedUUID), not at the next
// lookup of its Node. Called with no store lock held: it takes the
// others'.
func (ix *Index) sharedElsewhere(uuids []uuidKey) bool {
	if len(uuids) == 0 {
		return false
	}
	for _, other := range ix.siblings {
		if other == ix {
			continue
		}
		found := false
		other.store.read(func(d *data) {
			for _, k := range uuids {
				if d.vmsWithUUID(k) > 0 {
					found = true
					return
				}
			}
		})
		if found {
			return true
		}
	}
	return false
}

// interruptForInterest ends the long poll under way whenever VMs are
// asked for, or at the end of the FollowInterval after the last addition,
// until ctx ends: the sync loop then adds them to the list view
// (addPending, at most once per interval, also when a poll ends on its
// own) and polls again, which returns their details at once. The list view is modified only between
// polls, never during one: the simulator's property collector deadlocks
// when a list view changes while a poll re-reads it, and one writer keeps
// the collector simple.
func (ix *Index) interruptForInterest(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ix.interest.wantCh:
		}
		// The VMs asked for within the interval wait for its end, together.
		if wait := ix.interest.untilDue(ix.clock.Now(), ix.followEvery); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-ix.clock.After(wait):
			}
		}
		st := ix.interest.dueCollector(ix.clock.Now(), ix.followEvery)
		if st == nil {
			continue // the loop adds the pending VMs before its next poll
		}
		_ = ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
			if s.VIM != st.session.VIM {
				return nil // the collector is being replaced; the next one takes every VM of interest
			}
			_, err := methods.CancelWaitForUpdates(ctx, s.VIM, &types.CancelWaitForUpdates{This: st.pc.Reference()})
			return err
		})
	}
}

// addPending adds the VMs asked for since the last poll to st's list view
// (one request for all of them), or, if there are none, marks st as
// polling so that the next ones interrupt the poll.
func (ix *Index) addPending(ctx context.Context, st *collector) (added bool, err error) {
	if st.list == nil || st.staging != nil {
		// All details, or a full read (its calls return at once; the VMs
		// asked for meanwhile are added when it completes).
		return false, nil
	}
	refs, drop := ix.interest.changes(st, ix.clock.Now(), ix.followEvery)
	if len(drop) > 0 {
		if _, err := st.list.Remove(ctx, drop); err != nil {
			return false, fmt.Errorf("remove %d VMs from the list view: %w", len(drop), err)
		}
		ix.interest.removed(drop)
	}
	if len(refs) == 0 {
		// Removed only: poll again, as the collector that is polling
		// (changes records it when there is nothing left to change).
		return len(drop) > 0, nil
	}
	gone, err := st.list.Add(ctx, refs)
	if err != nil {
		return false, fmt.Errorf("add %d VMs to the list view: %w", len(refs), err)
	}
	ix.interest.added(refs, gone, ix.clock.Now())
	return true, nil
}

// isCanceled reports whether err is the fault of a poll ended by
// CancelWaitForUpdates.
func isCanceled(err error) bool {
	if !soap.IsSoapFault(err) {
		return false
	}
	_, ok := soap.ToSoapFault(err).VimFault().(types.RequestCanceled)
	return ok
}
