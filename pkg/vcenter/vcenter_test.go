package vcenter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/methods"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/klog/v2/textlogger"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// startFleet starts three small simulated vCenters.
func startFleet(t testing.TB) *vcsim.Fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	specs := []vcsim.Spec{
		{Name: "vc-a", Hosts: 1, VMs: 1},
		{Name: "vc-b", Hosts: 1, VMs: 1},
		{Name: "vc-c", Hosts: 1, VMs: 1},
	}
	f, err := vcsim.Start(ctx, specs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// vcConfig is the YAML of one vCenter entry; fields are added verbatim.
type vcConfig struct {
	server string // default 127.0.0.1
	extra  []string
}

// parseConfig builds a cloud-config for the fleet. global lines go under
// global:, per-vCenter lines under each vCenter. By default each vCenter
// is verified with the fleet CA and has its own inline credentials.
func parseConfig(t testing.TB, f *vcsim.Fleet, global []string, per map[string]vcConfig) *config.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("global:\n  connectTimeout: 5s\n  requestTimeout: 2s\n")
	for _, l := range global {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	b.WriteString("vcenter:\n")
	for _, v := range f.VCenters {
		pc, ok := per[v.Name]
		if !ok {
			pc.extra = []string{"caFile: " + v.CAFile, "user: " + v.User, "password: " + v.Password}
		}
		if pc.server == "" {
			pc.server = v.Host
		}
		fmt.Fprintf(&b, "  %s:\n    server: %s\n    port: %d\n", v.Name, pc.server, v.Port)
		for _, l := range pc.extra {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	cfg, _, err := config.Parse("test.yaml", []byte(b.String()), config.Options{})
	if err != nil {
		t.Fatalf("config:\n%s\n%v", b.String(), err)
	}
	return cfg
}

// inline is a CredentialSource with the inline config credentials only.
type inline struct{ ch chan struct{} }

func (inline) Get(vc config.VCenter) (secret.Credentials, string, error) {
	if vc.Credentials.Inline == nil {
		return nil, "", credentials.ErrNoCredentials
	}
	return vc.Credentials.Inline, "inline config", nil
}
func (s inline) Changed() <-chan struct{} { return s.ch }

func startPool(t testing.TB, ctx context.Context, cfg *config.Config, opts vcenter.Options) *vcenter.Pool {
	t.Helper()
	if opts.Credentials == nil {
		opts.Credentials = inline{make(chan struct{})}
	}
	p, err := vcenter.NewPool(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	p.Start(ctx)
	t.Cleanup(p.Close)
	if err := p.WaitFirstAttempt(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// soapAndREST makes one SOAP call and one REST call.
func soapAndREST(ctx context.Context, s *vcenter.Session) error {
	if _, err := methods.GetCurrentTime(ctx, s.VIM); err != nil {
		return fmt.Errorf("soap: %w", err)
	}
	if _, err := tags.NewManager(s.REST).ListCategories(ctx); err != nil {
		return fmt.Errorf("rest: %w", err)
	}
	return nil
}

// soapOnly makes one SOAP call that needs a session.
func soapOnly(ctx context.Context, s *vcenter.Session) error {
	_, err := methods.GetCurrentTime(ctx, s.VIM)
	return err
}

// quiet returns a context whose logger writes through t.Log, shown only
// when a test fails.
func quiet(t testing.TB) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

func secretObj(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// TestCredentialSources connects three vCenters, each with credentials from
// a different source: its own Secret, the global Secret (IPv6-safe keys),
// and the secrets directory; then a fourth configuration uses inline values.
func TestCredentialSources(t *testing.T) {
	f := startFleet(t)
	a, b, c := f.VCenters[0], f.VCenters[1], f.VCenters[2]
	dir := t.TempDir()
	for k, v := range map[string]string{"127.0.0.1.username": c.User, "127.0.0.1.password": c.Password} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset(
		secretObj("vc-a-creds", map[string]string{"127.0.0.1.username": a.User, "127.0.0.1.password": a.Password}),
		secretObj("global-creds", map[string]string{"server_b": "localhost", "username_b": b.User, "password_b": b.Password}),
	)
	cfg := parseConfig(t, f, []string{"secretName: global-creds", "secretNamespace: kube-system", "secretsDirectory: " + dir},
		map[string]vcConfig{
			"vc-a": {extra: []string{"caFile: " + a.CAFile, "secretName: vc-a-creds"}},
			"vc-b": {server: "localhost", extra: []string{"caFile: " + b.CAFile}},
			"vc-c": {extra: []string{"caFile: " + c.CAFile}},
		})
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	creds := credentials.New(cfg, credentials.Options{Client: client})
	if err := creds.StartAndWait(ctx); err != nil {
		t.Fatal(err)
	}
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds})
	want := map[string]string{"vc-a": "Secret kube-system/vc-a-creds", "vc-b": "Secret kube-system/global-creds", "vc-c": "secrets directory " + dir}
	for _, cl := range p.Clients() {
		h := cl.Health()
		if h.State != vcenter.Connected || h.CredentialSource != want[cl.Name()] {
			t.Errorf("%s: state %v source %q (err %v), want connected via %q", cl.Name(), h.State, h.CredentialSource, h.LastError, want[cl.Name()])
		}
		if err := cl.Do(ctx, soapAndREST); err != nil {
			t.Errorf("%s: %v", cl.Name(), err)
		}
	}

	t.Run("inline", func(t *testing.T) {
		cfg := parseConfig(t, f, nil, nil)
		p := startPool(t, ctx, cfg, vcenter.Options{})
		for _, cl := range p.Clients() {
			if err := cl.Do(ctx, soapAndREST); err != nil || cl.Health().CredentialSource != "inline config" {
				t.Errorf("%s: %v, source %q", cl.Name(), err, cl.Health().CredentialSource)
			}
		}
	})
	for _, v := range f.VCenters {
		if n := len(v.FailedLogins()); n != 0 {
			t.Errorf("%s saw %d failed logins", v.Name, n)
		}
	}
}

// TestRotationAndLockout rotates the password in the simulator and in the
// Secret, in both orders, with no restart; a rejected password is tried at
// most once until the Secret changes.
func TestRotationAndLockout(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	client := fake.NewClientset(secretObj("vc-a-creds", map[string]string{"127.0.0.1.username": a.User, "127.0.0.1.password": a.Password}))
	cfg := parseConfig(t, f, nil, map[string]vcConfig{"vc-a": {extra: []string{"caFile: " + a.CAFile, "secretName: vc-a-creds", "secretNamespace: kube-system"}}})
	ctx, cancel := context.WithTimeout(quiet(t), 2*time.Minute)
	defer cancel()
	creds := credentials.New(cfg, credentials.Options{Client: client})
	if err := creds.StartAndWait(ctx); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, Clock: clk, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	cl, _ := p.Client("vc-a")
	poll.True(t, "vc-a connected", func() bool { return cl.Health().State == vcenter.Connected })
	if err := cl.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}
	setSecret := func(pass string) {
		t.Helper()
		s := secretObj("vc-a-creds", map[string]string{"127.0.0.1.username": a.User, "127.0.0.1.password": pass})
		if _, err := client.CoreV1().Secrets("kube-system").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.True(t, "the Secret update", func() bool {
			got, _, _ := creds.Get(cl.Config())
			return secret.Equal(got, secret.Password{Username: a.User, Password: secret.New(pass)})
		})
	}
	terminate := func() {
		t.Helper()
		if n, err := a.TerminateSessions(ctx); err != nil || n == 0 {
			t.Fatalf("terminate sessions: %d, %v", n, err)
		}
	}

	// Secret first, then the vCenter: the next call logs in with the new password.
	setSecret("second-password")
	a.SetPassword("second-password")
	terminate()
	if err := cl.Do(ctx, soapOnly); err != nil {
		t.Fatalf("call after rotation: %v", err)
	}
	if n := len(a.FailedLogins()); n != 0 {
		t.Fatalf("%d failed logins after an orderly rotation", n)
	}

	// vCenter first: one rejected login, then nothing until the Secret changes.
	a.SetPassword("third-password")
	terminate()
	err := cl.Do(ctx, soapOnly)
	if !errors.Is(err, vcenter.ErrLoginRejected) {
		t.Fatalf("call with a stale password: %v, want ErrLoginRejected", err)
	}
	// Ten retry intervals of the loop (each step taken when every loop waits,
	// each checked once they wait again), and a call after each.
	const loops = 3
	for range 10 {
		stepWhenWaiting(t, clk, loops, 50*time.Millisecond)
		poll.True(t, "the loop's attempt", func() bool { return clk.Waiters() == loops })
		if err := cl.Do(ctx, soapOnly); !errors.Is(err, vcenter.ErrUnavailable) && !errors.Is(err, vcenter.ErrLoginRejected) {
			t.Fatalf("call while the login is backed off: %v", err)
		}
	}
	if n := len(a.FailedLogins()); n != 1 {
		t.Fatalf("%d failed logins, want exactly 1 within the back-off window", n)
	}
	if h := cl.Health(); h.State != vcenter.Down || h.NextLogin.IsZero() {
		t.Errorf("health %+v, want down with NextLogin", h)
	}
	setSecret("third-password")
	poll.True(t, "reconnection with the new Secret", func() bool { return cl.Health().State == vcenter.Connected })
	if err := cl.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}
	if n := len(a.FailedLogins()); n != 1 {
		t.Errorf("%d failed logins in total, want 1", n)
	}
}

// TestLoginBackoffWindow checks with a fake clock that rejected credentials
// are retried exactly once per back-off window. Each step of the clock is
// taken when every client loop waits on it, and checked once they wait
// again (explicit sync points, no sleeps).
func TestLoginBackoffWindow(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	a.SetPassword("not-what-the-config-says")
	cfg := parseConfig(t, f, []string{"loginBackoff: 3m"}, nil)
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	p := startPool(t, ctx, cfg, vcenter.Options{Clock: clk, RetryMin: time.Second})
	cl, _ := p.Client("vc-a")
	poll.True(t, "the first login attempt", func() bool { return len(a.FailedLogins()) == 1 })
	const loops = 3
	for _, step := range []time.Duration{time.Minute, time.Minute, 59 * time.Second} {
		stepWhenWaiting(t, clk, loops, step)
		// The loop tried again (deferred: no login) and waits again.
		poll.True(t, "the loop's attempt", func() bool { return clk.Waiters() == loops })
		_ = cl.Do(ctx, soapOnly)
		if n := len(a.FailedLogins()); n != 1 {
			t.Fatalf("after %v: %d failed logins, want 1", step, n)
		}
	}
	stepWhenWaiting(t, clk, loops, 2*time.Second) // 3m1s after the rejection
	poll.True(t, "the retry after the window", func() bool { return len(a.FailedLogins()) == 2 })
	poll.True(t, "the loop waiting again", func() bool { return clk.Waiters() == loops })
	if n := len(a.FailedLogins()); n != 2 {
		t.Errorf("%d failed logins, want 2", n)
	}
	// The other vCenters were never affected.
	for _, name := range []string{"vc-b", "vc-c"} {
		c, _ := p.Client(name)
		if err := c.Do(ctx, soapAndREST); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSessionExpiry lets the simulator expire SOAP and REST sessions; calls
// log in again transparently. With keepalive, sessions do not expire. The
// simulator's clock is real, so the sync point is the server itself: a
// session that expired there.
func TestSessionExpiry(t *testing.T) {
	f := startFleet(t)
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	for _, v := range f.VCenters {
		if err := v.SetSessionTimeout(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	cfg := parseConfig(t, f, nil, nil)

	t.Run("expired sessions are renewed on use", func(t *testing.T) {
		p := startPool(t, ctx, cfg, vcenter.Options{KeepAlive: time.Hour})
		v := f.VCenter("vc-b")
		cl, _ := p.Client("vc-b")
		before := cl.Logins()
		poll.True(t, "the session expired on the server", func() bool {
			n, err := v.CountSessions(ctx)
			return err == nil && n == 0
		})
		if err := cl.Do(ctx, soapAndREST); err != nil {
			t.Fatalf("call after expiry: %v", err)
		}
		if cl.Logins() <= before {
			t.Errorf("logins %d -> %d after the session expired", before, cl.Logins())
		}
	})
	t.Run("keepalive prevents expiry", func(t *testing.T) {
		v := f.VCenter("vc-c")
		p := startPool(t, ctx, cfg, vcenter.Options{KeepAlive: 100 * time.Millisecond})
		cl, _ := p.Client("vc-c")
		before := cl.Logins()
		// A control session of the same user, never used: once the server
		// has expired it, ours would have expired too without keepalive.
		u := v.URL()
		u.User = url.UserPassword(v.User, v.Password)
		if _, err := govmomi.NewClient(ctx, u, true); err != nil {
			t.Fatal(err)
		}
		// Counted by the administrator, not by using it (use keeps a session alive).
		poll.True(t, "the control session expired", func() bool {
			n, err := v.CountSessions(ctx)
			return err == nil && n == 1
		})
		if err := cl.Do(ctx, soapAndREST); err != nil {
			t.Fatal(err)
		}
		if cl.Logins() != before {
			t.Errorf("logins %d -> %d: keepalive did not keep the session", before, cl.Logins())
		}
	})
}

// TestReplacedSessionsCloseConnections: a session replaced after the
// vCenter ended it (a restart, an administrator, an expiry) leaves no
// connection open: each would hold two goroutines until the vCenter
// closes it, and a long-lived CCM re-logs in many times.
func TestReplacedSessionsCloseConnections(t *testing.T) {
	f := startFleet(t)
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	cfg := parseConfig(t, f, nil, nil)
	p := startPool(t, ctx, cfg, vcenter.Options{KeepAlive: time.Hour})
	v := f.VCenter("vc-a")
	cl, _ := p.Client("vc-a")
	if err := cl.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}
	const replaced = 6
	for range replaced {
		before := cl.Logins()
		if _, err := v.TerminateSessions(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.Do(ctx, soapAndREST); err != nil {
			t.Fatal(err)
		}
		if cl.Logins() <= before {
			t.Fatalf("no new login after the sessions were terminated (logins %d)", cl.Logins())
		}
	}
	// The current session's transport may keep a few idle connections;
	// the replaced ones none.
	poll.True(t, fmt.Sprintf("at most 2 connections open after %d replaced sessions", replaced), func() bool {
		return v.Connections() <= 2
	})
}

// TestOutage takes one vCenter down and hangs it; the others keep working
// and nothing waits on the sick one beyond its own timeouts.
func TestOutage(t *testing.T) {
	f := startFleet(t)
	cfg := parseConfig(t, f, nil, nil)
	ctx, cancel := context.WithTimeout(quiet(t), 2*time.Minute)
	defer cancel()
	p := startPool(t, ctx, cfg, vcenter.Options{RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	a := f.VCenters[0]
	ca, _ := p.Client("vc-a")

	if err := a.SetMode(vcsim.Down); err != nil {
		t.Fatal(err)
	}
	err := ca.Do(ctx, soapOnly)
	if err == nil {
		t.Fatal("call to a stopped vCenter succeeded")
	}
	poll.True(t, "vc-a down", func() bool { return ca.Health().State == vcenter.Down })
	if err := ca.Do(ctx, soapOnly); !errors.Is(err, vcenter.ErrUnavailable) || !strings.Contains(err.Error(), a.URL().Host) {
		t.Errorf("call while down: %v, want ErrUnavailable naming %s", err, a.URL().Host)
	}
	for _, name := range []string{"vc-b", "vc-c"} {
		c, _ := p.Client(name)
		if err := c.Do(ctx, soapAndREST); err != nil || c.Health().State != vcenter.Connected {
			t.Errorf("%s during vc-a's outage: %v, %v", name, err, c.Health().State)
		}
	}
	if err := a.SetMode(vcsim.Up); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "vc-a back", func() bool { return ca.Health().State == vcenter.Connected })
	if err := ca.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}

	// Hung: the call is bounded by the request timeout, others are not slowed.
	if err := a.SetMode(vcsim.Hung); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var hungErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		hungErr = ca.Do(ctx, soapOnly)
	}()
	cb, _ := p.Client("vc-b")
	for range 20 {
		if err := cb.Do(ctx, soapAndREST); err != nil {
			t.Errorf("vc-b while vc-a hangs: %v", err)
		}
	}
	wg.Wait()
	if hungErr == nil || ctx.Err() != nil {
		t.Fatalf("call to a hung vCenter: %v (ctx %v)", hungErr, ctx.Err())
	}
	poll.True(t, "vc-a down after hanging", func() bool { return ca.Health().State == vcenter.Down })
	if err := a.SetMode(vcsim.Up); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "vc-a back after hanging", func() bool { return ca.Health().State == vcenter.Connected })
}

// TestTLS covers CA file, thumbprint pinning, system roots and insecureFlag.
func TestTLS(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	wrongSHA256 := strings.Repeat("AB:", 31) + "AB"
	cases := []struct {
		name      string
		extra     []string
		wantError string // "" = connects
	}{
		{"caFile", []string{"caFile: " + a.CAFile}, ""},
		{"sha256 thumbprint", []string{"thumbprint: " + strings.ToLower(a.Thumbprint)}, ""},
		{"system roots do not know the simulator", nil, "certificate signed by unknown authority"},
		{"wrong thumbprint", []string{"thumbprint: " + wrongSHA256}, "does not match the configured thumbprint"},
		{"insecureFlag", []string{"insecureFlag: true"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			lctx := klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logs))))
			cfg := parseConfig(t, f, nil, map[string]vcConfig{"vc-a": {extra: append([]string{"user: " + a.User, "password: " + a.Password}, tc.extra...)}})
			p := startPool(t, lctx, cfg, vcenter.Options{RetryMin: time.Hour})
			cl, _ := p.Client("vc-a")
			h := cl.Health()
			if tc.wantError == "" {
				if h.State != vcenter.Connected {
					t.Fatalf("not connected: %v", h.LastError)
				}
				wantWarning := strings.Contains(tc.name, "insecure")
				if got := strings.Contains(logs.String(), "verification is disabled"); got != wantWarning {
					t.Errorf("insecureFlag warning logged = %v, want %v; logs:\n%s", got, wantWarning, logs.String())
				}
				return
			}
			var ce *vcenter.CertificateError
			if h.State != vcenter.Down || !errors.As(h.LastError, &ce) {
				t.Fatalf("state %v, error %v; want down with a CertificateError", h.State, h.LastError)
			}
			msg := cl.Do(ctx, soapOnly).Error()
			t.Log(msg)
			for _, want := range []string{tc.wantError, a.Thumbprint, a.URL().Host, "vc-a"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
		})
	}
}

// TestNoSecretsInLogs runs connects, a rejected login, a rotation and an
// outage with verbosity 10 and a sentinel password, then searches every log
// line and error for it.
func TestNoSecretsInLogs(t *testing.T) {
	const sentinel = "S3ntinel-Pa55w0rd-do-not-log"
	f := startFleet(t)
	a := f.VCenters[0]
	a.SetPassword(sentinel)
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(10), textlogger.Output(&logs))))
	client := fake.NewClientset(secretObj("vc-a-creds", map[string]string{"127.0.0.1.username": a.User, "127.0.0.1.password": sentinel + "-wrong"}))
	cfg := parseConfig(t, f, nil, map[string]vcConfig{"vc-a": {extra: []string{"caFile: " + a.CAFile, "secretName: vc-a-creds", "secretNamespace: kube-system", "password: " + sentinel + "-inline"}}})
	creds := credentials.New(cfg, credentials.Options{Client: client})
	if err := creds.StartAndWait(ctx); err != nil {
		t.Fatal(err)
	}
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, RetryMin: 10 * time.Millisecond})
	cl, _ := p.Client("vc-a")
	var errs []string
	errs = append(errs, fmt.Sprint(cl.Do(ctx, soapOnly)), fmt.Sprintf("%+v", cl.Health()))
	s := secretObj("vc-a-creds", map[string]string{"127.0.0.1.username": a.User, "127.0.0.1.password": sentinel})
	if _, err := client.CoreV1().Secrets("kube-system").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "connected", func() bool { return cl.Health().State == vcenter.Connected })
	_ = a.SetMode(vcsim.Down)
	errs = append(errs, fmt.Sprint(cl.Do(ctx, soapOnly)))
	_ = a.SetMode(vcsim.Up)
	p.Close()
	out := logs.String()
	if !strings.Contains(out, "Login rejected") || !strings.Contains(out, "Logged in") {
		t.Fatalf("the logs do not show the rejected and the successful login, so the test proved nothing:\n%s", out)
	}
	for _, text := range append(errs, out) {
		if strings.Contains(text, "S3ntinel") {
			t.Fatalf("secret found in:\n%s", text)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCloseLogsOut checks that Close ends every session on the vCenters.
func TestCloseLogsOut(t *testing.T) {
	f := startFleet(t)
	cfg := parseConfig(t, f, nil, nil)
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	p, err := vcenter.NewPool(cfg, vcenter.Options{Credentials: inline{make(chan struct{})}})
	if err != nil {
		t.Fatal(err)
	}
	p.Start(ctx)
	if err := p.WaitFirstAttempt(ctx); err != nil {
		t.Fatal(err)
	}
	for _, v := range f.VCenters {
		if n, _ := sessionsOf(ctx, t, v); n != 1 {
			t.Fatalf("%s: %d sessions before Close, want 1", v.Name, n)
		}
	}
	p.Close()
	for _, v := range f.VCenters {
		if n, _ := sessionsOf(ctx, t, v); n != 0 {
			t.Errorf("%s: %d sessions left after Close", v.Name, n)
		}
	}
}

func sessionsOf(ctx context.Context, t *testing.T, v *vcsim.VCenter) (int, error) {
	t.Helper()
	return v.CountSessions(ctx)
}
