// Package flight is one call shared by the callers that arrive while it
// runs (a login, a tag refresh, a batched read of VM details): a Group
// starts it detached from the caller that asked first, and every caller
// Waits for its result only as long as its own ctx allows. Who starts a
// call, and what it guards, stays with the owner's type (its mutex
// decides, so the decision and its state change together).
package flight

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Flight is one call under way. Make it with New.
type Flight struct {
	done chan struct{}
	err  error
}

// New returns a call under way.
func New() *Flight { return &Flight{done: make(chan struct{})} }

// Land ends the call with its result; call it once.
func (f *Flight) Land(err error) {
	f.err = err
	close(f.done)
}

// Done is closed when the call has ended.
func (f *Flight) Done() <-chan struct{} { return f.done }

// Wait returns the call's result once it has ended, or ctx's error if ctx
// ends first.
func (f *Flight) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Group starts the calls of one owner and ends them at its Close: the one
// policy for a call shared by several callers (a login, a tag refresh, a
// batched read). The call outlives a caller that gives up, so that the
// others, and the next caller, get its result instead of the first
// caller's cancellation; it is bounded by its timeout and by the owner's
// life, and Close joins it. Make it with NewGroup.
type Group struct {
	life context.Context
	end  context.CancelFunc

	mu     sync.Mutex // guards closed and orders wg.Add before wg.Wait
	closed bool
	wg     sync.WaitGroup
}

// NewGroup returns a group whose calls run until Close.
func NewGroup() *Group {
	life, end := context.WithCancel(context.Background())
	return &Group{life: life, end: end}
}

// ErrClosed is the cause of the end of a call started after Close.
var ErrClosed = errors.New("shut down")

// Go starts work as a call in its own goroutine and returns it. work runs
// in a context that keeps ctx's values (its logger) but not its
// cancellation or deadline, ended after timeout (if positive) or at Close;
// work does its owner's bookkeeping before it returns, and the call lands
// with its error. After Close, work still runs, with its context ended
// from the start (context.Cause is ErrClosed).
func (g *Group) Go(ctx context.Context, timeout time.Duration, work func(context.Context) error) *Flight {
	f := New()
	g.mu.Lock()
	closed := g.closed
	if !closed {
		g.wg.Add(1)
	}
	g.mu.Unlock()
	if closed {
		// Run anyway, ended from the start, so that the owner's
		// bookkeeping in work is done; it returns at once.
		cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
		cancel(ErrClosed)
		go func() { f.Land(work(cctx)) }()
		return f
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(g.life, cancel)
	bounded, release := cctx, context.CancelFunc(func() {})
	if timeout > 0 {
		bounded, release = context.WithTimeout(cctx, timeout)
	}
	go func() {
		defer g.wg.Done()
		defer stop()
		defer cancel()
		defer release()
		f.Land(work(bounded))
	}()
	return f
}

// Close ends the calls under way and waits for them; later calls start
// ended.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.end()
	g.wg.Wait()
}
