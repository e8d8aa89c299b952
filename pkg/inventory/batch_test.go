package inventory

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// fakeReads is a batchReader's read that records each request's VMs and
// holds each request until release is sent to.
type fakeReads struct {
	mu       sync.Mutex
	requests [][]string
	started  chan struct{} // one send per request started
	release  chan error    // one receive per request: its error
}

func newFakeReads() *fakeReads {
	return &fakeReads{started: make(chan struct{}, 16), release: make(chan error)}
}

func (f *fakeReads) read(ctx context.Context, refs []string) (map[string][]types.DynamicProperty, error) {
	slices.Sort(refs)
	f.mu.Lock()
	f.requests = append(f.requests, refs)
	f.mu.Unlock()
	f.started <- struct{}{}
	select {
	case err := <-f.release:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := map[string][]types.DynamicProperty{}
	for _, r := range refs {
		if r != "gone" {
			out[r] = []types.DynamicProperty{{Name: "name", Val: "vm " + r}}
		}
	}
	return out, nil
}

func (b *batchReader) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == nil {
		return 0
	}
	return len(b.next.refs)
}

type result struct {
	props []types.DynamicProperty
	err   error
}

func getAsync(ctx context.Context, b *batchReader, r string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := b.get(ctx, r)
		ch <- result{p, err}
	}()
	return ch
}

// TestBatchReader: the first VM asked for is read at once, alone; the VMs
// asked for while that request is under way are read together by the
// next one; a VM that no longer exists comes back as nil.
func TestBatchReader(t *testing.T) {
	f := newFakeReads()
	b := &batchReader{read: f.read}
	ctx := context.Background()

	first := getAsync(ctx, b, "vm-1")
	<-f.started
	later := map[string]<-chan result{}
	for _, r := range []string{"vm-2", "vm-3", "gone"} {
		later[r] = getAsync(ctx, b, r)
	}
	poll.True(t, "three VMs queued behind the first request", func() bool { return b.queued() == 3 })
	f.release <- nil
	if r := <-first; r.err != nil || len(r.props) != 1 || r.props[0].Val != "vm vm-1" {
		t.Errorf("vm-1: %+v", r)
	}
	<-f.started
	f.release <- nil
	for ref, ch := range later {
		r := <-ch
		switch {
		case r.err != nil:
			t.Errorf("%s: %v", ref, r.err)
		case ref == "gone" && r.props != nil:
			t.Errorf("a VM that no longer exists has properties: %+v", r.props)
		case ref != "gone" && (len(r.props) != 1 || r.props[0].Val != "vm "+ref):
			t.Errorf("%s: %+v", ref, r.props)
		}
	}
	want := [][]string{{"vm-1"}, {"gone", "vm-2", "vm-3"}}
	if !slices.EqualFunc(f.requests, want, slices.Equal) {
		t.Errorf("requests %v, want %v", f.requests, want)
	}
}

// TestBatchReaderMakerGivesUp: two callers wait for the same request;
// one gives up (its ctx ends). Whichever of them made the request, the
// other is not failed with the first one's ctx error: it gets its VM,
// reading again if need be.
func TestBatchReaderMakerGivesUp(t *testing.T) {
	f := newFakeReads()
	b := &batchReader{read: f.read}
	ctx := context.Background()

	blocker := getAsync(ctx, b, "vm-0") // the request under way
	<-f.started
	quitterCtx, giveUp := context.WithCancel(ctx)
	quitter := getAsync(quitterCtx, b, "vm-1")
	other := getAsync(ctx, b, "vm-2")
	poll.True(t, "both queued for the next request", func() bool { return b.queued() == 2 })
	f.release <- nil
	<-blocker
	<-f.started // the next request, made by one of the two
	giveUp()
	// Only once the quitter has returned is any request answered: if it
	// made the request, its read ended with its ctx, not with an answer.
	if r := <-quitter; r.err == nil {
		t.Errorf("the caller that gave up got %+v, want its ctx error", r)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case f.release <- nil:
			case <-f.started:
			case <-done:
				return
			}
		}
	}()
	if r := <-other; r.err != nil || len(r.props) != 1 || r.props[0].Val != "vm vm-2" {
		t.Errorf("the caller that did not give up: %+v", r)
	}
}
