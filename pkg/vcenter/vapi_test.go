package vcenter_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// stsGate makes STS unreachable (a connection error, as from a
// partition) while armed, and counts the token requests it stopped.
type stsGate struct {
	mu      sync.Mutex
	down    bool
	stopped int
}

func (g *stsGate) set(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

type stsGateRT struct {
	next http.RoundTripper
	g    *stsGate
}

func (rt stsGateRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/sts/") {
		rt.g.mu.Lock()
		down := rt.g.down
		if down {
			rt.g.stopped++
		}
		rt.g.mu.Unlock()
		if down {
			return nil, errors.New("dial tcp: connect: connection refused (STS unreachable)")
		}
	}
	return rt.next.RoundTrip(r)
}

// TestSTSUnreachablePastExpiry: certificate mode, a 1 hour token, STS
// unreachable from the renewal (45 min) until well past the token's
// expiry. Before expiry the vCenter stays Connected with the failure
// exported; once the vAPI session has expired it is Degraded (never Down):
// SOAP calls and the inventory go on on the same session, vAPI calls fail
// with ErrVAPIUnavailable. Once STS answers, the vAPI session alone is
// renewed: one login in all, one full inventory read.
func TestSTSUnreachablePastExpiry(t *testing.T) {
	ctx, cancel := context.WithTimeout(quiet(t), 2*time.Minute)
	defer cancel()
	gate := &stsGate{}
	r := startTokenRigWith(t, ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 2}, "certificate", time.Hour, false,
		func(_ string, rt http.RoundTripper) http.RoundTripper { return stsGateRT{next: rt, g: gate} })
	expires := r.client.Health().VAPIExpires
	if expires.IsZero() {
		t.Fatal("no vAPI token expiry in certificate mode")
	}
	gate.set(true)
	waitFor(t, "the client loop waiting", func() bool { return r.clk.Waiters() == 1 })
	r.clk.Step(46 * time.Minute)
	waitFor(t, "a failed renewal", func() bool { return r.client.Health().VAPIError != nil })
	if h := r.client.Health(); h.State != vcenter.Connected || !h.VAPIExpires.Equal(expires) {
		t.Fatalf("before expiry: %s, expires %v; want connected until %v", h.State, h.VAPIExpires, expires)
	}
	if err := r.client.Do(ctx, soapAndREST); err != nil {
		t.Fatalf("a call before expiry: %v", err)
	}
	// Past expiry, in steps of the back-off: the state is Degraded at every
	// look, never Down, and never flips back to Connected.
	r.clk.Step(15 * time.Minute)
	for i := range 5 {
		waitFor(t, "the client loop waiting", func() bool { return r.clk.Waiters() == 1 })
		waitFor(t, "degraded", func() bool { return r.client.Health().State == vcenter.Degraded })
		h := r.client.Health()
		if !errors.Is(h.LastError, vcenter.ErrVAPIUnavailable) {
			t.Errorf("step %d: degraded with %v, want the vAPI session named", i, h.LastError)
		}
		if err := r.client.Do(ctx, soapOnly); err != nil {
			t.Fatalf("step %d: a SOAP call past the token's expiry: %v", i, err)
		}
		if err := r.client.Do(ctx, soapAndREST); !errors.Is(err, vcenter.ErrVAPIUnavailable) {
			t.Fatalf("step %d: a vAPI call past the token's expiry: %v, want ErrVAPIUnavailable", i, err)
		}
		if s := r.client.Health().State; s != vcenter.Degraded {
			t.Fatalf("step %d: %s after the calls, want degraded", i, s)
		}
		r.clk.Step(time.Second)
	}
	if _, at, err := r.ix.Status(); err != nil || at.IsZero() {
		t.Errorf("inventory: %v, current at %v", err, at)
	}
	gate.set(false)
	r.clk.Step(time.Second)
	waitFor(t, "the vAPI session renewed", func() bool { return r.client.Health().State == vcenter.Connected })
	if h := r.client.Health(); h.VAPIError != nil || !h.VAPIExpires.After(expires) {
		t.Errorf("after the renewal: error %v, expires %v", h.VAPIError, h.VAPIExpires)
	}
	if err := r.client.Do(ctx, soapAndREST); err != nil {
		t.Errorf("a call after the renewal: %v", err)
	}
	if got := r.client.Logins(); got != 1 {
		t.Errorf("%d logins, want 1: the SOAP session was kept throughout", got)
	}
	if got := r.ix.FullReads(); got != 1 {
		t.Errorf("%d full inventory reads, want 1", got)
	}
}

// TestRenewalRefusedKeepsSOAP: STS refuses the certificate at the renewal
// (its solution user removed): one refused token request per login
// back-off, not one per retry; the vCenter stays Connected, then Degraded
// once the vAPI session expires, and never Down while the SOAP session
// lives (no Down/Connected flapping at each back-off).
func TestRenewalRefusedKeepsSOAP(t *testing.T) {
	ctx, cancel := context.WithTimeout(quiet(t), 2*time.Minute)
	defer cancel()
	r := startTokenRig(t, ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 1}, "certificate", time.Hour, false)
	r.vc.RemoveSolutionUser(r.solutionUser)
	_, refusedBefore := r.vc.TokensIssued()
	waitFor(t, "the client loop waiting", func() bool { return r.clk.Waiters() == 1 })
	r.clk.Step(46 * time.Minute)
	waitFor(t, "a refused renewal", func() bool { return r.client.Health().VAPIError != nil })
	var rej *vcenter.LoginRejectedError
	if h := r.client.Health(); h.State != vcenter.Connected || !errors.As(h.VAPIError, &rej) {
		t.Fatalf("after the refusal: %s, %v; want connected, the refusal named", h.State, h.VAPIError)
	}
	for range 10 { // ten back-off periods within the login back-off
		waitFor(t, "the client loop waiting", func() bool { return r.clk.Waiters() == 1 })
		if s := r.client.Health().State; s != vcenter.Connected {
			t.Fatalf("%s before the vAPI session expired", s)
		}
		if err := r.client.Do(ctx, soapAndREST); err != nil {
			t.Fatalf("a call with a valid vAPI session: %v", err)
		}
		r.clk.Step(time.Second)
	}
	if _, refused := r.vc.TokensIssued(); refused-refusedBefore != 1 {
		t.Errorf("%d refused token requests, want 1 within the login back-off", refused-refusedBefore)
	}
	r.clk.Step(15 * time.Minute)
	waitFor(t, "degraded once expired", func() bool { return r.client.Health().State == vcenter.Degraded })
	if err := r.client.Do(ctx, soapOnly); err != nil {
		t.Errorf("a SOAP call: %v", err)
	}
}
