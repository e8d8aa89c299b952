package inventory_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// countingClient is a connected vCenter that counts the requests made
// through it and answers none.
type countingClient struct {
	name  string
	calls atomic.Int32
}

func (c *countingClient) Name() string { return c.name }
func (c *countingClient) Config() config.VCenter {
	return config.VCenter{Name: c.name, Server: c.name + ".example.test"}
}
func (c *countingClient) Health() vcenter.Health         { return vcenter.Health{State: vcenter.Connected} }
func (c *countingClient) HealthChanged() <-chan struct{} { return make(chan struct{}) }
func (c *countingClient) Do(context.Context, func(context.Context, *vcenter.Session) error) error {
	c.calls.Add(1)
	return errors.New("no requests expected")
}

// TestMissBeforeFirstReadAsksNothing: a lookup that misses while a
// vCenter's index has never been read, not even its hosts, clusters and
// folders, is an IncompleteError ("cannot tell") and costs no vSphere
// request: a VM a direct search found could not be placed (its ancestry
// is unknown), and every retry and lifecycle pass of every waiting Node
// would repeat it. (TestLookupDuringFirstRead: once those are read, a
// miss is searched for.)
func TestMissBeforeFirstReadAsksNothing(t *testing.T) {
	a, b := &countingClient{name: "vc-a"}, &countingClient{name: "vc-b"}
	inv := inventory.New([]inventory.Client{a, b}, inventory.Options{GuestHostnames: true})
	lookups := map[string]func() error{
		"uuid": func() error {
			_, err := inv.FindByUUID(context.Background(), "4211aaaa-0000-4000-8000-000000000001")
			return err
		},
		"name": func() error { _, err := inv.FindByName(context.Background(), "node-1"); return err },
		"host": func() error {
			_, err := inv.FindByGuestHostname(context.Background(), "node-1.example.test")
			return err
		},
	}
	for name, lookup := range lookups {
		t.Run(name, func(t *testing.T) {
			err := lookup()
			var ie *inventory.IncompleteError
			if !errors.As(err, &ie) || errors.Is(err, inventory.ErrNotFound) {
				t.Errorf("err = %v, want an IncompleteError that is not ErrNotFound", err)
			}
		})
	}
	if n := a.calls.Load() + b.calls.Load(); n != 0 {
		t.Errorf("%d vSphere requests for lookups in never-read indexes, want 0", n)
	}
}

// TestGuestHostnamesOnlyWhenAsked: without Options.GuestHostnames the
// guest host names are not indexed, and a lookup by one is an error that
// never says "not found" (a Node must not be deleted for it) and costs no
// request.
func TestGuestHostnamesOnlyWhenAsked(t *testing.T) {
	a := &countingClient{name: "vc-a"}
	inv := inventory.New([]inventory.Client{a}, inventory.Options{})
	_, err := inv.FindByGuestHostname(context.Background(), "node-1.example.test")
	if err == nil || errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("err = %v, want an error that is not ErrNotFound", err)
	}
	if n := a.calls.Load(); n != 0 {
		t.Errorf("%d vSphere requests, want 0", n)
	}
}
