package inventory

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// AddressHolder is a VM or an ESXi host that has an IP address, found by
// AddressHolders.
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

// HoldersFor is how long a vCenter's snapshot of address holders is
// reused, at most.
const HoldersFor = 10 * time.Second

// AddressHolders tells which ESXi hosts (by their VMkernel adapters'
// addresses) and which VMs outside the configured datacenters (by the
// primary address their guest reports, guest.ipAddress) have ip, in
// every vCenter: what vCenter's SearchIndex.FindAllByIp finds beyond the
// VMs the inventory follows (IPOwners answers for those).
//
// Each vCenter answers from a snapshot of its holders read after
// notBefore (clamped to now) and at most HoldersFor ago: one read of
// every host's adapters and of the VMs of the datacenters out of scope
// (a few requests), shared by every address asked for meanwhile, instead
// of two searches per address. At most one read per vCenter is in flight;
// an address asked for while one is, after it started, waits for the
// next. It returns every holder found, and an error when a vCenter could
// not answer (the list may then miss one).
func (inv *Inventory) AddressHolders(ctx context.Context, ip netip.Addr, notBefore time.Time) ([]AddressHolder, error) {
	ip = ip.Unmap().WithZone("")
	found := make([][]AddressHolder, len(inv.indexes))
	errs := make([]error, len(inv.indexes))
	var wg sync.WaitGroup
	for i, ix := range inv.indexes {
		wg.Go(func() {
			snap, err := ix.holders.get(ctx, ix, notBefore)
			if err != nil {
				errs[i] = fmt.Errorf("vCenter %q: the ESXi hosts and the VMs out of scope that have IP %s: %w", ix.VCenter(), ip, err)
				return
			}
			for _, ref := range snap.byIP[ip] {
				found[i] = append(found[i], AddressHolder{VCenter: ix.VCenter(), Ref: ref})
			}
		})
	}
	wg.Wait()
	out := slices.Concat(found...)
	slices.SortFunc(out, func(a, b AddressHolder) int { return strings.Compare(a.String(), b.String()) })
	return out, errors.Join(errs...)
}

// holdersSnapshot is one read of a vCenter's address holders.
type holdersSnapshot struct {
	started, ended time.Time
	byIP           map[netip.Addr][]types.ManagedObjectReference
	err            error
}

// holdersCache keeps an index's last snapshot and the read in flight.
type holdersCache struct {
	mu       sync.Mutex
	last     *holdersSnapshot
	inflight chan struct{} // closed when the read in flight ends; nil: none
}

// get returns a snapshot started at or after notBefore (clamped to now)
// and less than HoldersFor old, reading one if need be. A failed read is
// the answer only to the calls that waited for it: a later call reads
// again.
func (h *holdersCache) get(ctx context.Context, ix *Index, notBefore time.Time) (*holdersSnapshot, error) {
	called := ix.clock.Now()
	if notBefore.After(called) {
		notBefore = called // a clock ahead of ours (the API server's) must not ask for the future
	}
	for {
		h.mu.Lock()
		if s := h.last; s != nil && !s.started.Before(notBefore) && ix.clock.Since(s.started) < HoldersFor &&
			(s.err == nil || !s.ended.Before(called)) {
			h.mu.Unlock()
			return s, s.err
		}
		if h.inflight != nil {
			done := h.inflight
			h.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		h.inflight = done
		started := ix.clock.Now()
		h.mu.Unlock()

		// Not the caller's context: the read serves every caller that
		// waits for it, whoever asked first.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ix.searchTimeout)
		byIP, err := ix.readHolders(rctx)
		cancel()
		h.mu.Lock()
		h.last = &holdersSnapshot{started: started, ended: ix.clock.Now(), byIP: byIP, err: err}
		h.inflight = nil
		close(done)
		h.mu.Unlock()
	}
}

// readHolders reads every ESXi host's VMkernel addresses and, when the
// scope is some datacenters, the primary guest address of every VM in
// the others.
func (ix *Index) readHolders(ctx context.Context) (map[netip.Addr][]types.ManagedObjectReference, error) {
	var out map[netip.Addr][]types.ManagedObjectReference
	err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		out = map[netip.Addr][]types.ManagedObjectReference{}
		add := func(addr string, ref types.ManagedObjectReference) {
			if a, err := netip.ParseAddr(addr); err == nil {
				a = a.Unmap().WithZone("")
				if !slices.Contains(out[a], ref) {
					out[a] = append(out[a], ref)
				}
			}
		}
		c := s.VIM
		var hosts []mo.HostSystem
		if err := retrieveIn(ctx, c, c.ServiceContent.RootFolder, "HostSystem", []string{"config.network.vnic"}, &hosts); err != nil {
			return fmt.Errorf("read the ESXi hosts' VMkernel adapters: %w", err)
		}
		for _, h := range hosts {
			if h.Config == nil || h.Config.Network == nil {
				continue // disconnected: vCenter's search does not find it either
			}
			for _, nic := range h.Config.Network.Vnic {
				if nic.Spec.Ip == nil {
					continue
				}
				add(nic.Spec.Ip.IpAddress, h.Self)
				if v6 := nic.Spec.Ip.IpV6Config; v6 != nil {
					for _, a := range v6.IpV6Address {
						add(a.IpAddress, h.Self)
					}
				}
			}
		}
		others, err := ix.datacentersOutOfScope(ctx, c)
		if err != nil {
			return err
		}
		for _, dc := range others {
			var vms []mo.VirtualMachine
			if err := retrieveIn(ctx, c, dc, "VirtualMachine", []string{"guest.ipAddress"}, &vms); err != nil {
				return fmt.Errorf("read the guest addresses of the VMs in %s, out of scope: %w", dc, err)
			}
			for _, vm := range vms {
				if vm.Guest != nil && vm.Guest.IpAddress != "" {
					add(vm.Guest.IpAddress, vm.Self)
				}
			}
		}
		return nil
	})
	return out, err
}

// datacentersOutOfScope lists the vCenter's datacenters that are not the
// roots of the inventory's views (none when the scope is the whole
// vCenter).
func (ix *Index) datacentersOutOfScope(ctx context.Context, c *vim25.Client) ([]types.ManagedObjectReference, error) {
	roots := ix.scopeRoots.Load()
	if roots == nil {
		r, _, err := ix.scope(ctx, c)
		if err != nil {
			return nil, err
		}
		roots = &r
	}
	if slices.Contains(*roots, c.ServiceContent.RootFolder) {
		return nil, nil
	}
	var dcs []mo.Datacenter
	if err := retrieveIn(ctx, c, c.ServiceContent.RootFolder, "Datacenter", []string{"name"}, &dcs); err != nil {
		return nil, fmt.Errorf("list the datacenters: %w", err)
	}
	var out []types.ManagedObjectReference
	for _, dc := range dcs {
		if !slices.Contains(*roots, dc.Self) {
			out = append(out, dc.Self)
		}
	}
	return out, nil
}

// retrieveIn reads props of every object of kind below root, through a
// container view destroyed after.
func retrieveIn(ctx context.Context, c *vim25.Client, root types.ManagedObjectReference, kind string, props []string, dst any) error {
	v, err := view.NewManager(c).CreateContainerView(ctx, root, []string{kind}, true)
	if err != nil {
		return err
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
	return v.Retrieve(ctx, []string{kind}, props, dst)
}
