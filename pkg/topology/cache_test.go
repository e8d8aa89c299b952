package topology_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// heldClient is a topology.Client whose every request waits until it is
// released or its ctx ends; a released request reads nothing (an empty
// catalog).
type heldClient struct {
	started chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (*heldClient) Name() string                   { return "vc-held" }
func (*heldClient) HealthChanged() <-chan struct{} { return nil }
func (h *heldClient) Do(ctx context.Context, _ func(context.Context, *vcenter.Session) error) error {
	h.calls.Add(1)
	h.started <- struct{}{}
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestRefreshOutlivesCaller: the caller that started a refresh gives up;
// the refresh goes on and fills the cache, so the callers that joined it
// and the next lookups get its result, with no second request. Close ends
// a refresh under way and waits for it.
func TestRefreshOutlivesCaller(t *testing.T) {
	h := &heldClient{started: make(chan struct{}, 4), release: make(chan struct{})}
	c := topology.NewCache(h, []string{"k8s-zone"}, nil)
	first, giveUp := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- c.Refresh(first) }()
	<-h.started
	giveUp()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v, want its ctx's end", err)
	}
	close(h.release)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must.OK(t, c.WaitSynced(ctx))
	if synced, _, err := c.Status(); !synced || err != nil {
		t.Errorf("after the refresh: synced %v, err %v", synced, err)
	}
	if n := h.calls.Load(); n != 1 {
		t.Errorf("%d requests, want the one of the refresh its caller gave up on", n)
	}
	c.Close()

	held := &heldClient{started: make(chan struct{}, 4), release: make(chan struct{})}
	c = topology.NewCache(held, []string{"k8s-zone"}, nil)
	refreshed := make(chan error, 1)
	go func() { refreshed <- c.Refresh(context.Background()) }()
	<-held.started
	c.Close() // ends the request held, and waits for the refresh
	if err := <-refreshed; !errors.Is(err, context.Canceled) {
		t.Errorf("a refresh ended by Close: %v, want context.Canceled", err)
	}
}
