package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

type env struct {
	fleet *vcsim.Fleet
	pool  *vcenter.Pool
	inv   *inventory.Inventory
	ctx   context.Context
}

// setup starts vc-a (dc-1, dc-2), vc-b and vc-c, connects and syncs.
// datacenters optionally limits vc-a's datacenters in the config.
func setup(t *testing.T, datacenters ...string) *env {
	t.Helper()
	per := map[string][]string{}
	if len(datacenters) > 0 {
		per["vc-a"] = []string{"datacenters: [" + strings.Join(datacenters, ", ") + "]"}
	}
	e := connect(t, "", per,
		vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1", "dc-2"}, Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-b", Hosts: 1, VMs: 2},
		vcsim.Spec{Name: "vc-c", Hosts: 1, VMs: 2})
	ctx, pool := e.ctx, e.pool
	var clients []inventory.Client
	for _, c := range pool.Clients() {
		clients = append(clients, c)
	}
	// Not eager: the tests exercise details on demand, the harder path
	// (TestSmallVCenterKeepsEveryDetail covers the eager one).
	inv := inventory.New(clients, inventory.Options{MaxWait: time.Second, EagerDetailsMax: -1, GuestHostnames: true})
	rctx, stop := context.WithCancel(ctx)
	inv.Start(rctx)
	t.Cleanup(func() { stop(); inv.Wait() }) // before the pool and the simulators close
	if err := inv.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	e.inv = inv
	return e
}

