package vcenter_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestWeekOfRenewals runs a week of the fake clock, in 15 minute steps, on
// one vCenter whose STS tokens expire (1 hour asked and granted): after
// every step the client must be connected, a SOAP and a REST call must
// succeed, and a lookup in the inventory must find its VM. It counts the
// logins, vAPI renewals and full inventory reads:
//
//   - certificate, as vCenter documents it (the vAPI session ends with its
//     token, the SOAP session does not): one login, a vAPI renewal every
//     45 minutes (224), one inventory read, and the inventory current at
//     every step;
//   - certificate, on a vCenter that ends SOAP sessions with their token
//     too: the first expiry is noticed when it happens (a login and a
//     read), then every session is replaced 15 minutes before its token
//     expires, each with a full read;
//   - session manager: the cloned session is kept alive, nothing is
//     renewed.
//
// No session is ever used after its token expired (the simulator counts
// requests refused for that).
func TestWeekOfRenewals(t *testing.T) {
	const (
		lifetime = time.Hour
		step     = 15 * time.Minute
		week     = 7 * 24 * time.Hour
	)
	cases := []struct {
		name    string
		mode    string
		endSOAP bool
		// logins and reads: exact, or at least min and at most max.
		minLogins, maxLogins int
		renewals             int
		gapsAllowed          bool
	}{
		{name: "certificate", mode: "certificate", minLogins: 1, maxLogins: 1, renewals: int(week / (lifetime * 3 / 4))},
		{name: "certificate, SOAP ends with the token", mode: "certificate", endSOAP: true,
			// 45 minutes into each token: a login a lifetime's three
			// quarters, after the first (renewed alone, then ended).
			minLogins: int(week/(lifetime*3/4)) - 2, maxLogins: int(week/(lifetime*3/4)) + 2, renewals: 1, gapsAllowed: true},
		{name: "session manager", mode: "shared", minLogins: 1, maxLogins: 1, renewals: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(quiet(t), 5*time.Minute)
			defer cancel()
			r := startTokenRig(t, ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 2}, tc.mode, lifetime, tc.endSOAP)
			a, clk, cl, inv, ix := r.vc, r.clk, r.client, r.inv, r.ix
			vm := a.VMs[0]

			gaps, learnt, endedWhenLearnt := 0, false, 0
			for elapsed := time.Duration(0); elapsed < week; elapsed += step {
				clk.Step(step)
				// Sync point: the client loop has done what the step made
				// due and waits on the clock again.
				waitFor(t, "the client loop waiting again", func() bool { return clk.Waiters() == 1 })
				if tc.endSOAP {
					// A new session's full read: minutes of the clock pass
					// before the next step, and it takes milliseconds here.
					waitFor(t, "the inventory read on the new session", func() bool { return ix.FullReads() == uint64(cl.Logins()) })
					waitFor(t, "the old session logged out", func() bool { n, err := a.CountSessions(ctx); return err == nil && n == 1 })
				}
				if !learnt && cl.Logins() > 1 {
					learnt, endedWhenLearnt = true, a.TokenStats().SOAPEnded
				}
				if h := cl.Health(); h.State != vcenter.Connected {
					t.Fatalf("at %s: vc-a %s: %v", elapsed+step, h.State, h.LastError)
				}
				if err := cl.Do(ctx, soapAndREST); err != nil {
					t.Fatalf("at %s: a call failed: %v", elapsed+step, err)
				}
				if _, err := inv.FindByUUID(ctx, vm.UUID); err != nil {
					t.Fatalf("at %s: lookup of %s failed: %v", elapsed+step, vm.Name, err)
				}
				if complete, _, _ := ix.Status(); !complete {
					gaps++
					if !tc.gapsAllowed {
						t.Fatalf("at %s: the inventory is not current", elapsed+step)
					}
				}
			}
			st := a.TokenStats()
			logins, renewals, reads := cl.Logins(), cl.Renewals(), ix.FullReads()
			t.Logf("a week: %d logins, %d vAPI renewals, %d full inventory reads, %d steps not current; STS issued %d tokens; sessions ended by their token and then used: SOAP %d, REST %d",
				logins, renewals, reads, gaps, st.Issued, st.SOAPEnded, st.RESTEnded)
			if logins < tc.minLogins || logins > tc.maxLogins {
				t.Errorf("%d logins, want %d to %d", logins, tc.minLogins, tc.maxLogins)
			}
			if renewals != tc.renewals {
				t.Errorf("%d vAPI renewals, want %d", renewals, tc.renewals)
			}
			if reads != uint64(logins) {
				t.Errorf("%d full inventory reads, want one per login (%d): a vAPI renewal must not read the inventory again", reads, logins)
			}
			if st.RESTEnded != 0 {
				t.Errorf("%d requests on vAPI sessions whose token had expired, want none (renewed before)", st.RESTEnded)
			}
			if st.ExpiredLogins != 0 {
				t.Errorf("%d logins with an expired token", st.ExpiredLogins)
			}
			if tc.mode == "certificate" {
				if want := logins + renewals; st.Issued != want {
					t.Errorf("STS issued %d tokens, want one per login and renewal (%d)", st.Issued, want)
				}
				if st.LastRequested != lifetime || st.LastGranted != lifetime {
					t.Errorf("token lifetime asked %s, granted %s; want %s", st.LastRequested, st.LastGranted, lifetime)
				}
			}
			if tc.endSOAP && st.SOAPEnded != endedWhenLearnt {
				t.Errorf("%d requests on SOAP sessions whose token had expired, %d of them after the first expiry taught the client; want none after", st.SOAPEnded, st.SOAPEnded-endedWhenLearnt)
			}
		})
	}
}

