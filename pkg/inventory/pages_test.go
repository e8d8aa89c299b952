package inventory_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// gatedClient is a vCenter client whose WaitForUpdatesEx calls after the
// first pass wait until open is closed (or their context ends): a first
// read stopped after its first pages, for as long as a test needs. Its
// sessions wrap the client's (one wrapper per session, so that the sync
// loop still sees a session change as one).
type gatedClient struct {
	*vcenter.Client
	pass  int32
	open  chan struct{}
	polls atomic.Int32

	mu      sync.Mutex
	wrapped map[*vcenter.Session]*vcenter.Session
}

func (g *gatedClient) Do(ctx context.Context, fn func(context.Context, *vcenter.Session) error) error {
	return g.Client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error { return fn(ctx, g.wrap(s)) })
}

func (g *gatedClient) wrap(s *vcenter.Session) *vcenter.Session {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w, ok := g.wrapped[s]; ok {
		return w
	}
	vim := *s.VIM
	vim.RoundTripper = gate{next: s.VIM.RoundTripper, g: g}
	w := &vcenter.Session{VIM: &vim, REST: s.REST}
	if g.wrapped == nil {
		g.wrapped = map[*vcenter.Session]*vcenter.Session{}
	}
	g.wrapped[s] = w
	return w
}

type gate struct {
	next soap.RoundTripper
	g    *gatedClient
}

