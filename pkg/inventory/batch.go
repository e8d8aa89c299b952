package inventory

import (
	"context"
	"errors"
	"sync"

	"github.com/vmware/govmomi/vim25/types"
)

// batchReader reads the details of VMs directly, one request at a time:
// the VMs asked for while a request is under way are read together by the
// next one. A lookup of a VM whose details are not kept costs one round
// trip, however busy the collector is, and lookups that arrive together
// share their requests.
type batchReader struct {
	// read returns the details of the VMs that still exist, by reference
	// value.
	read func(ctx context.Context, refs []string) (map[string][]types.DynamicProperty, error)

	mu      sync.Mutex
	next    *batch        // collecting VMs; started when running is nil
	running *batch        // under way
	idle    chan struct{} // closed when running ends
}

// batch is one request's VMs and, once done is closed, its result.
type batch struct {
	refs map[string]bool
	done chan struct{}
	res  map[string][]types.DynamicProperty
	err  error
}

// get returns the properties of the VM r (nil: it no longer exists). The
// caller that finds no request under way makes it, with its own ctx;
// the others wait for theirs as long as their ctx allows. A request ended
// by its maker's ctx is made again by the next caller waiting for it.
func (b *batchReader) get(ctx context.Context, r string) ([]types.DynamicProperty, error) {
	b.mu.Lock()
	if b.next == nil {
		b.next = &batch{refs: map[string]bool{}, done: make(chan struct{})}
	}
	mine := b.next
	mine.refs[r] = true
	for {
		if b.running == nil && b.next == mine {
			b.run(ctx, mine) // unlocks
			return mine.res[r], mine.err
		}
		wait := mine.done
		if b.running != mine {
			wait = b.idle // the request before mine; then mine starts
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait:
		case <-mine.done: // made by another caller while this one waited
		}
		select {
		case <-mine.done:
			if isContextErr(mine.err) && ctx.Err() == nil {
				return b.get(ctx, r) // its maker gave up: read again, with this ctx
			}
			return mine.res[r], mine.err
		default:
		}
		b.mu.Lock()
	}
}

// run makes the request of bt, which is next, with b.mu held; it returns
// with b.mu released and bt done.
func (b *batchReader) run(ctx context.Context, bt *batch) {
	b.running, b.next, b.idle = bt, nil, make(chan struct{})
	b.mu.Unlock()
	refs := make([]string, 0, len(bt.refs))
	for ref := range bt.refs {
		refs = append(refs, ref)
	}
	bt.res, bt.err = b.read(ctx, refs)
	close(bt.done)
	b.mu.Lock()
	b.running = nil
	close(b.idle)
	b.mu.Unlock()
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