// waitFor waits for cond, checking often: the week's thousands of steps
// each wait for the client loop.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// BenchmarkRenewal measures what keeping a certificate login costs: the
// renewal of its vAPI session alone (a new STS token, signed with the key,
// and a vAPI login; the SOAP session and the inventory kept), against a
// new SOAP session, which a vCenter that ends SOAP sessions with their
// token forces: a full inventory read of BENCH_VMS VMs (default 2000)
// until the index is current again (the SOAP login itself costs about what
// a vAPI login does).
func BenchmarkRenewal(b *testing.B) {
	vms := 2000
	if s := os.Getenv("BENCH_VMS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			vms = n
		}
	}
	// Cancelled before the rig's clean-up waits for its inventory.
	ctx, cancel := context.WithCancel(quiet(b))
	defer cancel()
	r := startTokenRig(b, ctx, vcsim.Spec{Name: "vc-a", Hosts: 2, VMs: 2, Copies: max(vms-2, 0)}, "certificate", time.Hour, false)
	clk, cl, ix := r.clk, r.client, r.ix
	b.Logf("%d VMs in the inventory", ix.Len())

	b.Run("vapi-renewal", func(b *testing.B) {
		// Each step ends 50 minutes into the current vAPI token, so the
		// renewal is due and its token still valid.
		for b.Loop() {
			n := cl.Renewals()
			waitFor(b, "the client loop waiting", func() bool { return clk.Waiters() == 1 })
			clk.Step(50 * time.Minute) // past the renewal time (45 minutes), before the expiry
			waitFor(b, "a renewal", func() bool { return cl.Renewals() > n })
		}
		if reads := ix.FullReads(); reads != 1 {
			b.Fatalf("%d full reads after vAPI renewals, want 1", reads)
		}
	})
	b.Run(fmt.Sprintf("full-read-%dvms", vms), func(b *testing.B) {
		// What a new SOAP session costs the inventory: a collector set up
		// and every VM's identity read, until the index is current.
		for b.Loop() {
			rctx, cancel := context.WithCancel(ctx)
			again := inventory.New([]inventory.Client{cl}, inventory.Options{MaxWait: time.Second})
			again.Start(rctx)
			if err := again.WaitForSync(rctx); err != nil {
				b.Fatal(err)
			}
			cancel()
			again.Wait()
		}
	})
}

// tokenRig is one simulated vCenter whose tokens expire on a fake clock,
// a client logged in to it in mode ("certificate" or "shared") with
// tokenLifetime lifetime, and an inventory on the client.
type tokenRig struct {
	vc     *vcsim.VCenter
	clk    *clocktesting.FakeClock
	client *vcenter.Client
	inv    *inventory.Inventory
	ix     *inventory.Index
	// solutionUser is the certificate of certificate mode (nil otherwise).
	solutionUser *x509.Certificate
}