func (r gate) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	if _, ok := req.(*methods.WaitForUpdatesExBody); ok && r.g.polls.Add(1) > r.g.pass {
		select {
		case <-r.g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r.next.RoundTrip(ctx, req, res)
}

// TestFirstReadPagesAnswer: while a vCenter's first read is under way,
// the pages it has read answer lookups: a VM in them is found without a
// direct search (its details read in one request), and Paged wakes those
// waiting for a page. A miss while pages arrive is searched directly
// within the budget (FirstReadSearches, here 1); beyond it, it waits for
// the next pages (no FindByUuid: a search per Node and per retry is what
// a busy vCenter must be spared), with an error that says so and is never
// "not found"; Peek says which lookups are worth a retry. However long
// the next page takes, that stays so: a slow vCenter is no reason to
// search it for every lookup. The read completes when its gate opens, and
// the VM found in the pages is followed.
func TestFirstReadPagesAnswer(t *testing.T) {
	// The held poll must not time out while the test looks: a failed page
	// ends "pages arriving" (TestFirstReadStatus).
	e := connect(t, "global:\n  connectTimeout: 5s\n  requestTimeout: 10m\n", nil, vcsim.Spec{Name: "vc-p", Hosts: 1, VMs: 250})
	vc := e.fleet.VCenter("vc-p")
	client, err := e.pool.Client("vc-p")
	if err != nil {
		t.Fatal(err)
	}
	// Two pages (the simulator's are 100 objects), then the gate.
	g := &gatedClient{Client: client, pass: 2, open: make(chan struct{})}
	opened := false
	openGate := func() {
		if !opened {
			opened = true
			close(g.open)
		}
	}
	t.Cleanup(openGate)
	fc := clocktesting.NewFakeClock(time.Now())
	inv := inventory.New([]inventory.Client{g}, inventory.Options{MaxWait: time.Second, EagerDetailsMax: -1,
		SearchTimeout: 10 * time.Second, PageTimeout: time.Hour, StaleAfter: time.Hour, FirstReadSearches: 1, Clock: fc})
	ix := inv.Index("vc-p")
	paged := ix.Paged()
	vc.RecordRequests()
	ctx, stop := context.WithCancel(e.ctx)
	inv.Start(ctx)
	t.Cleanup(func() { openGate(); stop(); inv.Wait() })

	select {
	case <-paged:
	case <-e.ctx.Done():
		t.Fatal("no page of the first read")
	}
	poll.True(t, "the read held at the gate", func() bool { return g.polls.Load() > g.pass })
	if ix.HasSynced() {
		t.Fatal("the read completed although it is held after two pages")
	}
	var in, out []vcsim.VM
	for _, vm := range vc.VMs {
		if found, _ := inv.Peek(config.LookupUUID, vm.UUID); found {
			in = append(in, vm)
		} else {
			out = append(out, vm)
		}
	}
	if len(in) == 0 || len(out) < 2 {
		t.Fatalf("%d VMs in the pages read, %d not: want some of each", len(in), len(out))
	}
	searches := func() int { return calls(vc, "FindByUuid") }

	got, err := inv.FindByUUID(e.ctx, in[0].UUID)
	if err != nil {
		t.Fatalf("lookup of a VM in the pages read: %v", err)
	}
	if got.Ref != in[0].Ref || got.Host != in[0].HostRef || got.Datacenter == "" || len(got.NICs) == 0 {
		t.Errorf("the lookup returned %+v, want %s on host %s with its datacenter and NICs", got, in[0].Ref, in[0].HostRef)
	}
	if n := searches(); n != 0 {
		t.Errorf("%d FindByUuid for a VM in the pages read, want 0", n)
	}

	// Within the budget: searched directly.
	got, err = inv.FindByUUID(e.ctx, out[0].UUID)
	if err != nil || got.Ref != out[0].Ref {
		t.Fatalf("lookup within the budget: %+v, %v; want %s by a direct search", got, err, out[0].Ref)
	}
	budgeted := searches()
	if budgeted == 0 {
		t.Error("no FindByUuid for the lookup within the budget")
	}

	// Beyond it: waits for the pages.
	if _, settled := inv.Peek(config.LookupUUID, out[1].UUID); settled {
		t.Error("Peek says a lookup of a VM not read yet is settled while pages arrive")
	}
	_, err = inv.FindByUUID(e.ctx, out[1].UUID)
	var ie *inventory.IncompleteError
	if !errors.As(err, &ie) || errors.Is(err, inventory.ErrNotFound) || !strings.Contains(err.Error(), "being read for the first time") {
		t.Errorf("a miss beyond the budget while pages arrive: err = %v, want an IncompleteError, not ErrNotFound, saying the read is under way", err)
	}
	if n := searches(); n != budgeted {
		t.Errorf("%d FindByUuid after a miss beyond the budget, want %d", n, budgeted)
	}

	// No page for longer than SearchTimeout: still waiting for pages
	// (a stuck read ends with a failure, TestFirstReadStatus), and the
	// budget refills at one vCenter a second (FirstReadSearches/100, at
	// least one token: here after 100s).
	fc.Step(11 * time.Second)
	if _, settled := inv.Peek(config.LookupUUID, out[1].UUID); settled {
		t.Error("Peek says a lookup is settled while the first read is under way, only slow")
	}
	if _, err = inv.FindByUUID(e.ctx, out[1].UUID); !errors.As(err, &ie) || errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("a miss while a page is slow: err = %v, want an IncompleteError", err)
	}
	if n := searches(); n != budgeted {
		t.Errorf("%d FindByUuid while a page is slow, want %d: a slow page searched every lookup directly", n, budgeted)
	}
	fc.Step(100 * time.Second)
	got, err = inv.FindByUUID(e.ctx, out[1].UUID)
	if err != nil || got.Ref != out[1].Ref {
		t.Errorf("lookup once the budget refilled: %+v, %v; want %s by a direct search", got, err, out[1].Ref)
	}
	if searches() == budgeted {
		t.Error("no FindByUuid once the budget refilled")
	}

	openGate()
	poll.True(t, "the VM found in the pages is followed once the read completes", func() bool {
		_, ok := ix.VM(in[0].Ref)
		return ix.HasSynced() && ok
	})
}

// calls counts the SOAP calls of method among vc's recorded requests
// (vc.RecordRequests).
func calls(vc *vcsim.VCenter, method string) int {
	n := 0
	for _, r := range vc.Requests() {
		if bytes.Contains(r.Body, []byte("<"+method)) {
			n++
		}
	}
	return n
}
