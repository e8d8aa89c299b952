package inventory_test

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestAddressHolders, against three simulated vCenters (vc-a with dc-2
// configured, dc-1 out of scope): ESXi hosts' VMkernel addresses and the
// primary guest addresses of the VMs out of scope are found, the VMs in
// scope are not (IPOwners answers for those); the addresses asked for
// at once share one read per vCenter; a change is seen by an address
// asked for after it, while one asked for before reuses the snapshot
// until HoldersFor has passed; a vCenter down is an error naming it,
// the others' holders still returned, and once it is back it is read
// again.
func TestAddressHolders(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	e := connect(t, "", map[string][]string{"vc-a": {"datacenters: [dc-2]"}},
		vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1", "dc-2"}, Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-b", Hosts: 1, VMs: 2},
		vcsim.Spec{Name: "vc-c", Hosts: 1, VMs: 2})
	var clients []inventory.Client
	for _, c := range e.pool.Clients() {
		clients = append(clients, c)
	}
	inv := inventory.New(clients, inventory.Options{MaxWait: time.Second, GuestIPs: true, Clock: clk})
	rctx, stop := context.WithCancel(e.ctx)
	inv.Start(rctx)
	t.Cleanup(func() { stop(); inv.Wait() })
	must.OK(t, inv.WaitForSync(e.ctx))

	a, b, c := e.fleet.VCenter("vc-a"), e.fleet.VCenter("vc-b"), e.fleet.VCenter("vc-c")
	var outside, inside vcsim.VM
	for _, vm := range a.VMs {
		if vm.Datacenter == "dc-1" {
			outside = vm
		} else {
			inside = vm
		}
	}
	const vmk, moved = "10.98.0.9", "10.98.0.10"
	b.AddHostAddress(b.VMs[0].HostRef, vmk)
	for _, v := range e.fleet.VCenters {
		v.CountMethods()
	}
	ask := func(ip string, notBefore time.Time) ([]inventory.AddressHolder, error) {
		return inv.AddressHolders(e.ctx, netip.MustParseAddr(ip), notBefore)
	}
	views := func(v *vcsim.VCenter) int64 { return v.Methods()["CreateContainerView"] }

	// At once: the host's address, the out-of-scope VM's, the in-scope
	// VM's and 17 addresses nobody has.
	asked := clk.Now()
	var wg sync.WaitGroup
	got := make([][]inventory.AddressHolder, 20)
	errs := make([]error, 20)
	ips := []string{vmk, outside.IPv4, inside.IPv4}
	for i := range 17 {
		ips = append(ips, netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}).String())
	}
	for i, ip := range ips {
		wg.Go(func() { got[i], errs[i] = ask(ip, asked) })
	}
	wg.Wait()
	for i, err := range errs {
		must.OK(t, err)
		switch i {
		case 0:
			if len(got[i]) != 1 || got[i][0].VCenter != "vc-b" || got[i][0].Ref != b.VMs[0].HostRef {
				t.Errorf("holders of %s: %v, want vc-b's host %s", vmk, got[i], b.VMs[0].HostRef)
			}
		case 1:
			if len(got[i]) != 1 || got[i][0].VCenter != "vc-a" || got[i][0].Ref != outside.Ref {
				t.Errorf("holders of %s: %v, want vc-a's %s in dc-1, out of scope", outside.IPv4, got[i], outside.Ref)
			}
		default:
			if len(got[i]) != 0 {
				t.Errorf("holders of %s: %v, want none (in scope, or nobody's)", ips[i], got[i])
			}
		}
	}
	// One read each: vc-a's hosts, its datacenters and dc-1's VMs; the
	// others' hosts (their scope is every datacenter).
	for v, want := range map[*vcsim.VCenter]int64{a: 3, b: 1, c: 1} {
		if n := views(v); n != want {
			t.Errorf("%s: %d container views for 20 addresses asked at once, want %d (one read)", v.Name, n, want)
		}
	}

	// The host's address moves: asked for before the move, the snapshot
	// is reused; after it, read again.
	b.AddHostAddress(b.VMs[0].HostRef, moved)
	if h, err := ask(moved, asked); err != nil || len(h) != 0 {
		t.Errorf("asked for before the change: %v, %v; want the snapshot's answer (none)", h, err)
	}
	if n := views(b); n != 1 {
		t.Errorf("vc-b: %d container views, want the snapshot reused (1)", n)
	}
	clk.Step(time.Second)
	if h, err := ask(moved, clk.Now()); err != nil || len(h) != 1 || h[0].Ref != b.VMs[0].HostRef {
		t.Errorf("asked for after the change: %v, %v; want vc-b's host", h, err)
	}
	clk.Step(inventory.HoldersFor)
	before := views(c)
	if _, err := ask(vmk, asked); err != nil {
		t.Fatal(err)
	}
	if n := views(c) - before; n != 1 {
		t.Errorf("vc-c: %d reads once the snapshot is HoldersFor old, want 1", n)
	}

	// vc-c down: an error naming it; the others answer.
	must.OK(t, c.SetMode(vcsim.Down))
	clk.Step(time.Second)
	h, err := ask(vmk, clk.Now())
	if err == nil || !strings.Contains(err.Error(), `"vc-c"`) {
		t.Errorf("vc-c down: %v, want an error naming vc-c", err)
	}
	if len(h) != 1 || h[0].Ref.Type != "HostSystem" {
		t.Errorf("vc-c down: holders %v, want vc-b's host still", h)
	}
	// Back: a failed read is not reused by a later call, however recent.
	must.OK(t, c.SetMode(vcsim.Up))
	asked = clk.Now()
	clk.Step(time.Millisecond)
	// Until the pool has reconnected to vc-c; each call after a failed
	// read reads again.
	poll.True(t, "vc-c's holders read again", func() bool {
		clk.Step(time.Millisecond)
		_, err := ask(vmk, asked)
		return err == nil
	})
}
