package inventory

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// AddressHolder is a VM or an ESXi host that a vCenter's search index
// finds by an IP address.
type AddressHolder struct {
	VCenter string
	// Ref is the VM's or the host's reference (Type VirtualMachine or
	// HostSystem).
	Ref types.ManagedObjectReference
}

// String names the holder for humans: vCenter/type/moref.
func (h AddressHolder) String() string {
	kind := "VM"
	if h.Ref.Type == "HostSystem" {
		kind = "ESXi host"
	}
	return fmt.Sprintf("%s %s in vCenter %q", kind, h.Ref.Value, h.VCenter)
}

// SearchIP asks every vCenter directly, in all of its datacenters
// (configured or not), which VMs and which ESXi hosts have ip: two
// SearchIndex.FindAllByIp requests per vCenter (one for VMs, one for
// hosts), the vCenters in parallel, each within SearchTimeout. vCenter
// matches a VM by the primary address its guest reports (guest.ipAddress)
// and a host by its VMkernel adapters' addresses. It returns every holder
// found, and an error when a vCenter could not answer (the list may then
// miss one).
func (inv *Inventory) SearchIP(ctx context.Context, ip netip.Addr) ([]AddressHolder, error) {
	ip = ip.Unmap().WithZone("")
	found := make([][]AddressHolder, len(inv.indexes))
	errs := make([]error, len(inv.indexes))
	var wg sync.WaitGroup
	for i, ix := range inv.indexes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, inv.opts.SearchTimeout)
			defer cancel()
			holders, err := ix.searchIP(ctx, ip.String())
			found[i] = holders
			if err != nil {
				errs[i] = fmt.Errorf("vCenter %q: search by IP %s: %w", ix.VCenter(), ip, err)
			}
		})
	}
	wg.Wait()
	out := slices.Concat(found...)
	slices.SortFunc(out, func(a, b AddressHolder) int { return strings.Compare(a.String(), b.String()) })
	return out, errors.Join(errs...)
}

func (ix *Index) searchIP(ctx context.Context, ip string) ([]AddressHolder, error) {
	var out []AddressHolder
	err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		out = out[:0]
		si := object.NewSearchIndex(s.VIM)
		for _, vms := range []bool{true, false} {
			refs, err := si.FindAllByIp(ctx, nil, ip, vms)
			if err != nil {
				return err
			}
			for _, r := range refs {
				out = append(out, AddressHolder{VCenter: ix.VCenter(), Ref: r.Reference()})
			}
		}
		return nil
	})
	return out, err
}
