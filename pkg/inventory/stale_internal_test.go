package inventory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// connected is a Client that is always connected and never asked.
type connected struct{}

func (connected) Name() string                                                            { return "vc" }
func (connected) Config() config.VCenter                                                  { return config.VCenter{Name: "vc"} }
func (connected) Health() vcenter.Health                                                  { return vcenter.Health{State: vcenter.Connected} }
func (connected) HealthChanged() <-chan struct{}                                          { return nil }
func (connected) Do(context.Context, func(context.Context, *vcenter.Session) error) error { return nil }

// TestStaleAfter: an index is current only while its last successful
// round is younger than StaleAfter; the next round makes it current again.
func TestStaleAfter(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ix := NewIndex(connected{}, Options{StaleAfter: 30 * time.Second, Clock: fc})
	ix.status.fullReadDone()

	steps := []struct {
		advance time.Duration
		round   bool // a round completes after advancing
		stale   bool
	}{
		{0, false, false},
		{30 * time.Second, false, false}, // at the bound: still current
		{time.Second, false, true},       // past it
		{time.Hour, false, true},
		{0, true, false}, // a round: current again
		{29 * time.Second, false, false},
	}
	for i, s := range steps {
		fc.SetTime(fc.Now().Add(s.advance))
		if s.round {
			ix.status.roundDone()
		}
		ok, _, err := ix.Status()
		if ok == s.stale || s.stale != errors.Is(err, ErrStale) || (err == nil) != ok {
			t.Errorf("step %d: Status = %v, %v; want stale %v", i, ok, err, s.stale)
		}
		if s.stale && ix.AbsenceError() == nil {
			t.Errorf("step %d: a stale index proves absence", i)
		}
	}
}

// TestUnreadableIdentities: a VM without a BIOS UUID, or whose connection
// state says its identity may be wrong, is counted until it is readable
// again or leaves; then the index proves absence again.
func TestUnreadableIdentities(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	ix := NewIndex(connected{}, Options{Clock: fc})
	ix.status.fullReadDone()
	vm := func(r string, changes ...types.PropertyChange) types.ObjectUpdate {
		return types.ObjectUpdate{Kind: types.ObjectUpdateKindModify, Obj: types.ManagedObjectReference{Type: "VirtualMachine", Value: r}, ChangeSet: changes}
	}
	uuid := func(s string) types.PropertyChange { return types.PropertyChange{Name: "config.uuid", Val: s} }
	state := func(s types.VirtualMachineConnectionState) types.PropertyChange {
		return types.PropertyChange{Name: "runtime.connectionState", Val: s}
	}
	steps := []struct {
		name   string
		update types.ObjectUpdate
		want   []string // unreadable refs
	}{
		{"readable", vm("vm-1", uuid("42010000-0000-4001-8000-000000000001"), state("connected")), nil},
		{"config unset", vm("vm-2", types.PropertyChange{Name: "config.uuid"}, state("connected")), []string{"vm-2"}},
		{"inaccessible", vm("vm-1", state("inaccessible")), []string{"vm-1", "vm-2"}},
		{"orphaned", vm("vm-1", state("orphaned")), []string{"vm-1", "vm-2"}},
		{"disconnected host: identity still known", vm("vm-1", state("disconnected")), []string{"vm-2"}},
		{"UUID back", vm("vm-2", uuid("42010000-0000-4001-8000-000000000002")), nil},
		{"invalid", vm("vm-2", state("invalid")), []string{"vm-2"}},
		{"left", types.ObjectUpdate{Kind: types.ObjectUpdateKindLeave, Obj: types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-2"}}, nil},
	}
	for _, s := range steps {
		ix.store.write(func(d *data) bool {
			applyIdentity(d, s.update)
			return true
		})
		var got []string
		for _, u := range ix.Unreadable() {
			got = append(got, u.Ref)
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: unreadable = %q, want %q", s.name, got, s.want)
		}
		var ue *UnreadableError
		if err := ix.AbsenceError(); (len(s.want) > 0) != errors.As(err, &ue) {
			t.Errorf("%s: AbsenceError = %v", s.name, err)
		}
	}
}

// TestFirstReadStatus: before its first full read completes, an index
// says it is not synced yet, and what the last attempt met; the objects
// read ahead of the read place VMs for staleAfter after they were read or
// after the read's last page, whichever is later: a read making progress
// keeps them, one that stopped (a failed page) lets them expire. Its
// pages are "arriving" from when the collector began, however long a page
// takes (up to PageTimeout), until a page fails (and the pages after it
// no longer keep the objects read before it); the next page clears the
// failure and arrives again.
func TestFirstReadStatus(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	ix := NewIndex(connected{}, Options{StaleAfter: 30 * time.Second, SearchTimeout: 10 * time.Second, Clock: fc})
	ix.status.roundFailed(errors.New("not connected yet"))
	ix.status.objectsReadAhead()
	if !ix.ObjectsKnown() {
		t.Fatal("objects just read ahead not known")
	}
	if _, _, err := ix.Status(); err == nil || !strings.Contains(err.Error(), "not synced yet (the last attempt failed: not connected yet)") {
		t.Errorf("status during the read: %v; want not synced yet, with the earlier failure", err)
	}
	if ix.pagesArriving() {
		t.Error("pages arriving before a collector began the read")
	}
	fc.Step(31 * time.Second)
	if ix.ObjectsKnown() {
		t.Error("objects still known after staleAfter")
	}

	// A collector begins the read again: pages arrive, and each keeps the
	// objects (read again ahead of it) and the status current.
	ix.status.objectsReadAhead()
	ix.status.beginFullRead()
	if !ix.pagesArriving() {
		t.Error("pages not arriving when the read has just begun")
	}
	for range 4 {
		fc.Step(9 * time.Second)
		ix.status.pageRead()
		if !ix.ObjectsKnown() || !ix.pagesArriving() {
			t.Fatalf("a read with a page every 9s: objects known %v, pages arriving %v", ix.ObjectsKnown(), ix.pagesArriving())
		}
	}
	if _, _, err := ix.Status(); err == nil || !strings.Contains(err.Error(), "being read for the first time (0 VMs so far)") {
		t.Errorf("status while pages arrive: %v", err)
	}
	fc.Step(11 * time.Second)
	if !ix.pagesArriving() || !ix.ObjectsKnown() {
		t.Errorf("no page for 11s: pages arriving %v (want true: only slow), objects known %v (want true)", ix.pagesArriving(), ix.ObjectsKnown())
	}
	// No page and no failure for longer than PageTimeout (default 90s):
	// the read stopped without saying so.
	fc.Step(80 * time.Second)
	if ix.pagesArriving() {
		t.Error("pages arriving after 91s without a page or a failure")
	}
	ix.status.pageRead()
	ix.status.roundFailed(errors.New("page lost"))
	if ix.pagesArriving() {
		t.Error("pages arriving after a failed page")
	}
	fc.Step(31 * time.Second)
	if ix.ObjectsKnown() {
		t.Error("objects known staleAfter after a failed page")
	}
	ix.status.pageRead()
	if _, _, err := ix.Status(); err == nil || strings.Contains(err.Error(), "page lost") {
		t.Errorf("status after the next page: %v; want the failure cleared", err)
	}
	if ix.ObjectsKnown() {
		t.Error("a page after a failure revived objects read ahead of the failed round")
	}
	if !ix.pagesArriving() {
		t.Error("pages not arriving again after the page that followed a failure")
	}
}
