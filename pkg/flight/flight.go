// Package flight is one call shared by the callers that arrive while it
// runs (a login, a tag refresh): the owner of the call ends it with Land;
// the others Wait for its result, each only as long as its own ctx allows.
// Who starts a call, and what it guards, stays with the owner's type (its
// mutex decides, so the decision and its state change together).
package flight

import "context"

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
