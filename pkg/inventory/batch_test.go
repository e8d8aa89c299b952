package inventory

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

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

// waiters is the number of callers of the request under way.
func (b *batchReader) waiters() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running == nil {
		return 0
	}
	return b.running.callers
}

func (b *batchReader) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == nil {
		return 0
	}
	return len(b.next.refs)
}

// startReader returns fake reads and a batch reader over them, closed at
// the end of the test.
func startReader(t *testing.T) (*fakeReads, *batchReader) {
	f := newFakeReads()
	b := newBatchReader(f.read, time.Minute, 0, clock.RealClock{})
	t.Cleanup(b.close)
	return f, b
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
	f, b := startReader(t)
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

// TestBatchReaderMakerGivesUp: a second caller asks for the VM the
// request under way reads, and joins it; the caller that started it gives
// up (its ctx ends). The request goes on: the other gets the VM from it,
// with no second request. close ends a request under way.
func TestBatchReaderMakerGivesUp(t *testing.T) {
	f := newFakeReads()
	b := newBatchReader(f.read, time.Minute, 0, clock.RealClock{})
	ctx := context.Background()

	quitterCtx, giveUp := context.WithCancel(ctx)
	quitter := getAsync(quitterCtx, b, "vm-1") // starts the request
	<-f.started
	other := getAsync(ctx, b, "vm-1")
	poll.True(t, "the other caller waiting", func() bool { return b.waiters() == 2 })
	giveUp()
	if r := <-quitter; r.err == nil {
		t.Errorf("the caller that gave up got %+v, want its ctx error", r)
	}
	f.release <- nil
	if r := <-other; r.err != nil || len(r.props) != 1 || r.props[0].Val != "vm vm-1" {
		t.Errorf("the caller that did not give up: %+v", r)
	}

	held := getAsync(ctx, b, "vm-2")
	<-f.started
	b.close() // ends the request held, and waits for it
	if r := <-held; !errors.Is(r.err, context.Canceled) {
		t.Errorf("a read ended by close: %+v, want context.Canceled", r)
	}
	want := [][]string{{"vm-1"}, {"vm-2"}}
	if !slices.EqualFunc(f.requests, want, slices.Equal) {
		t.Errorf("requests %v, want %v (the request its maker gave up on answered the other caller)", f.requests, want)
	}
}

// TestBatchReaderLateJoiner: a caller that joined a request under way
// does not inherit that request's deadline: when it runs out of time
// (it started before the caller asked), the VM is read again, once, for
// the caller whose own ctx still allows; the caller that started it gets
// its error.
func TestBatchReaderLateJoiner(t *testing.T) {
	f, b := startReader(t)
	ctx := context.Background()

	starter := getAsync(ctx, b, "vm-1")
	<-f.started
	joiner := getAsync(ctx, b, "vm-1")
	poll.True(t, "the joiner waiting for the request under way", func() bool { return b.waiters() == 2 })
	f.release <- context.DeadlineExceeded // the request's own timeout
	if r := <-starter; !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("the caller that started the request: %+v, want its DeadlineExceeded", r)
	}
	<-f.started
	f.release <- nil
	if r := <-joiner; r.err != nil || len(r.props) != 1 || r.props[0].Val != "vm vm-1" {
		t.Errorf("the caller that joined: %+v, want vm-1 read again", r)
	}
	want := [][]string{{"vm-1"}, {"vm-1"}}
	if !slices.EqualFunc(f.requests, want, slices.Equal) {
		t.Errorf("requests %v, want %v", f.requests, want)
	}
}

// idle reports whether no request is under way.
func (b *batchReader) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running == nil
}

// nextCallers is the number of callers waiting for the next request.
func (b *batchReader) nextCallers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == nil {
		return 0
	}
	return b.next.callers
}

// TestBatchReaderPrefetch: VMs read ahead start a request at once after a
// quiet spell, else window after the last request started, all together;
// a caller waiting for a VM read ahead waits for that request, while a
// caller asking for one nobody read ahead starts the next request at once,
// taking the VMs read ahead along. A window that ended while a request ran
// starts the next at its end. At close, a caller waiting for a VM read
// ahead gets an error at once; after it, nothing is read ahead.
func TestBatchReaderPrefetch(t *testing.T) {
	const window = 250 * time.Millisecond
	clk := clocktesting.NewFakeClock(time.Now())
	f := newFakeReads()
	b := newBatchReader(f.read, time.Minute, window, clk)
	ctx := context.Background()

	b.prefetch(ctx, "vm-1") // quiet: at once
	<-f.started
	f.release <- nil
	poll.True(t, "the first request done", b.idle)

	b.prefetch(ctx, "vm-2")
	b.prefetch(ctx, "vm-3", "vm-2")
	waiting := getAsync(ctx, b, "vm-2") // read ahead: waits for the window
	poll.True(t, "a caller waiting for the VM read ahead", func() bool { return b.nextCallers() == 1 })
	if !b.idle() || !clk.HasWaiters() {
		t.Fatalf("VMs read ahead within the window: a request started (idle %v) or no timer armed (%v)", b.idle(), clk.HasWaiters())
	}
	clk.Step(window)
	<-f.started
	f.release <- nil
	if r := <-waiting; r.err != nil || len(r.props) != 1 || r.props[0].Val != "vm vm-2" {
		t.Errorf("vm-2: %+v", r)
	}
	poll.True(t, "the second request done", b.idle)

	b.prefetch(ctx, "vm-4")
	urgent := getAsync(ctx, b, "vm-5") // nobody read it ahead: at once
	<-f.started
	b.prefetch(ctx, "vm-6") // while a request runs
	clk.Step(window)        // its window ends meanwhile
	f.release <- nil
	if r := <-urgent; r.err != nil {
		t.Errorf("vm-5: %+v", r)
	}
	<-f.started // vm-6, as soon as the request under way ended
	f.release <- nil
	poll.True(t, "the fourth request done", b.idle)

	clk.Step(window)
	b.prefetch(ctx, "vm-7")
	<-f.started // quiet for a window: at once
	f.release <- nil
	poll.True(t, "the fifth request done", b.idle)
	b.prefetch(ctx, "vm-8")
	if !clk.HasWaiters() {
		t.Fatal("no timer armed for vm-8")
	}
	stranded := getAsync(ctx, b, "vm-8") // waits for the window
	poll.True(t, "a caller waiting for vm-8", func() bool { return b.nextCallers() == 1 })
	b.close()
	if clk.HasWaiters() {
		t.Error("close left the timer armed")
	}
	if r := <-stranded; r.err == nil {
		t.Errorf("a caller waiting for a VM read ahead at close: %+v, want the ended request's error at once", r)
	}
	b.prefetch(ctx, "vm-9")
	if !b.idle() || clk.HasWaiters() {
		t.Error("a VM read ahead after close started a request or armed a timer")
	}
	want := [][]string{{"vm-1"}, {"vm-2", "vm-3"}, {"vm-4", "vm-5"}, {"vm-6"}, {"vm-7"}, {"vm-8"}}
	if !slices.EqualFunc(f.requests, want, slices.Equal) {
		t.Errorf("requests %v, want %v", f.requests, want)
	}
}
