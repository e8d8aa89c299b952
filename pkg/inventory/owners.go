package inventory

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vmware/govmomi/vim25/types"
)

// IPOwner is a VM whose guest reports an address.
type IPOwner struct {
	VCenter string
	Ref     types.ManagedObjectReference
	Name    string
}

// String names the VM for humans: vCenter/name (moref).
func (o IPOwner) String() string { return fmt.Sprintf("%s/%s (%s)", o.VCenter, o.Name, o.Ref.Value) }

// IPOwners lists every VM, templates included, in every vCenter, whose
// guest reports ip on a virtual adapter (Options.GuestIPs; guest-only
// adapters are not indexed, see guestIPs), from the indexes
// alone: no request. The list is complete only when every index is
// current (Status) and follows every VM's addresses; otherwise the VMs
// found so far come with an IncompleteError naming what could not answer:
// another VM may report ip there.
func (inv *Inventory) IPOwners(ip netip.Addr) ([]IPOwner, error) {
	ip = ip.Unmap().WithZone("")
	var out []IPOwner
	var causes []error
	for _, ix := range inv.indexes {
		if !ix.guestIPs {
			causes = append(causes, fmt.Errorf("vCenter %q: guest addresses of every VM are not followed (Options.GuestIPs is off)", ix.VCenter()))
			continue
		}
		// The status first, as in find: data read after it is at least as new.
		if ok, _, err := ix.Status(); !ok {
			causes = append(causes, err)
		}
		ix.store.read(func(d *data) {
			for _, id := range d.byIP.get(ip) {
				out = append(out, IPOwner{VCenter: ix.VCenter(), Name: id.name,
					Ref: types.ManagedObjectReference{Type: "VirtualMachine", Value: id.ref}})
			}
		})
	}
	slices.SortFunc(out, func(a, b IPOwner) int { return strings.Compare(a.String(), b.String()) })
	if len(causes) > 0 {
		return out, &IncompleteError{Key: "guest address " + ip.String(), Causes: causes}
	}
	return out, nil
}
