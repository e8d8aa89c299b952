package servingcsr

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// countingIdentities answers like a provider whose inventories miss the
// Node's VM, which a direct search finds elsewhere, and counts the direct
// searches.
type countingIdentities struct {
	searches, confirms int
	absent             bool // the direct search confirms the VM absent
	notBefore          time.Time
}

func (c *countingIdentities) ServingIdentity(context.Context, *v1.Node) (provider.ServingIdentity, error) {
	return provider.ServingIdentity{}, &inventory.NotFoundError{Key: "BIOS UUID", VCenters: []string{"vc-a"}}
}
func (c *countingIdentities) IPOwners(netip.Addr) ([]inventory.IPOwner, error) { return nil, nil }
func (c *countingIdentities) AddressHolders(_ context.Context, _ netip.Addr, notBefore time.Time) ([]inventory.AddressHolder, error) {
	c.searches++
	c.notBefore = notBefore
	return []inventory.AddressHolder{{VCenter: "vc-a", Ref: types.ManagedObjectReference{Type: "HostSystem", Value: "host-9"}}}, nil
}
func (c *countingIdentities) ConfirmAbsent(context.Context, *v1.Node) error {
	c.confirms++
	if c.absent {
		return nil
	}
	return &inventory.ExistsError{UUID: "4211a1b2-0000-4000-8000-000000000001", Ref: "vm-99"}
}

// TestConfirmedAbsenceReused: a VM every vCenter confirms absent is not
// searched for again within RecentFor (docs/security.md says both
// answers are reused).
func TestConfirmedAbsenceReused(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ids := &countingIdentities{absent: true}
	f := ProviderFacts{Provider: ids, recent: cache.NewLRUExpireCacheWithClock(16, clk)}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-000000000001"}}
	for range 3 {
		if _, err := f.NodeVM(context.Background(), node); !errors.Is(err, inventory.ErrNotFound) || errors.Is(err, ErrUnknown) {
			t.Fatalf("a VM confirmed absent: %v", err)
		}
	}
	if ids.confirms != 1 {
		t.Errorf("%d absence checks for 3 decisions within RecentFor, want 1", ids.confirms)
	}
}

// TestProviderFactsReuse: a direct search for a VM the inventories miss
// is reused for RecentFor, so requests retried at every inventory change
// do not search every vCenter each time; after it, vCenter is asked
// again. Address holders are asked of the inventory every time, with the
// request's time (the inventory shares its snapshots: TestAddressHolders).
func TestProviderFactsReuse(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ids := &countingIdentities{}
	f := ProviderFacts{Provider: ids, recent: cache.NewLRUExpireCacheWithClock(16, clk)}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-000000000001"}}
	ip := netip.MustParseAddr("10.0.0.5")
	asked := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for range 3 {
		if _, err := f.NodeVM(context.Background(), node); !errors.Is(err, ErrUnknown) {
			t.Fatalf("a VM the inventories miss but a search finds: %v, want cannot be told now", err)
		}
		if h, err := f.IPHolders(context.Background(), ip, asked); err != nil || len(h) != 1 || !h[0].Host {
			t.Fatalf("holders %+v, %v", h, err)
		}
	}
	if ids.confirms != 1 || ids.searches != 3 || !ids.notBefore.Equal(asked) {
		t.Fatalf("%d absence checks and %d holder reads (not before %v) for 3 decisions within RecentFor, want 1 and 3 (not before %v)",
			ids.confirms, ids.searches, ids.notBefore, asked)
	}
	clk.Step(RecentFor + time.Second)
	_, _ = f.NodeVM(context.Background(), node)
	if ids.confirms != 2 {
		t.Fatalf("%d absence checks after RecentFor, want 2", ids.confirms)
	}
}