func startTokenRig(t testing.TB, ctx context.Context, spec vcsim.Spec, mode string, lifetime time.Duration, endSOAP bool) tokenRig {
	return startTokenRigWith(t, ctx, spec, mode, lifetime, endSOAP, nil)
}

// startTokenRigWith is startTokenRig with the client's transports wrapped.
func startTokenRigWith(t testing.TB, ctx context.Context, spec vcsim.Spec, mode string, lifetime time.Duration, endSOAP bool,
	wrap func(string, http.RoundTripper) http.RoundTripper) tokenRig {
	t.Helper()
	f, err := vcsim.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	a := f.VCenters[0]
	clk := clocktesting.NewFakeClock(time.Now())
	a.SetTokenPolicy(vcsim.TokenPolicy{EndSOAP: endSOAP, Clock: clk})
	quote := func(s string) string { q, _ := json.Marshal(s); return string(q) }
	extra := []string{"caFile: " + a.CAFile}
	var solutionUser *x509.Certificate
	switch mode {
	case "certificate":
		su, err := vcsim.NewSolutionUser("ccm", clk.Now().Add(-time.Hour), clk.Now().Add(30*24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		a.AddSolutionUser(su.Certificate)
		solutionUser = su.Certificate
		extra = append(extra, "certificate: "+quote(su.CertPEM), "privateKey: "+quote(su.KeyPEM))
	case "shared":
		sm, err := a.StartSessionManager(ctx, vcsim.SessionManagerOptions{Tokens: []string{"rig-token"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sm.Close)
		extra = append(extra, "sessionManagerURL: "+sm.URL, "sessionManagerToken: rig-token")
	}
	cfg := parseConfig(t, f, []string{"tokenLifetime: " + lifetime.String()}, map[string]vcConfig{spec.Name: {extra: extra}})
	p := startPool(t, ctx, cfg, vcenter.Options{Clock: clk, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond, WrapTransport: wrap})
	cl, _ := p.Client(spec.Name)
	poll.True(t, spec.Name+" connected", func() bool { return cl.Health().State == vcenter.Connected })
	inv := inventory.New([]inventory.Client{cl}, inventory.Options{MaxWait: time.Second})
	inv.Start(ctx)
	t.Cleanup(inv.Wait)
	if err := inv.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	return tokenRig{vc: a, clk: clk, client: cl, inv: inv, ix: inv.Index(spec.Name), solutionUser: solutionUser}
}

// TestSessionEndedEarlyTeachesNothing: a SOAP session an administrator ends
// after its token's renewal time but 10 minutes before it expires gets a
// new login, and the next renewal is still of the vAPI session alone (the
// vCenter is not taken for one that ends SOAP sessions with their token).
func TestSessionEndedEarlyTeachesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(quiet(t), 2*time.Minute)
	defer cancel()
	r := startTokenRig(t, ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 1}, "certificate", time.Hour, false)
	waitFor(t, "the client loop waiting", func() bool { return r.clk.Waiters() == 1 })
	r.clk.Step(50 * time.Minute) // past the renewal at 45 minutes: the vAPI session is renewed
	waitFor(t, "a vAPI renewal", func() bool { return r.client.Renewals() == 1 })
	waitFor(t, "the client loop waiting again", func() bool { return r.clk.Waiters() == 1 })
	if n, err := r.vc.TerminateSessions(ctx); err != nil || n != 1 {
		t.Fatalf("terminated %d sessions: %v", n, err)
	}
	if err := r.client.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}
	if got := r.client.Logins(); got != 2 {
		t.Fatalf("%d logins after the session was ended, want 2", got)
	}
	// The new session's token: 45 minutes on, its vAPI session is renewed
	// alone.
	r.clk.Step(46 * time.Minute)
	waitFor(t, "a second vAPI renewal", func() bool { return r.client.Renewals() == 2 })
	if got := r.client.Logins(); got != 2 {
		t.Errorf("%d logins, want 2: the renewal replaced the SOAP session", got)
	}
}

// TestSessionEndedLateTeachesNothing: a SOAP session that ends hours after
// its token expired (a restarted vCenter, an administrator) gets a new
// login, and the next renewal is still of the vAPI session alone.
func TestSessionEndedLateTeachesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(quiet(t), 2*time.Minute)
	defer cancel()
	r := startTokenRig(t, ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 1}, "certificate", time.Hour, false)
	for range 12 { // 3 hours: the first SOAP token expired 2 hours ago
		waitFor(t, "the client loop waiting", func() bool { return r.clk.Waiters() == 1 })
		r.clk.Step(15 * time.Minute)
	}
	waitFor(t, "the client loop waiting", func() bool { return r.clk.Waiters() == 1 })
	if n, err := r.vc.TerminateSessions(ctx); err != nil || n != 1 {
		t.Fatalf("terminated %d sessions: %v", n, err)
	}
	if err := r.client.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}
	renewals := r.client.Renewals()
	waitFor(t, "the client loop waiting", func() bool { return r.clk.Waiters() == 1 })
	r.clk.Step(46 * time.Minute)
	waitFor(t, "a vAPI renewal", func() bool { return r.client.Renewals() > renewals })
	if got := r.client.Logins(); got != 2 {
		t.Errorf("%d logins, want 2: a session ended two hours after its token taught the client to replace sessions", got)
	}
}