// connect starts simulated vCenters and a connected pool over them, with
// the global section (default: timeouts of 5 s and 3 s) and per's lines
// added to each vCenter's config; no inventory.
func connect(t *testing.T, global string, per map[string][]string, specs ...vcsim.Spec) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	f, err := vcsim.Start(ctx, specs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	if global == "" {
		global = "global:\n  connectTimeout: 5s\n  requestTimeout: 3s\n"
	}
	text := f.Config(global, per)
	cfg, _, err := config.Parse("test.yaml", []byte(text), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.New(cfg, credentials.Options{})
	if err := creds.StartAndWait(ctx); err != nil {
		t.Fatal(err)
	}
	pool, err := vcenter.NewPool(cfg, vcenter.Options{Credentials: creds, RetryMin: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pool.Start(ctx)
	t.Cleanup(pool.Close)
	return &env{fleet: f, pool: pool, ctx: ctx}
}

func TestLookups(t *testing.T) {
	e := setup(t)
	all := e.fleet.VMs()
	if got := len(all); got != 2*2+2+2 {
		t.Fatalf("fleet has %d VMs", got)
	}
	for _, want := range all {
		for _, key := range []string{want.UUID, strings.ToUpper(want.UUID), inventory.SwapUUID(want.UUID)} {
			vm, err := e.inv.FindByUUID(e.ctx, key)
			if err != nil {
				t.Fatalf("FindByUUID(%s): %v", key, err)
			}
			if vm.Ref != want.Ref || vm.VCenter != want.VCenter || vm.Datacenter != want.Datacenter || vm.Name != want.Name ||
				vm.Host != want.HostRef || vm.GuestHostname != want.Name || len(vm.NICs) != 1 || vm.NICs[0].IPs[0] != want.IPv4 ||
				vm.PowerState != types.VirtualMachinePowerStatePoweredOn || vm.NumCPU == 0 || vm.MemoryMB == 0 {
				t.Errorf("FindByUUID(%s) = %+v, want %+v", key, vm, want)
			}
		}
		if vm, err := e.inv.FindByName(e.ctx, want.Name); err != nil || vm.Ref != want.Ref || vm.VCenter != want.VCenter {
			t.Errorf("FindByName(%s) = %v, %v", want.Name, vm.Location(), err)
		}
		if vm, err := e.inv.FindByGuestHostname(e.ctx, strings.ToUpper(want.Name)); err != nil || vm.Ref != want.Ref {
			t.Errorf("FindByGuestHostname(%s) = %v, %v", want.Name, vm.Location(), err)
		}
	}
	_, err := e.inv.FindByUUID(e.ctx, "4299ffff-0000-4000-8000-000000000000")
	if !errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("unknown UUID: %v, want ErrNotFound", err)
	}
	if _, err := e.inv.FindByUUID(e.ctx, "not-a-uuid"); err == nil || errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("malformed UUID: %v, want a plain error", err)
	}
}

func TestDatacenterScope(t *testing.T) {
	e := setup(t, "dc-2")
	a := e.fleet.VCenter("vc-a")
	for _, vm := range a.VMs {
		_, err := e.inv.FindByUUID(e.ctx, vm.UUID)
		if vm.Datacenter == "dc-2" && err != nil {
			t.Errorf("%s in dc-2: %v", vm.Name, err)
		}
		if vm.Datacenter == "dc-1" && !errors.Is(err, inventory.ErrNotFound) {
			t.Errorf("%s in dc-1 (not configured): %v, want ErrNotFound", vm.Name, err)
		}
	}
}

func TestDuplicatesAreAmbiguous(t *testing.T) {
	e := setup(t)
	a, b := e.fleet.VCenter("vc-a"), e.fleet.VCenter("vc-b")
	dup := a.VMs[0]
	// Give a VM in vc-b the same BIOS UUID and the same name.
	victim := b.VMs[0]
	b.SetUUID(victim.Ref, dup.UUID)
	vm := object.NewVirtualMachine(b.Admin(), victim.Ref)
	task, err := vm.Rename(e.ctx, dup.Name)
	if err == nil {
		err = task.Wait(e.ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the index to see the changes", func() bool {
		_, err := e.inv.FindByName(e.ctx, dup.Name)
		return errors.Is(err, inventory.ErrAmbiguous)
	})
	_, err = e.inv.FindByUUID(e.ctx, dup.UUID)
	var amb *inventory.AmbiguousError
	if !errors.As(err, &amb) || len(amb.Candidates) != 2 {
		t.Fatalf("duplicate UUID: %v, want an AmbiguousError with 2 candidates", err)
	}
	for _, want := range []string{"vc-a/dc-1/" + dup.Name, "vc-b/dc-1/" + dup.Name, dup.UUID} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestChangesAreFollowed(t *testing.T) {
	e := setup(t)
	c := e.fleet.VCenter("vc-c")
	target := c.VMs[0]
	vm := object.NewVirtualMachine(c.Admin(), target.Ref)

	// Power off.
	runTask(t, e.ctx, vm.PowerOff)
	poll.True(t, "powered off in the index", func() bool {
		got, err := e.inv.FindByUUID(e.ctx, target.UUID)
		return err == nil && got.PowerState == types.VirtualMachinePowerStatePoweredOff
	})

	// Destroy: the next lookup is ErrNotFound (every vCenter answered).
	runTask(t, e.ctx, vm.Destroy)
	poll.True(t, "gone from the index", func() bool {
		_, err := e.inv.FindByUUID(e.ctx, target.UUID)
		return errors.Is(err, inventory.ErrNotFound)
	})
}

func TestVCenterDown(t *testing.T) {
	e := setup(t)
	a := e.fleet.VCenter("vc-a")
	if err := a.SetMode(vcsim.Down); err != nil {
		t.Fatal(err)
	}
	ca, _ := e.pool.Client("vc-a")
	poll.True(t, "vc-a seen down", func() bool {
		_ = ca.Do(e.ctx, func(ctx context.Context, s *vcenter.Session) error {
			_, err := object.NewSearchIndex(s.VIM).FindByUuid(ctx, nil, "x", true, nil)
			return err
		})
		return ca.Health().State == vcenter.Down
	})
	// VMs of the other vCenters are still found.
	for _, vm := range e.fleet.VCenter("vc-b").VMs {
		if _, err := e.inv.FindByUUID(e.ctx, vm.UUID); err != nil {
			t.Errorf("%s: %v", vm.Name, err)
		}
	}
	// A miss is not "not found": vc-a could not be asked.
	_, err := e.inv.FindByUUID(e.ctx, "4299ffff-0000-4000-8000-000000000000")
	if err == nil || errors.Is(err, inventory.ErrNotFound) || !errors.Is(err, vcenter.ErrUnavailable) {
		t.Errorf("miss while vc-a is down: %v, want an error wrapping ErrUnavailable, not ErrNotFound", err)
	}
	if _, err := e.inv.FindByName(e.ctx, "no-such-vm"); err == nil || errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("name miss while vc-a is down: %v, want an error, not ErrNotFound", err)
	}
	if err := a.SetMode(vcsim.Up); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "vc-a back", func() bool {
		_, err := e.inv.FindByName(e.ctx, "no-such-vm")
		return errors.Is(err, inventory.ErrNotFound)
	})
}

