package inventory_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestIPOwners: with GuestIPs, every VM's guest addresses are followed in
// every vCenter, so who reports an address is a map read: a VIP two VMs
// report has two owners, an address that moved has its new owner only,
// and a vCenter that cannot answer makes the list incomplete (another VM
// may report the address there), never silently short.
func TestIPOwners(t *testing.T) {
	e := setup(t)
	inv := newInventory(t, e, inventory.Options{MaxWait: time.Second, EagerDetailsMax: -1, GuestIPs: true})
	owners := func(ip string) []string {
		t.Helper()
		got, err := inv.IPOwners(netip.MustParseAddr(ip))
		if err != nil {
			t.Fatalf("IPOwners(%s): %v", ip, err)
		}
		var out []string
		for _, o := range got {
			out = append(out, o.VCenter+"/"+o.Ref.Value)
		}
		return out
	}
	id := func(vm vcsim.VM) string { return vm.VCenter + "/" + vm.Ref.Value }
	a, b := e.fleet.VCenter("vc-a").VMs[0], e.fleet.VCenter("vc-b").VMs[0]

	for _, vm := range e.fleet.VMs() {
		for _, ip := range []string{vm.IPv4, vm.IPv6} {
			if got := owners(ip); !slices.Equal(got, []string{id(vm)}) {
				t.Errorf("owners of %s (%s): %v, want only it", ip, vm.Name, got)
			}
		}
	}
	if got := owners("::ffff:" + a.IPv4); !slices.Equal(got, []string{id(a)}) {
		t.Errorf("owners of the IPv4-mapped form of %s: %v", a.IPv4, got)
	}
	if got := owners("192.0.2.250"); len(got) != 0 {
		t.Errorf("owners of an address no VM reports: %v", got)
	}

	// A VIP: b's guest reports a's address on a second adapter, as
	// keepalived does; the address has two owners.
	// The change is announced (Changed), though b's details are not kept:
	// a request waiting for the address is retried at once.
	vcB := e.fleet.VCenter("vc-b")
	changed := inv.Index("vc-b").Changed()
	vcB.SetGuest(b.Ref, b.Name, []types.GuestNicInfo{
		{Network: "VM Network", IpAddress: []string{b.IPv4, b.IPv6, a.IPv4}, Connected: true, DeviceConfigId: 4000},
	})
	select {
	case <-changed:
	case <-e.ctx.Done():
		t.Fatal("no change announced for a guest address")
	}
	poll.True(t, "the VIP's second owner followed", func() bool { return len(owners(a.IPv4)) == 2 })
	if got := owners(a.IPv4); !slices.Equal(got, []string{id(a), id(b)}) {
		t.Errorf("owners of the VIP: %v", got)
	}

	// On a guest-only adapter (kube-ipvs0, docker0: deviceConfigId -1),
	// or link-local, an address is not indexed: Nodes share such
	// addresses, and none is ever a Node address.
	vcB.SetGuest(b.Ref, b.Name, []types.GuestNicInfo{
		{Network: "VM Network", IpAddress: []string{b.IPv4, b.IPv6}, Connected: true, DeviceConfigId: 4000},
		{IpAddress: []string{a.IPv4, "10.96.0.1", "169.254.20.10"}, Connected: true, DeviceConfigId: -1},
	})
	poll.True(t, "the guest-only adapter followed", func() bool { return len(owners(a.IPv4)) == 1 && len(owners(b.IPv4)) == 1 })
	if got := owners("10.96.0.1"); len(got) != 0 {
		t.Errorf("an address on a guest-only adapter indexed: %v", got)
	}

	// The address leaves b again: one owner.
	vcB.SetGuest(b.Ref, b.Name, []types.GuestNicInfo{
		{Network: "VM Network", IpAddress: []string{b.IPv4, b.IPv6}, Connected: true, DeviceConfigId: 4000},
	})
	poll.True(t, "the moved address's owner followed", func() bool { return slices.Equal(owners(a.IPv4), []string{id(a)}) })

	// vc-b down: no complete answer, but what the others say is kept.
	if err := vcB.SetMode(vcsim.Down); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "vc-b down", func() bool {
		_, err := inv.IPOwners(netip.MustParseAddr(a.IPv4))
		return err != nil
	})
	got, err := inv.IPOwners(netip.MustParseAddr(a.IPv4))
	var inc *inventory.IncompleteError
	if !errors.As(err, &inc) || len(got) != 1 || got[0].Ref != a.Ref {
		t.Errorf("with vc-b down: %v, %v; want a's VM and an IncompleteError", got, err)
	}
	if err := vcB.SetMode(vcsim.Up); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "vc-b back", func() bool {
		_, err := inv.IPOwners(netip.MustParseAddr(a.IPv4))
		return err == nil
	})
}

// TestIPOwnersNeedsGuestIPs: without the option the index cannot say who
// reports an address, and says so instead of answering "nobody".
func TestIPOwnersNeedsGuestIPs(t *testing.T) {
	e := setup(t)
	a := e.fleet.VCenter("vc-a").VMs[0]
	got, err := e.inv.IPOwners(netip.MustParseAddr(a.IPv4))
	var inc *inventory.IncompleteError
	if !errors.As(err, &inc) || len(got) != 0 {
		t.Errorf("without GuestIPs: %v, %v; want an IncompleteError", got, err)
	}
}

// newInventory starts an inventory with opts over e's vCenters and waits
// for its first read.
func newInventory(t *testing.T, e *env, opts inventory.Options) *inventory.Inventory {
	t.Helper()
	var clients []inventory.Client
	for _, c := range e.pool.Clients() {
		clients = append(clients, c)
	}
	inv := inventory.New(clients, opts)
	ctx, stop := context.WithCancel(e.ctx)
	inv.Start(ctx)
	t.Cleanup(func() { stop(); inv.Wait() })
	if err := inv.WaitForSync(e.ctx); err != nil {
		t.Fatal(err)
	}
	return inv
}
