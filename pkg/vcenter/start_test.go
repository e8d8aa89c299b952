package vcenter_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// stepWhenWaiting advances the fake clock by d once all n client loops are
// waiting on it, so that each step is an explicit sync point.
func stepWhenWaiting(t *testing.T, clk *clocktesting.FakeClock, n int, d time.Duration) {
	t.Helper()
	poll.True(t, "every loop waiting on the clock", func() bool { return clk.Waiters() == n })
	clk.Step(d)
}

// TestStartIsolatesSickVCenters starts with one vCenter refusing
// connections and one accepting TCP but never answering: Start returns at
// once, the healthy vCenter connects, and each sick one connects after a
// single retry interval once it is back.
func TestStartIsolatesSickVCenters(t *testing.T) {
	f := startFleet(t)
	refused, hung := f.VCenter("vc-a"), f.VCenter("vc-b")
	if err := refused.SetMode(vcsim.Down); err != nil {
		t.Fatal(err)
	}
	if err := hung.SetMode(vcsim.Hung); err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, f, nil, nil)
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	p, err := vcenter.NewPool(cfg, vcenter.Options{Credentials: inline{make(chan struct{})}, Clock: clk,
		ProbeTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p.Start(ctx) // returns at once: no wait for any vCenter
	t.Cleanup(p.Close)
	ca, _ := p.Client("vc-a")
	cb, _ := p.Client("vc-b")
	cc, _ := p.Client("vc-c")
	poll.True(t, "vc-c connected", func() bool { return cc.Health().State == vcenter.Connected })
	if err := p.WaitFirstAttempt(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*vcenter.Client{ca, cb} {
		h := c.Health()
		if h.State != vcenter.Down || !strings.Contains(h.LastError.Error(), "not reachable") {
			t.Errorf("%s: %v %v, want down and not reachable", c.Name(), h.State, h.LastError)
		}
		if err := c.Do(ctx, soapOnly); !errors.Is(err, vcenter.ErrUnavailable) {
			t.Errorf("%s: call while down: %v, want ErrUnavailable", c.Name(), err)
		}
	}
	if n := refused.Logins() + hung.Logins(); n != 0 {
		t.Errorf("%d logins sent to vCenters that did not answer", n)
	}
	if err := refused.SetMode(vcsim.Up); err != nil {
		t.Fatal(err)
	}
	if err := hung.SetMode(vcsim.Up); err != nil {
		t.Fatal(err)
	}
	// Advance the fake clock a second at a time while the loops wait: both
	// must be connected within one longest retry interval (RetryMax 8s
	// plus 10% jitter) of their return.
	back := clk.Now()
	for ca.Health().State != vcenter.Connected || cb.Health().State != vcenter.Connected {
		if clk.Since(back) > 9*time.Second {
			t.Fatalf("not connected %v after the return: %v / %v", clk.Since(back), ca.Health(), cb.Health())
		}
		stepWhenWaiting(t, clk, 3, time.Second)
	}
	if err := ca.Do(ctx, soapAndREST); err != nil {
		t.Error(err)
	}
	if err := cb.Do(ctx, soapAndREST); err != nil {
		t.Error(err)
	}
}

// TestBadCAFileIsolated: an unreadable caFile makes that vCenter down (with
// an error naming the file), not the pool; once the file is there, the next
// attempt connects.
func TestBadCAFileIsolated(t *testing.T) {
	f := startFleet(t)
	missing := filepath.Join(t.TempDir(), "ca.pem")
	a := f.VCenter("vc-a")
	cfg := parseConfig(t, f, nil, map[string]vcConfig{"vc-a": {extra: []string{"caFile: " + missing, "user: " + a.User, "password: " + a.Password}}})
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	p := startPool(t, ctx, cfg, vcenter.Options{Clock: clk})
	ca, _ := p.Client("vc-a")
	h := ca.Health()
	if h.State != vcenter.Down || !strings.Contains(h.LastError.Error(), "caFile") || !strings.Contains(h.LastError.Error(), `"vc-a"`) {
		t.Fatalf("vc-a: %v %v, want down with an error naming vc-a and caFile", h.State, h.LastError)
	}
	for _, name := range []string{"vc-b", "vc-c"} {
		c, _ := p.Client(name)
		if err := c.Do(ctx, soapAndREST); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	pem, err := os.ReadFile(a.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(missing, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	stepWhenWaiting(t, clk, 3, 10*time.Second)
	poll.True(t, "vc-a connected after the caFile appeared", func() bool { return ca.Health().State == vcenter.Connected })
}

// mutableCreds is a credential source whose entries tests change.
type mutableCreds struct {
	mu      sync.Mutex
	byName  map[string]secret.Credentials
	source  string
	changed chan struct{}
}

func (m *mutableCreds) Get(vc config.VCenter) (secret.Credentials, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byName[vc.Name]
	if !ok {
		return c, "", credentials.ErrNoCredentials
	}
	return c, m.source, nil
}

func (m *mutableCreds) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *mutableCreds) set(name string, c secret.Credentials, source string) {
	m.mu.Lock()
	if c == nil {
		delete(m.byName, name)
	} else {
		m.byName[name] = c
	}
	m.source = source
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// TestCredentialsWithdrawn: credentials that appear late are used at once;
// withdrawn credentials log the session out; credentials of another user
// replace the session at once.
func TestCredentialsWithdrawn(t *testing.T) {
	f := startFleet(t)
	a := f.VCenter("vc-a")
	cfg := parseConfig(t, f, nil, nil)
	src := &mutableCreds{byName: map[string]secret.Credentials{}, source: "Secret kube-system/a", changed: make(chan struct{})}
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: src, KeepAlive: time.Hour})
	ca, _ := p.Client("vc-a")
	if h := ca.Health(); h.State != vcenter.Down || !errors.Is(h.LastError, credentials.ErrNoCredentials) {
		t.Fatalf("without credentials: %v %v", h.State, h.LastError)
	}
	good := secret.Password{Username: a.User, Password: secret.New(a.Password)}
	src.set("vc-a", good, "Secret kube-system/a")
	poll.True(t, "vc-a connected once credentials appeared", func() bool { return ca.Health().State == vcenter.Connected })
	if n, _ := sessionsOf(ctx, t, a); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}

	src.set("vc-a", nil, "")
	poll.True(t, "vc-a down after its credentials were withdrawn", func() bool { return ca.Health().State == vcenter.Down })
	poll.True(t, "the session logged out", func() bool { n, _ := sessionsOf(ctx, t, a); return n == 0 })
	if err := ca.Do(ctx, soapOnly); !errors.Is(err, vcenter.ErrUnavailable) || !errors.Is(err, credentials.ErrNoCredentials) {
		t.Errorf("call without credentials: %v", err)
	}

	src.set("vc-a", good, "Secret kube-system/a")
	poll.True(t, "vc-a connected again", func() bool { return ca.Health().State == vcenter.Connected })
	logins := ca.Logins()
	src.set("vc-a", good, "inline config") // the Secret key was removed: the next source in precedence
	poll.True(t, "a new login for the new source", func() bool { return ca.Logins() == logins+1 })
	if h := ca.Health(); h.State != vcenter.Connected || h.CredentialSource != "inline config" {
		t.Errorf("after the source changed: %v from %q", h.State, h.CredentialSource)
	}
	poll.True(t, "one session", func() bool { n, _ := sessionsOf(ctx, t, a); return n == 1 })
}

// TestStartFailureLoggedOnce: a vCenter that cannot be used at start (here
// a caFile that does not exist yet) is logged once at error level, at the
// default verbosity, however many times it is retried.
func TestStartFailureLoggedOnce(t *testing.T) {
	f := startFleet(t)
	missing := filepath.Join(t.TempDir(), "ca.pem")
	a := f.VCenter("vc-a")
	cfg := parseConfig(t, f, nil, map[string]vcConfig{"vc-a": {extra: []string{"caFile: " + missing, "user: " + a.User, "password: " + a.Password}}})
	clk := clocktesting.NewFakeClock(time.Now())
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(0), textlogger.Output(&logs))))
	startPool(t, ctx, cfg, vcenter.Options{Clock: clk})
	for range 3 { // three retries of vc-a (the others keep their sessions)
		stepWhenWaiting(t, clk, 3, 10*time.Second)
	}
	stepWhenWaiting(t, clk, 3, 0)
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.HasPrefix(l, "E") && strings.Contains(l, `vcenter="vc-a"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "not usable at start") || !strings.Contains(lines[0], "caFile") {
		t.Errorf("error lines about vc-a at -v=0: %q, want exactly one naming the caFile problem\nall logs:\n%s", lines, logs.String())
	}
}

// TestRevokedDuringLogin: credentials withdrawn while a login with them is
// in flight: the session that login opens is logged out, never used.
func TestRevokedDuringLogin(t *testing.T) {
	f := startFleet(t)
	a := f.VCenter("vc-a")
	cfg := parseConfig(t, f, nil, nil)
	src := &mutableCreds{byName: map[string]secret.Credentials{}, source: "Secret kube-system/a", changed: make(chan struct{})}
	inLogin, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(vc string, rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if vc == "vc-a" && r.Body != nil && strings.HasSuffix(r.URL.Path, "/sdk") {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if bytes.Contains(body, []byte("<Login")) {
					res, err := rt.RoundTrip(r) // the session exists on the vCenter from here
					once.Do(func() { close(inLogin); <-release })
					return res, err
				}
			}
			return rt.RoundTrip(r)
		})
	}
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: src, KeepAlive: time.Hour, WrapTransport: hold})
	ca, _ := p.Client("vc-a")
	good := secret.Password{Username: a.User, Password: secret.New(a.Password)}
	src.set("vc-a", good, "Secret kube-system/a")
	<-inLogin
	src.set("vc-a", nil, "") // revoked while the login is in flight
	close(release)
	poll.True(t, "the session opened in flight logged out", func() bool { n, _ := sessionsOf(ctx, t, a); return n == 0 })
	if h := ca.Health(); h.State != vcenter.Down {
		t.Errorf("vc-a is %v after its credentials were revoked, want down", h.State)
	}
	if err := ca.Do(ctx, soapOnly); !errors.Is(err, vcenter.ErrUnavailable) {
		t.Errorf("a call after revocation: %v, want ErrUnavailable", err)
	}
	if n := ca.Logins(); n != 0 {
		t.Errorf("%d sessions installed, want 0: the session of revoked credentials was made available to callers", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
