package inventory

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/flight"
)

// batchReader reads the details of VMs directly, one request at a time:
// the VMs asked for while a request is under way are read together by the
// next one; a VM the request under way reads already joins it. A lookup
// of a VM whose details are not kept costs one round
// trip, however busy the collector is, and lookups that arrive together
// share their requests. A request goes on when the caller that started it
// gives up (flight.Group: the others asked for VMs in it too), bounded by
// timeout.
//
// VMs can also be read ahead (prefetch: the VMs of Nodes that registered,
// before the node controller looks them up). A request holding only such
// VMs starts at least window after the previous request started, so that
// a registration storm costs one request per window, not one per Node; a
// caller asking for a VM nobody read ahead starts the request at once.
type batchReader struct {
	// read returns the details of the VMs that still exist, by reference
	// value.
	read    func(ctx context.Context, refs []string) (map[string][]types.DynamicProperty, error)
	calls   *flight.Group
	timeout time.Duration
	window  time.Duration
	clock   clock.WithDelayedExecution

	mu        sync.Mutex
	next      *batch      // collecting VMs; started when running is nil and it is due
	running   *batch      // under way; its refs no longer change
	lastStart time.Time   // when the last request started
	timer     clock.Timer // starts next when its window ends; nil when none is armed
	closed    bool
}

func newBatchReader(read func(ctx context.Context, refs []string) (map[string][]types.DynamicProperty, error), timeout, window time.Duration,
	clk clock.WithDelayedExecution) *batchReader {
	return &batchReader{read: read, calls: flight.NewGroup(), timeout: timeout, window: window, clock: clk}
}

// batch is one request's VMs and, once done is closed, its result.
type batch struct {
	refs    map[string]bool
	callers int  // that asked for VMs in it (under batchReader.mu)
	urgent  bool // a caller waits for a VM nobody read ahead: start as soon as nothing runs
	done    chan struct{}
	res     map[string][]types.DynamicProperty
	err     error
}

func newBatch() *batch { return &batch{refs: map[string]bool{}, done: make(chan struct{})} }

// get returns the properties of the VM r (nil: it no longer exists),
// waiting for them as long as ctx allows. A request that joined ran out
// of its own time (it started before this caller asked) is made again,
// once, while ctx allows.
func (b *batchReader) get(ctx context.Context, r string) ([]types.DynamicProperty, error) {
	props, joined, err := b.getOnce(ctx, r, true)
	if joined && isContextErr(err) && ctx.Err() == nil {
		props, _, err = b.getOnce(ctx, r, false)
	}
	return props, err
}

func (b *batchReader) getOnce(ctx context.Context, r string, join bool) (_ []types.DynamicProperty, joined bool, _ error) {
	b.mu.Lock()
	mine := b.running
	joined = join && mine != nil && mine.refs[r]
	if !joined { // else: joins the request under way that reads it
		if b.next == nil {
			b.next = newBatch()
		}
		mine = b.next
		if !mine.refs[r] { // else: read ahead, and due within the window
			mine.refs[r] = true
			mine.urgent = true
		}
		b.scheduleLocked(ctx)
	}
	mine.callers++
	b.mu.Unlock()
	select {
	case <-mine.done:
		return mine.res[r], joined, mine.err
	case <-ctx.Done():
		return nil, joined, ctx.Err()
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// prefetch reads the VMs refs ahead, with the next request: nobody waits
// for them, so that request starts no sooner than window after the last
// one (unless a caller asks for a VM nobody read ahead). A VM the request
// under way reads is left to it.
func (b *batchReader) prefetch(ctx context.Context, refs ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for _, r := range refs {
		if b.running != nil && b.running.refs[r] {
			continue
		}
		if b.next == nil {
			b.next = newBatch()
		}
		b.next.refs[r] = true
	}
	b.scheduleLocked(ctx)
}

// scheduleLocked starts next now if nothing runs and it is due (urgent, or
// window after the last start), or arms the timer that starts it when it
// is; with b.mu held. A request's end schedules the next one. After
// close, requests start at once, ended (flight.Group), so that no caller
// waits.
func (b *batchReader) scheduleLocked(ctx context.Context) {
	if b.running != nil || b.next == nil {
		return
	}
	wait := time.Duration(0)
	if !b.next.urgent && !b.closed { // closed: its request ends at once
		wait = b.lastStart.Add(b.window).Sub(b.clock.Now())
	}
	if wait <= 0 {
		if b.timer != nil {
			b.timer.Stop()
			b.timer = nil
		}
		b.startLocked(ctx)
		return
	}
	if b.timer == nil {
		// In a goroutine of its own: a fake clock runs the function with
		// its lock held, and scheduling reads the clock. It only takes
		// b.mu; the request it may start is the flight group's.
		b.timer = b.clock.AfterFunc(wait, func() { go b.windowEnded(ctx) })
	}
}

// windowEnded starts next if it is due now.
func (b *batchReader) windowEnded(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer = nil
	if !b.closed {
		b.scheduleLocked(ctx)
	}
}

// startLocked starts the request of next, with b.mu held; when it ends,
// the VMs asked for meanwhile are read by the next one. ctx gives the
// requests their values (the logger), not their cancellation.
func (b *batchReader) startLocked(ctx context.Context) {
	bt := b.next
	b.running, b.next = bt, nil
	b.lastStart = b.clock.Now()
	refs := slices.Collect(maps.Keys(bt.refs))
	b.calls.Go(ctx, b.timeout, func(rctx context.Context) error {
		bt.res, bt.err = b.read(rctx, refs)
		close(bt.done)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.running = nil
		b.scheduleLocked(ctx)
		return bt.err
	})
}

// close stops reading ahead, ends the request under way and waits for it.
func (b *batchReader) close() {
	b.mu.Lock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.scheduleLocked(context.Background()) // callers waiting for VMs read ahead: ended at once
	b.mu.Unlock()
	b.calls.Close()
}