// vapiLoginGate fails (503) or holds vAPI logins while armed.
type vapiLoginGate struct {
	next http.RoundTripper
	gate *loginGate
}

type loginGate struct {
	mu     sync.Mutex
	fail   bool
	hold   chan struct{} // closed by the test to let a held login go on
	held   chan struct{} // closed when a login is held
	holdIt bool
	logins int // vAPI logins seen
}

func (g vapiLoginGate) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/com/vmware/cis/session") && r.URL.RawQuery == "" {
		g.gate.mu.Lock()
		g.gate.logins++
		fail, hold := g.gate.fail, g.gate.holdIt
		g.gate.holdIt = false
		g.gate.mu.Unlock()
		if fail {
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		}
		if hold {
			close(g.gate.held)
			<-g.gate.hold
		}
	}
	return g.next.RoundTrip(r)
}

// TestRenewalFailureKeepsSession: the vAPI renewal at three quarters of the
// token's lifetime fails (vAPI answers 503) while the session has a
// quarter of its lifetime left: the vCenter stays connected, no new SOAP
// session is opened, calls go on, and the renewal is retried with the
// back-off until it succeeds.
func TestRenewalFailureKeepsSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(quiet(t), 2*time.Minute)
	defer cancel()
	gate := &loginGate{}
	r := startTokenRigWith(t, ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 1}, "certificate", time.Hour, false,
		func(_ string, rt http.RoundTripper) http.RoundTripper { return vapiLoginGate{next: rt, gate: gate} })
	gate.mu.Lock()
	gate.fail = true
	gate.mu.Unlock()
	waitFor(t, "the client loop waiting", func() bool { return r.clk.Waiters() == 1 })
	r.clk.Step(46 * time.Minute)
	for range 3 { // three failed attempts, each followed by the back-off
		waitFor(t, "the client loop waiting again", func() bool { return r.clk.Waiters() == 1 })
		if h := r.client.Health(); h.State != vcenter.Connected {
			t.Fatalf("vc-a %s after a failed renewal, with a valid session: %v", h.State, h.LastError)
		}
		if err := r.client.Do(ctx, soapAndREST); err != nil {
			t.Fatalf("a call failed while the session is valid: %v", err)
		}
		r.clk.Step(time.Second) // the back-off is at most RetryMax, 50 ms
	}
	gate.mu.Lock()
	failed := gate.logins
	gate.fail = false
	gate.mu.Unlock()
	if failed < 3 {
		t.Fatalf("%d renewal attempts, want at least 3", failed)
	}
	waitFor(t, "the renewal once vAPI answers again", func() bool { return r.client.Renewals() == 1 })
	if got := r.client.Logins(); got != 1 {
		t.Errorf("%d logins, want 1: a failed renewal replaced the SOAP session", got)
	}
	if got := r.ix.FullReads(); got != 1 {
		t.Errorf("%d full inventory reads, want 1", got)
	}
}

