package flight_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/flight"
)

func TestFlight(t *testing.T) {
	boom := errors.New("boom")
	f := flight.New()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with an ended ctx before landing = %v, want context.Canceled", err)
	}
	waited := make(chan error, 2)
	for range 2 {
		go func() { waited <- f.Wait(context.Background()) }()
	}
	f.Land(boom)
	for range 2 {
		if err := <-waited; !errors.Is(err, boom) {
			t.Errorf("a waiter got %v, want the call's error", err)
		}
	}
	select {
	case <-f.Done():
	default:
		t.Error("Done not closed after Land")
	}
	if err := f.Wait(context.Background()); !errors.Is(err, boom) {
		t.Errorf("Wait after landing = %v", err)
	}
}

// TestGroup: a call outlives the caller that started it and gave up; the
// other callers get its result; a timeout ends it; Close ends the calls
// under way, waits for them, and later calls start ended (ErrClosed).
func TestGroup(t *testing.T) {
	g := flight.NewGroup()
	release := make(chan struct{})
	started := make(chan struct{})
	first, giveUp := context.WithCancel(context.Background())
	f := g.Go(first, 0, func(ctx context.Context) error {
		close(started)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	<-started
	giveUp()
	if err := f.Wait(first); !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that gave up: %v, want its own ctx's end", err)
	}
	close(release)
	if err := f.Wait(context.Background()); err != nil {
		t.Errorf("the call ended with its first caller: %v", err)
	}

	timed := g.Go(context.Background(), time.Millisecond, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if err := timed.Wait(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call past its timeout: %v, want DeadlineExceeded", err)
	}

	type key struct{}
	running := make(chan struct{})
	held := g.Go(context.WithValue(context.Background(), key{}, "v"), 0, func(ctx context.Context) error {
		if ctx.Value(key{}) != "v" {
			t.Error("the call lost its caller's values")
		}
		close(running)
		<-ctx.Done()
		return ctx.Err()
	})
	<-running
	g.Close() // returns only once held has ended
	select {
	case <-held.Done():
	default:
		t.Error("Close returned before the call under way ended")
	}
	late := g.Go(context.Background(), 0, func(ctx context.Context) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if err := late.Wait(context.Background()); !errors.Is(err, flight.ErrClosed) {
		t.Errorf("a call after Close: %v, want its ctx ended by ErrClosed", err)
	}
}
