package servingcsr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// Identities is what the provider answers (*provider.Provider).
type Identities interface {
	ServingIdentity(ctx context.Context, node *v1.Node) (provider.ServingIdentity, error)
	IPOwners(ip netip.Addr) ([]inventory.IPOwner, error)
	AddressHolders(ctx context.Context, ip netip.Addr, notBefore time.Time) ([]inventory.AddressHolder, error)
	ConfirmAbsent(ctx context.Context, node *v1.Node) error
}

var _ Identities = (*provider.Provider)(nil)

// ProviderFacts are the Facts of the provider's inventories: every error
// but a VM proven absent is "cannot be told now". Create them with
// NewProviderFacts.
type ProviderFacts struct {
	Provider Identities
	// recent holds, for RecentFor, the answers of vCenter's direct
	// searches for a VM the inventories miss, so that pending requests
	// retried at every inventory change do not search every vCenter each
	// time. (Address holders are read in snapshots that every request
	// shares: inventory.Inventory.AddressHolders.)
	recent *cache.LRUExpireCache
}

// RecentFor is how long an answer of vCenter's direct searches is reused.
const RecentFor = 10 * time.Second

// NewProviderFacts returns the Facts of the provider's inventories.
func NewProviderFacts(p Identities) ProviderFacts {
	return ProviderFacts{Provider: p, recent: cache.NewLRUExpireCache(4096)}
}

// NodeVM implements Facts. A VM the inventories miss is absent only when
// every vCenter, asked directly in all its datacenters, says so (a VM
// between two inventory updates, or moving between vCenters, is missed
// for a moment): one request per vCenter, only on a miss.
func (f ProviderFacts) NodeVM(ctx context.Context, node *v1.Node) (VM, error) {
	id, err := f.Provider.ServingIdentity(ctx, node)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		key := "absent/" + node.Spec.ProviderID
		if cerr, ok := f.get(key); ok {
			return VM{}, cerr.(error)
		}
		if cerr := f.Provider.ConfirmAbsent(ctx, node); cerr != nil {
			cerr = fmt.Errorf("%w: the inventories miss the VM, but a direct search does not confirm it absent: %w", ErrUnknown, cerr)
			f.add(key, cerr)
			return VM{}, cerr
		}
		f.add(key, err) // the confirmed absence too
		return VM{}, err
	case err != nil:
		return VM{}, fmt.Errorf("%w: %w", ErrUnknown, err)
	}
	return VM{ID: vmID(id.VM.VCenter, id.VM.Ref), VMName: id.VM.Name, Name: id.VM.Location(),
		PoweredOn: id.VM.PowerState == types.VirtualMachinePowerStatePoweredOn,
		NameKey:   id.NameKey, BoundName: id.BoundName, BoundVMs: id.BoundVMs,
		Guest: GuestReport{Addresses: id.IPs, HostName: id.VM.GuestHostname}}, nil
}

// IPOwners implements Facts.
func (f ProviderFacts) IPOwners(_ context.Context, ip netip.Addr) ([]string, error) {
	owners, err := f.Provider.IPOwners(ip)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnknown, err)
	}
	out := make([]string, len(owners))
	for i, o := range owners {
		out[i] = vmID(o.VCenter, o.Ref)
	}
	return out, nil
}

// IPHolders implements Facts.
func (f ProviderFacts) IPHolders(ctx context.Context, ip netip.Addr, notBefore time.Time) ([]Holder, error) {
	found, err := f.Provider.AddressHolders(ctx, ip, notBefore)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnknown, err)
	}
	out := make([]Holder, len(found))
	for i, h := range found {
		out[i] = Holder{ID: vmID(h.VCenter, h.Ref), Host: h.Ref.Type == "HostSystem", What: h.String()}
	}
	return out, nil
}

func (f ProviderFacts) get(key string) (any, bool) {
	if f.recent == nil {
		return nil, false
	}
	return f.recent.Get(key)
}

func (f ProviderFacts) add(key string, v any) {
	if f.recent != nil {
		f.recent.Add(key, v, RecentFor)
	}
}

func vmID(vcenter string, ref types.ManagedObjectReference) string { return vcenter + "/" + ref.Value }
