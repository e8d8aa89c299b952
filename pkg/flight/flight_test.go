package flight_test

import (
	"context"
	"errors"
	"testing"

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
