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
			if st != nil && st.session != s {
				old := st
				st = nil
				go old.close(ctx) // best effort: the collector may be gone with its session
			}
			if st == nil {
				var err error
				if st, err = ix.newCollector(ctx, s); err != nil {
					st = nil
					return err
				}
				ix.beginFullRead()
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
			go old.close(ctx)
		}
		ix.mu.Lock()
		first := ix.syncErr == nil || errors.Is(ix.syncErr, vcenter.ErrNotConnectedYet)
		ix.syncErr = err
		ix.mu.Unlock()
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

// beginFullRead marks the index as being read again: until the read
// completes, its old data may still answer "present" but not "absent".
func (ix *Index) beginFullRead() {
	ix.mu.Lock()
	ix.resyncing = ix.synced
	ix.mu.Unlock()
}

// maxObjectUpdates bounds one page of the full read (a vCenter may page
// smaller: the simulator and vCenter's default is 100).
const maxObjectUpdates = 1000

// waitOnce makes one WaitForUpdatesEx call and applies what it returns.
func (ix *Index) waitOnce(ctx context.Context, st *collector, maxWait time.Duration) error {
	secs := int32(maxWait / time.Second)
	if st.version == "" {
		secs = 0 // the first call returns the full state at once
		st.staging = newData()
	}
	if added, err := ix.addPending(ctx, st); err != nil || added {
		return err // added: poll again, which returns their details
	}
	res, err := methods.WaitForUpdatesEx(ctx, st.session.VIM, &types.WaitForUpdatesEx{
		This: st.pc.Reference(), Version: st.version,
		Options: &types.WaitOptions{MaxWaitSeconds: &secs, MaxObjectUpdates: maxObjectUpdates},
	})
	ix.mu.Lock()
	ix.polling = nil
	ix.mu.Unlock()
	if isCanceled(err) {
		return nil // interrupted to add VMs of interest
	}
	if err != nil {
		return err
	}
	set := res.Returnval
	if set == nil {
		ix.markCurrent()
		return nil // nothing changed within maxWait
	}
	st.version = set.Version
	truncated := set.Truncated != nil && *set.Truncated
	var left, detailed []string // VMs that left the scope; VMs whose details changed
	apply := func(d *data) (changed bool, entered []string) {
		for _, fs := range set.FilterSet {
			if fs.Filter == st.details {
				for _, u := range fs.ObjectSet {
					d.applyDetails(u)
					detailed = append(detailed, u.Obj.Value)
				}
				changed = changed || len(fs.ObjectSet) > 0
				continue
			}
			c, e, l := d.applyIdentity(fs.ObjectSet, ix.allDetails)
			changed = changed || c
			entered = append(entered, e...)
			left = append(left, l...)
		}
		return changed, entered
	}
	if st.staging != nil {
		apply(st.staging)
		if truncated {
			return nil
		}
		ix.mu.Lock()
		ix.data = st.staging
		// Forget the VMs of interest that are gone (deleted, or moved out
		// of scope while no collector followed them), so that no later
		// list view is asked for them.
		for r := range ix.interest {
			if ix.data.vms[r] == nil {
				ix.forgetLocked(r)
			}
		}
		ix.data.dropStrayDetails()
		for _, k := range ix.wanted {
			for _, id := range k.idents(ix.data) {
				ix.wantLocked(id.ref)
			}
		}
		ix.wanted = nil
		// A vCenter of moderate size: keep every VM's details (one request
		// adds them all), so that no lookup ever waits for them.
		ix.eager = !ix.allDetails && len(ix.data.vms) <= ix.eagerMax
		if ix.eager {
			for r, id := range ix.data.vms {
				if !id.template {
					ix.wantLocked(r)
				}
			}
		}
		ix.synced = true
		ix.objectsRead = false // data.objects is the full read's now
		ix.fullReads++
		ix.resyncing = false
		ix.syncErr = nil
		ix.syncedAt = ix.clock.Now()
		n := len(ix.data.vms)
		ix.notifyLocked()
		ix.notifyDetailsLocked()
		ix.mu.Unlock()
		st.staging = nil
		ix.log.V(1).Info("Inventory synced", "vms", n)
		return nil
	}
	ix.mu.Lock()
	changed, entered := apply(ix.data)
	for _, r := range left {
		ix.forgetLocked(r)
	}
	for _, r := range detailed {
		if ix.data.vms[r] == nil { // details of a VM that left the scope
			delete(ix.data.details, r)
			ix.forgetLocked(r)
		}
	}
	if changed {
		ix.notifyDetailsLocked()
	}
	if ix.eager {
		for _, r := range entered {
			ix.wantLocked(r) // a VM created since the read
		}
	}
	ix.currentLocked()
	ix.mu.Unlock()
	return nil
}

func (ix *Index) notifyDetailsLocked() {
	ix.detailN.Notify()
}

// interruptForInterest ends the long poll under way whenever VMs are
// asked for, until ctx ends: the sync loop then adds them to the list view
// (addPending) and polls again, which returns their details at once. The
// list view is modified only between polls, never during one: the
// simulator's property collector deadlocks when a list view changes while
// a poll re-reads it, and one writer keeps the collector simple.
func (ix *Index) interruptForInterest(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ix.wantCh:
		}
		ix.mu.Lock()
		st := ix.polling
		ix.mu.Unlock()
		if st == nil {
			continue // the loop adds the pending VMs before its next poll
		}
		_ = ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
			if s != st.session {
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
	ix.mu.Lock()
	switch {
	case st.list == nil || st.staging != nil:
		// All details, or a full read (its calls return at once; the VMs
		// asked for meanwhile are added when it completes).
		ix.mu.Unlock()
		return false, nil
	case len(ix.pending) == 0 && len(ix.dropping) == 0:
		ix.polling = st
		ix.mu.Unlock()
		return false, nil
	}
	refs := vmRefs(ix.pending)
	drop := vmRefs(ix.dropping)
	ix.mu.Unlock()
	if len(drop) > 0 {
		if _, err := st.list.Remove(ctx, drop); err != nil {
			return false, fmt.Errorf("remove %d VMs from the list view: %w", len(drop), err)
		}
		ix.mu.Lock()
		for _, r := range drop {
			delete(ix.dropping, r.Value)
		}
		ix.mu.Unlock()
	}
	if len(refs) == 0 {
		return false, nil
	}
	gone, err := st.list.Add(ctx, refs)
	if err != nil {
		return false, fmt.Errorf("add %d VMs to the list view: %w", len(refs), err)
	}
	ix.mu.Lock()
	for _, r := range refs {
		delete(ix.pending, r.Value)
	}
	for _, r := range gone {
		ix.forgetLocked(r.Value)
		delete(ix.dropping, r.Value) // never in the view
	}
	ix.mu.Unlock()
	return true, nil
}

func vmRefs(set map[string]bool) []types.ManagedObjectReference {
	out := make([]types.ManagedObjectReference, 0, len(set))
	for r := range set {
		out = append(out, types.ManagedObjectReference{Type: "VirtualMachine", Value: r})
	}
	return out
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

func (ix *Index) markCurrent() {
	ix.mu.Lock()
	if ix.synced {
		ix.currentLocked()
	}
	ix.mu.Unlock()
}