func TestSameUUID(t *testing.T) {
	const u = "4211a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5b"
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{u, u, true},
		{u, strings.ToUpper(u), true},
		{u, inventory.SwapUUID(u), true},
		{inventory.SwapUUID(u), u, true},
		{u, "4211a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5c", false},
		{"", "", false},
		{"not-a-uuid", "not-a-uuid", false},
	} {
		if got := inventory.SameUUID(tc.a, tc.b); got != tc.want {
			t.Errorf("SameUUID(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestSwapUUID(t *testing.T) {
	cases := map[string]string{
		"42010203-0405-0607-0809-0a0b0c0d0e0f": "03020142-0504-0706-0809-0a0b0c0d0e0f",
		"ABCDEF01-2345-6789-ABCD-EF0123456789": "01efcdab-4523-8967-abcd-ef0123456789",
		"not-a-uuid":                           "",
		"42010203-0405-0607-0809-0a0b0c0d0e0g": "",
	}
	for in, want := range cases {
		if got := inventory.SwapUUID(in); got != want {
			t.Errorf("SwapUUID(%q) = %q, want %q", in, got, want)
		}
		if want != "" && inventory.SwapUUID(want) != strings.ToLower(in) {
			t.Errorf("SwapUUID is not its own inverse for %q", in)
		}
	}
}

// destroy powers a VM off and deletes it, as an administrator would.
// runTask runs a VM operation as an administrator would and waits for it.
func runTask(t *testing.T, ctx context.Context, op func(context.Context) (*object.Task, error)) {
	t.Helper()
	task, err := op(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func destroy(t *testing.T, ctx context.Context, v *vcsim.VCenter, ref types.ManagedObjectReference) {
	t.Helper()
	vm := object.NewVirtualMachine(v.Admin(), ref)
	if task, err := vm.PowerOff(ctx); err == nil {
		_ = task.Wait(ctx) // it may be off already
	}
	runTask(t, ctx, vm.Destroy)
}

// TestRecoversAfterFollowedVMDeleted: a VM whose details were followed is
// deleted, seen leaving or not (deleted while the vCenter was away); every
// new collector after that (new session, vCenter back) still starts, and
// the index is current again.
func TestRecoversAfterFollowedVMDeleted(t *testing.T) {
	e := setup(t)
	b := e.fleet.VCenter("vc-b")
	ix := e.inv.Index("vc-b")
	current := func(what string) {
		t.Helper()
		poll.True(t, what, func() bool {
			ok, _, _ := ix.Status()
			return ok
		})
	}
	for _, vm := range b.VMs {
		if _, err := e.inv.FindByUUID(e.ctx, vm.UUID); err != nil { // follows its details
			t.Fatal(err)
		}
	}

	// Deleted while followed: seen leaving, then a new session.
	destroy(t, e.ctx, b, b.VMs[0].Ref)
	poll.True(t, "the deleted VM gone from the index", func() bool {
		_, err := e.inv.FindByUUID(e.ctx, b.VMs[0].UUID)
		return errors.Is(err, inventory.ErrNotFound)
	})
	reads := ix.FullReads()
	if _, err := b.TerminateSessions(e.ctx); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "a new full read after the new session", func() bool { return ix.FullReads() > reads })
	current("current again after the new session")

	// Deleted while the vCenter was away: its leaving was never seen.
	if err := b.SetMode(vcsim.Down); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "vc-b not current", func() bool {
		ok, _, _ := ix.Status()
		return !ok
	})
	destroy(t, e.ctx, b, b.VMs[1].Ref)
	if _, err := b.TerminateSessions(e.ctx); err != nil {
		t.Fatal(err)
	}
	reads = ix.FullReads()
	if err := b.SetMode(vcsim.Up); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "a new full read after the vCenter returned", func() bool { return ix.FullReads() > reads })
	current("current again after the vCenter returned")
	if _, err := e.inv.FindByUUID(e.ctx, b.VMs[1].UUID); !errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("the VM deleted while away: %v, want ErrNotFound", err)
	}
}

// TestReplacedSessionsLeaveNoConnections: sessions replaced while the
// index's long poll and its collector's cleanup run on them leave no
// connection open once those requests have ended (each open connection
// holds two goroutines until the vCenter closes it; the fault soak found
// replicas growing by a hundred).
func TestReplacedSessionsLeaveNoConnections(t *testing.T) {
	e := setup(t)
	v := e.fleet.VCenter("vc-b")
	ix := e.inv.Index("vc-b")
	base := v.Connections()
	const replaced = 4
	for range replaced {
		reads := ix.FullReads()
		if _, err := v.TerminateSessions(e.ctx); err != nil {
			t.Fatal(err)
		}
		poll.True(t, "the index read again on a new session", func() bool {
			ok, _, _ := ix.Status()
			return ok && ix.FullReads() > reads
		})
	}
	poll.NoError(t, "the replaced sessions' connections closed", 30*time.Second, func() error {
		if n := v.Connections(); n > base+1 {
			return fmt.Errorf("%d connections open to vc-b after %d replaced sessions (%d before)", n, replaced, base)
		}
		return nil
	})
}