// TestCredentialsChangedDuringRenewal: the credentials come from another
// source while a vAPI renewal is under way: the renewed vAPI session is
// not used, and a new login with the new source follows.
func TestCredentialsChangedDuringRenewal(t *testing.T) {
	f := startFleet(t)
	a := f.VCenter("vc-a")
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	cfg := parseConfig(t, f, nil, nil)
	src := &mutableCreds{byName: map[string]secret.Credentials{}, changed: make(chan struct{})}
	src.set("vc-a", secret.Password{Username: a.User, Password: secret.New(a.Password)}, "Secret kube-system/a")
	gate := &loginGate{hold: make(chan struct{}), held: make(chan struct{})}
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: src, KeepAlive: time.Hour,
		WrapTransport: func(vc string, rt http.RoundTripper) http.RoundTripper {
			if vc != "vc-a" {
				return rt
			}
			return vapiLoginGate{next: rt, gate: gate}
		}})
	cl, _ := p.Client("vc-a")
	poll.True(t, "vc-a connected", func() bool { return cl.Health().State == vcenter.Connected })
	if err := cl.Do(ctx, func(ctx context.Context, s *vcenter.Session) error { return s.REST.Logout(ctx) }); err != nil {
		t.Fatal(err)
	}
	gate.mu.Lock()
	gate.holdIt = true
	gate.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- cl.Do(ctx, soapAndREST) }() // a vAPI 401: a renewal, held at its vAPI login
	<-gate.held
	src.set("vc-a", secret.Password{Username: a.User, Password: secret.New(a.Password)}, "Secret kube-system/b")
	close(gate.hold)
	<-done // its result depends on who wins; what matters is the session that follows
	poll.True(t, "a login with the credentials of the new source", func() bool { return cl.Logins() == 2 })
	if h := cl.Health(); h.CredentialSource != "Secret kube-system/b" {
		t.Errorf("credential source %q, want the new one", h.CredentialSource)
	}
}

// TestRenewalRefusedOnce: a vAPI session that expired in password mode,
// and a password vCenter no longer accepts: one failed login, then the
// login back-off, not a vAPI and then a SOAP login back to back.
func TestRenewalRefusedOnce(t *testing.T) {
	f := startFleet(t)
	a := f.VCenter("vc-a")
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	p := startPool(t, ctx, parseConfig(t, f, nil, nil), vcenter.Options{KeepAlive: time.Hour})
	cl, _ := p.Client("vc-a")
	poll.True(t, "vc-a connected", func() bool { return cl.Health().State == vcenter.Connected })
	if err := cl.Do(ctx, func(ctx context.Context, s *vcenter.Session) error { return s.REST.Logout(ctx) }); err != nil {
		t.Fatal(err)
	}
	a.SetPassword("rotated-on-vcenter-only")
	before := len(a.FailedLogins())
	err := cl.Do(ctx, soapAndREST)
	var rej *vcenter.LoginRejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("Do: %v, want a rejected login", err)
	}
	if n := len(a.FailedLogins()) - before; n != 1 {
		t.Errorf("%d failed logins for one expired vAPI session, want 1", n)
	}
	if err := cl.Do(ctx, soapAndREST); err == nil {
		t.Error("a second call succeeded with a refused password")
	}
	if n := len(a.FailedLogins()) - before; n != 1 {
		t.Errorf("%d failed logins after a second call, want still 1", n)
	}
}

// TestSTSRequestsObserved: the token requests go through the transport
// wrappers and the observer like every other request (govmomi's STS
// client is a service client of its own).
func TestSTSRequestsObserved(t *testing.T) {
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	var mu sync.Mutex
	seen := 0
	startTokenRigWith(t, ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 1}, "certificate", time.Hour, false,
		func(_ string, rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if strings.HasPrefix(r.URL.Path, "/sts/") {
					mu.Lock()
					seen++
					mu.Unlock()
				}
				return rt.RoundTrip(r)
			})
		})
	mu.Lock()
	defer mu.Unlock()
	if seen != 1 {
		t.Errorf("%d token requests seen by the transport wrapper, want 1", seen)
	}
}
