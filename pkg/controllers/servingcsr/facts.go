package servingcsr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// Identities is what the provider answers (*provider.Provider).
type Identities interface {
	ServingIdentity(ctx context.Context, node *v1.Node) (provider.ServingIdentity, error)
	IPOwners(ip netip.Addr) ([]inventory.IPOwner, error)
	SearchIP(ctx context.Context, ip netip.Addr) ([]inventory.AddressHolder, error)
	ConfirmAbsent(ctx context.Context, node *v1.Node) error
}

var _ Identities = (*provider.Provider)(nil)

// ProviderFacts are the Facts of the provider's inventories: every error
// but a VM proven absent is "cannot be told now".
type ProviderFacts struct{ Provider Identities }

// NodeVM implements Facts. A VM the inventories miss is absent only when
// every vCenter, asked directly in all its datacenters, says so (a VM
// between two inventory updates, or moving between vCenters, is missed
// for a moment): one request per vCenter, only on a miss.
func (f ProviderFacts) NodeVM(ctx context.Context, node *v1.Node) (VM, error) {
	id, err := f.Provider.ServingIdentity(ctx, node)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		if cerr := f.Provider.ConfirmAbsent(ctx, node); cerr != nil {
			return VM{}, fmt.Errorf("%w: the inventories miss the VM, but a direct search does not confirm it absent: %w", ErrUnknown, cerr)
		}
		return VM{}, err
	case err != nil:
		return VM{}, fmt.Errorf("%w: %w", ErrUnknown, err)
	}
	return VM{ID: vmID(id.VM.VCenter, id.VM.Ref), VMName: id.VM.Name, Name: id.VM.Location(),
		PoweredOn: id.VM.PowerState == types.VirtualMachinePowerStatePoweredOn,
		Guest:     GuestReport{Addresses: id.IPs, HostName: id.VM.GuestHostname}}, nil
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
func (f ProviderFacts) IPHolders(ctx context.Context, ip netip.Addr) ([]Holder, error) {
	found, err := f.Provider.SearchIP(ctx, ip)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnknown, err)
	}
	out := make([]Holder, len(found))
	for i, h := range found {
		out[i] = Holder{ID: vmID(h.VCenter, h.Ref), Host: h.Ref.Type == "HostSystem", What: h.String()}
	}
	return out, nil
}

func vmID(vcenter string, ref types.ManagedObjectReference) string { return vcenter + "/" + ref.Value }
