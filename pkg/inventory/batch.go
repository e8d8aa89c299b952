package inventory

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/types"

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
type batchReader struct {
	// read returns the details of the VMs that still exist, by reference
	// value.
	read    func(ctx context.Context, refs []string) (map[string][]types.DynamicProperty, error)
	calls   *flight.Group
	timeout time.Duration

	mu      sync.Mutex
	next    *batch // collecting VMs; started when running is nil
	running *batch // under way; its refs no longer change
}

func newBatchReader(read func(ctx context.Context, refs []string) (map[string][]types.DynamicProperty, error), timeout time.Duration) *batchReader {
	return &batchReader{read: read, calls: flight.NewGroup(), timeout: timeout}
}

// batch is one request's VMs and, once done is closed, its result.
type batch struct {
	refs    map[string]bool
	callers int // that asked for VMs in it (under batchReader.mu)
	done    chan struct{}
	res     map[string][]types.DynamicProperty
	err     error
}

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
			b.next = &batch{refs: map[string]bool{}, done: make(chan struct{})}
		}
		mine = b.next
		mine.refs[r] = true
		if b.running == nil {
			b.startLocked(ctx)
		}
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

// startLocked starts the request of next, with b.mu held; when it ends,
// the VMs asked for meanwhile are read by the next one. ctx gives the
// requests their values (the logger), not their cancellation.
func (b *batchReader) startLocked(ctx context.Context) {
	bt := b.next
	b.running, b.next = bt, nil
	refs := slices.Collect(maps.Keys(bt.refs))
	b.calls.Go(ctx, b.timeout, func(rctx context.Context) error {
		bt.res, bt.err = b.read(rctx, refs)
		close(bt.done)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.running = nil
		if b.next != nil {
			b.startLocked(ctx)
		}
		return bt.err
	})
}

// close ends the request under way and waits for it.
func (b *batchReader) close() { b.calls.Close() }
