package vcenter_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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

// secretCreds starts a credential manager on one Secret named vc-a-creds,
// read by vc-a of f (the others keep their inline credentials).
func secretCreds(t *testing.T, ctx context.Context, f *vcsim.Fleet, data map[string]string, extra ...string) (*config.Config, *credentials.Manager, *fake.Clientset) {
	t.Helper()
	a := f.VCenters[0]
	client := fake.NewClientset(secretObj("vc-a-creds", data))
	cfg := parseConfig(t, f, nil, map[string]vcConfig{"vc-a": {extra: append([]string{"caFile: " + a.CAFile, "secretName: vc-a-creds", "secretNamespace: kube-system"}, extra...)}})
	creds := credentials.New(cfg, credentials.Options{Client: client})
	if err := creds.StartAndWait(ctx); err != nil {
		t.Fatal(err)
	}
	return cfg, creds, client
}

// keyMaterial is what of a PEM RSA private key must never be sent or
// logged: its PEM text, and its private numbers (D and the primes; the
// modulus is public, in the certificate) in hex and in base64 at each of
// the three byte alignments.
func keyMaterial(t *testing.T, keyPEM string) []string {
	t.Helper()
	b, _ := pem.Decode([]byte(keyPEM))
	if b == nil {
		t.Fatal("no PEM key")
	}
	key, err := x509.ParsePKCS1PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{strings.TrimSpace(keyPEM)}
	for _, n := range append([]*big.Int{key.D}, key.Primes...) {
		raw := n.Bytes()
		out = append(out, hex.EncodeToString(raw)[:32])
		for k := range 3 {
			out = append(out, base64.StdEncoding.EncodeToString(raw[k:])[4:36])
		}
	}
	return out
}

// assertNotSent fails when any recorded request (headers or body) or text
// contains one of the needles.
func assertNotSent(t *testing.T, reqs []vcsim.Request, texts []string, needles []string) {
	t.Helper()
	for _, r := range reqs {
		var h bytes.Buffer
		_ = r.Header.Write(&h)
		for _, n := range needles {
			if bytes.Contains(r.Body, []byte(n)) || bytes.Contains(h.Bytes(), []byte(n)) {
				t.Fatalf("%s %s carries secret material", r.Method, r.Path)
			}
		}
	}
	for _, text := range texts {
		for _, n := range needles {
			if strings.Contains(text, n) {
				t.Fatalf("secret material found in: %.300s", text)
			}
		}
	}
}

// soapMethods counts the SOAP methods of the recorded requests.
func soapMethods(reqs []vcsim.Request, method string) int {
	n := 0
	for _, r := range reqs {
		if r.Path == "/sdk" && (bytes.Contains(r.Body, []byte("<"+method+" ")) || bytes.Contains(r.Body, []byte("<"+method+">"))) {
			n++
		}
	}
	return n
}

// TestCertificateLogin: a Secret whose username is a solution user's PEM
// certificate and whose password is its key logs in through STS (a
// holder-of-key token, LoginByToken for SOAP and REST); the key is never
// sent, nor logged at any verbosity. A certificate STS refuses is a
// rejected login, tried once per back-off window; a new certificate in the
// Secret is tried at once.
func TestCertificateLogin(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	now := time.Now()
	su, err := vcsim.NewSolutionUser("ccm-solution-user", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	a.AddSolutionUser(su.Certificate)
	a.RecordRequests()
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(quiet(t), 2*time.Minute)
	defer cancel()
	ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(10), textlogger.Output(&logs))))
	cfg, creds, client := secretCreds(t, ctx, f, map[string]string{"127.0.0.1.username": su.CertPEM, "127.0.0.1.password": su.KeyPEM})
	clk := clocktesting.NewFakeClock(now)
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, Clock: clk, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	cl, _ := p.Client("vc-a")
	poll.True(t, "vc-a connected with the certificate", func() bool { return cl.Health().State == vcenter.Connected })
	if err := cl.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}
	reqs := a.Requests()
	if issued, _ := a.TokensIssued(); issued != 1 || soapMethods(reqs, "LoginByToken") != 1 || soapMethods(reqs, "Login") != 0 {
		t.Fatalf("tokens issued %d, LoginByToken %d, Login %d: want one token, one LoginByToken, no password login",
			issued, soapMethods(reqs, "LoginByToken"), soapMethods(reqs, "Login"))
	}
	if n := len(a.FailedLogins()); n != 0 || a.Logins() != 0 {
		t.Fatalf("password logins: %d ok, %d failed; want none", a.Logins(), n)
	}

	// STS stops trusting the certificate: one refusal, then nothing until the Secret changes.
	a.RemoveSolutionUser(su.Certificate)
	if _, err := a.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(ctx, soapOnly); !errors.Is(err, vcenter.ErrLoginRejected) {
		t.Fatalf("call with a refused certificate: %v, want ErrLoginRejected", err)
	}
	for range 5 {
		stepWhenWaiting(t, clk, 3, 50*time.Millisecond)
		poll.True(t, "the loop's attempt", func() bool { return clk.Waiters() == 3 })
		_ = cl.Do(ctx, soapOnly)
	}
	if _, refused := a.TokensIssued(); refused != 1 {
		t.Fatalf("STS refused %d token requests, want exactly 1 within the back-off window", refused)
	}
	if h := cl.Health(); !strings.Contains(fmt.Sprint(h.LastError), "certificate login of certificate CN=ccm-solution-user") {
		t.Errorf("health error %v does not name the certificate", h.LastError)
	}

	// A new certificate for the solution user, registered and put in the Secret.
	su2, err := vcsim.NewSolutionUser("ccm-solution-user", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	a.AddSolutionUser(su2.Certificate)
	if _, err := client.CoreV1().Secrets("kube-system").Update(ctx, secretObj("vc-a-creds",
		map[string]string{"127.0.0.1.username": su2.CertPEM, "127.0.0.1.password": su2.KeyPEM}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "reconnected with the new certificate", func() bool { return cl.Health().State == vcenter.Connected })
	if err := cl.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}
	p.Close()
	out := logs.String()
	if !strings.Contains(out, "Logged in") || !strings.Contains(out, "Login rejected") {
		t.Fatalf("the logs do not show the logins, so the test proved nothing:\n%s", out)
	}
	assertNotSent(t, a.Requests(), []string{out, fmt.Sprintf("%+v", cl.Health())},
		append(keyMaterial(t, su.KeyPEM), keyMaterial(t, su2.KeyPEM)...))
}

// TestCertificateNotUsable: an expired certificate, one not valid yet, and
// a key that is not the certificate's are clear errors before any request.
func TestCertificateNotUsable(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	now := time.Now()
	expired, err := vcsim.NewSolutionUser("expired", now.Add(-48*time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other, err := vcsim.NewSolutionUser("other", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	a.AddSolutionUser(expired.Certificate)
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	a.RecordRequests()

	t.Run("expired", func(t *testing.T) {
		cfg, creds, _ := secretCreds(t, ctx, f, map[string]string{"127.0.0.1.username": expired.CertPEM, "127.0.0.1.password": expired.KeyPEM})
		p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, KeepAlive: time.Hour})
		cl, _ := p.Client("vc-a")
		h := cl.Health()
		if h.State != vcenter.Down || !errors.Is(h.LastError, secret.ErrCertificate) || !strings.Contains(h.LastError.Error(), "expired at") {
			t.Fatalf("health %v %v, want down: certificate expired", h.State, h.LastError)
		}
	})
	t.Run("key of another certificate", func(t *testing.T) {
		_, _, err := credentials.ParseData(map[string][]byte{"127.0.0.1.username": []byte(expired.CertPEM), "127.0.0.1.password": []byte(other.KeyPEM)})
		if !errors.Is(err, secret.ErrCertificate) || !strings.Contains(err.Error(), "does not match") || !strings.Contains(err.Error(), `"127.0.0.1.password"`) {
			t.Fatalf("err %v, want the key named and said not to match", err)
		}
		// Through a running client: the vCenter is down naming it, and
		// nothing is sent (checked below for every case).
		a.AddSolutionUser(other.Certificate)
		cfg, creds, _ := secretCreds(t, ctx, f, map[string]string{"127.0.0.1.username": other.CertPEM, "127.0.0.1.password": expired.KeyPEM})
		p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, KeepAlive: time.Hour})
		cl, _ := p.Client("vc-a")
		if h := cl.Health(); h.State == vcenter.Connected || h.LastError == nil {
			t.Fatalf("health %v %v, want not connected", h.State, h.LastError)
		}
	})
	if reqs := a.Requests(); len(reqs) != 0 {
		t.Fatalf("%d requests sent with unusable certificates, want none (first: %s %s)", len(reqs), reqs[0].Method, reqs[0].Path)
	}
}

// TestSharedSession: a Secret with only <server>.vc-session-manager-url and
// -token connects through a session manager speaking the reference's
// contract (GET, Bearer token, {"token": ticket}) and CloneSession; REST
// uses the same session; an ended session gets a new ticket; a ticket
// vCenter refuses is retried with the normal back-off and a new ticket,
// never held back like a refused password.
func TestSharedSession(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(quiet(t), 2*time.Minute)
	defer cancel()
	ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(10), textlogger.Output(&logs))))
	const token = "Bearer-Token-S3ntinel-7731"
	sm, err := a.StartSessionManager(ctx, vcsim.SessionManagerOptions{Tokens: []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	a.RecordRequests()
	cfg, creds, _ := secretCreds(t, ctx, f, map[string]string{"127.0.0.1.vc-session-manager-url": sm.URL, "127.0.0.1.vc-session-manager-token": token})
	clk := clocktesting.NewFakeClock(time.Now())
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, Clock: clk, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	cl, _ := p.Client("vc-a")
	poll.True(t, "vc-a connected with a shared session", func() bool { return cl.Health().State == vcenter.Connected })
	if err := cl.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}
	reqs := sm.Requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodGet || reqs[0].Authorization != "Bearer "+token || reqs[0].Ticket == "" {
		t.Fatalf("session manager requests %+v, want one GET with the bearer token", reqs)
	}
	if a.Logins() != 0 || soapMethods(a.Requests(), "CloneSession") != 1 {
		t.Fatalf("password logins %d, CloneSession %d: want 0 and 1", a.Logins(), soapMethods(a.Requests(), "CloneSession"))
	}
	if n, _ := a.CountSessions(ctx); n != 1 {
		t.Fatalf("%d sessions of the CCM, want 1 (the cloned one)", n)
	}

	// The session ends: a new ticket, a new clone.
	if _, err := a.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(ctx, soapAndREST); err != nil {
		t.Fatalf("call after the session ended: %v", err)
	}
	if n := len(sm.Requests()); n != 2 {
		t.Fatalf("%d ticket requests, want 2", n)
	}

	// Tickets vCenter refuses: a ticket cannot lock an account, so each
	// retry (the normal back-off, milliseconds here) asks for a new one;
	// no login back-off holds the vCenter down.
	sm.HandOutBogusTickets(true)
	if _, err := a.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	err = cl.Do(ctx, soapOnly)
	if !errors.Is(err, vcenter.ErrUnavailable) || errors.Is(err, vcenter.ErrLoginRejected) || !strings.Contains(fmt.Sprint(cl.Health().LastError), "refused the ticket") {
		t.Fatalf("call with a refused ticket: %v (health %v), want unavailable for a refused ticket, not a rejected login", err, cl.Health().LastError)
	}
	clones := soapMethods(a.Requests(), "CloneSession")
	poll.True(t, "new tickets tried with the normal back-off", func() bool {
		clk.Step(50 * time.Millisecond) // RetryMax
		return soapMethods(a.Requests(), "CloneSession") >= clones+2
	})
	if h := cl.Health(); !h.NextLogin.IsZero() {
		t.Errorf("a refused ticket set the login back-off: next login %v", h.NextLogin)
	}
	// A good ticket again: connected at the next retry, no login back-off to wait out.
	sm.HandOutBogusTickets(false)
	poll.NoError(t, "reconnected at the next retry", 20*time.Second, func() error {
		if h := cl.Health(); h.State != vcenter.Connected {
			clk.Step(50 * time.Millisecond)
			return fmt.Errorf("%v: %v", h.State, h.LastError)
		}
		return nil
	})
	p.Close()

	out := logs.String()
	if !strings.Contains(out, "Logged in") || !strings.Contains(out, "refused the ticket") {
		t.Fatalf("the logs do not show the logins, so the test proved nothing:\n%s", out)
	}
	var tickets []string
	for _, r := range sm.Requests() {
		if r.Ticket != "" {
			tickets = append(tickets, r.Ticket)
		}
	}
	assertNotSent(t, nil, []string{out, fmt.Sprintf("%+v", cl.Health())}, append(tickets, token))
}

// TestSharedSessionTokenFile: a session manager URL the cloud-config names,
// without a token, is sent the token file's content, read again at every
// login (a rotated service-account token is used at once); plain http
// only because the config allows it for this vCenter
// (sessionManagerAllowHTTP).
func TestSharedSessionTokenFile(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	sm, err := a.StartSessionManager(ctx, vcsim.SessionManagerOptions{Tokens: []string{"sa-token-1"}, Plain: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("sa-token-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, f, nil, map[string]vcConfig{"vc-a": {extra: []string{"caFile: " + a.CAFile,
		"sessionManagerURL: " + sm.URL, "sessionManagerTokenFile: " + file, "sessionManagerAllowHTTP: true"}}})
	creds := credentials.New(cfg, credentials.Options{})
	if err := creds.StartAndWait(ctx); err != nil {
		t.Fatal(err)
	}
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, KeepAlive: time.Hour})
	cl, _ := p.Client("vc-a")
	poll.True(t, "connected", func() bool { return cl.Health().State == vcenter.Connected })
	sm.SetTokens("sa-token-2")
	if err := os.WriteFile(file, []byte("sa-token-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(ctx, soapAndREST); err != nil {
		t.Fatalf("call after the session ended: %v", err)
	}
	reqs := sm.Requests()
	if len(reqs) != 2 || reqs[0].Authorization != "Bearer sa-token-1" || reqs[1].Authorization != "Bearer sa-token-2" {
		t.Fatalf("session manager requests %+v, want the file's token at each login", reqs)
	}
}

// TestSharedSessionRefused: a bearer token goes only where it was meant
// to. A session manager a Secret names, without its own token, is never
// sent the token file (the Pod's service-account token by default); a
// plain http one, even with its token, is refused unless the config allows
// http for the vCenter. Neither is asked anything; the vCenter is down
// with an error naming the Secret and the keys.
func TestSharedSessionRefused(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	sm, err := a.StartSessionManager(ctx, vcsim.SessionManagerOptions{Tokens: []string{"sa-token-1", "t"}, Plain: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("sa-token-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		data  map[string]string
		extra []string
		want  string
	}{
		"a Secret's URL without token": {map[string]string{"127.0.0.1.vc-session-manager-url": sm.URL}, []string{"sessionManagerTokenFile: " + file, "sessionManagerAllowHTTP: true"},
			"without its token (key 127.0.0.1.vc-session-manager-token)"},
		"a Secret's plain http URL": {map[string]string{"127.0.0.1.vc-session-manager-url": sm.URL, "127.0.0.1.vc-session-manager-token": "t"}, nil,
			"is plain http"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, creds, _ := secretCreds(t, ctx, f, tc.data, tc.extra...)
			p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, KeepAlive: time.Hour})
			cl, _ := p.Client("vc-a")
			poll.True(t, "refused", func() bool {
				h := cl.Health()
				return h.State != vcenter.Connected && h.LastError != nil && strings.Contains(h.LastError.Error(), tc.want)
			})
			if err := cl.Health().LastError; !errors.Is(err, credentials.ErrSessionManagerRefused) || strings.Contains(err.Error(), "sa-token-1") {
				t.Errorf("health error %v", err)
			}
			if reqs := sm.Requests(); len(reqs) != 0 {
				t.Errorf("the session manager was asked: %+v", reqs)
			}
		})
	}
}

// TestSharedSessionKeepAlive: keepalive keeps a cloned session alive
// (govmomi's keepalive handler does not start on CloneSession; ours does not
// depend on it).
func TestSharedSessionKeepAlive(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	if err := a.SetSessionTimeout(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	sm, err := a.StartSessionManager(ctx, vcsim.SessionManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	cfg, creds, _ := secretCreds(t, ctx, f, map[string]string{"127.0.0.1.vc-session-manager-url": sm.URL, "127.0.0.1.vc-session-manager-token": "t"})
	p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, KeepAlive: 100 * time.Millisecond})
	cl, _ := p.Client("vc-a")
	poll.True(t, "connected", func() bool { return cl.Health().State == vcenter.Connected })
	before := cl.Logins()
	// A control clone of the same session manager, never used: once the
	// server has expired it, ours would have expired too without keepalive.
	cloneControl(ctx, t, a, sm)
	poll.True(t, "the control clone expired", func() bool {
		n, err := a.CountSessions(ctx)
		return err == nil && n == 1
	})
	if err := cl.Do(ctx, soapAndREST); err != nil {
		t.Fatal(err)
	}
	if cl.Logins() != before || len(sm.Requests()) != 2 {
		t.Errorf("logins %d -> %d, ticket requests %d: keepalive did not keep the cloned session", before, cl.Logins(), len(sm.Requests()))
	}
}

// cloneControl clones a session from a ticket of sm, as the CCM does.
func cloneControl(ctx context.Context, t *testing.T, a *vcsim.VCenter, sm *vcsim.SessionManager) *vim25.Client {
	t.Helper()
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(a.CAFile)
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("CA file: %v", err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, sm.URL, nil)
	req.Header.Set("Authorization", "Bearer t")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var body struct{ Token string }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	sc := soap.NewClient(a.URL(), false)
	if err := sc.SetRootCAs(a.CAFile); err != nil {
		t.Fatal(err)
	}
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := session.NewManager(c).CloneSession(ctx, body.Token); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWithdrawnModes: withdrawing a certificate or a shared session from
// the Secret logs the session out at once, as for a password.
func TestWithdrawnModes(t *testing.T) {
	f := startFleet(t)
	a := f.VCenters[0]
	ctx, cancel := context.WithTimeout(quiet(t), time.Minute)
	defer cancel()
	now := time.Now()
	su, err := vcsim.NewSolutionUser("ccm", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	a.AddSolutionUser(su.Certificate)
	sm, err := a.StartSessionManager(ctx, vcsim.SessionManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	for name, data := range map[string]map[string]string{
		"certificate":    {"127.0.0.1.username": su.CertPEM, "127.0.0.1.password": su.KeyPEM},
		"shared session": {"127.0.0.1.vc-session-manager-url": sm.URL, "127.0.0.1.vc-session-manager-token": "t"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, creds, client := secretCreds(t, ctx, f, data)
			p := startPool(t, ctx, cfg, vcenter.Options{Credentials: creds, KeepAlive: time.Hour})
			cl, _ := p.Client("vc-a")
			poll.True(t, "connected", func() bool { return cl.Health().State == vcenter.Connected })
			if n, _ := a.CountSessions(ctx); n != 1 {
				t.Fatalf("%d sessions, want 1", n)
			}
			if _, err := client.CoreV1().Secrets("kube-system").Update(ctx, secretObj("vc-a-creds", map[string]string{"unrelated": "x"}), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			poll.True(t, "the session logged out", func() bool { n, err := a.CountSessions(ctx); return err == nil && n == 0 })
			if h := cl.Health(); h.State != vcenter.Down || !errors.Is(h.LastError, credentials.ErrNoCredentials) {
				t.Errorf("health %v %v, want down: no credentials", h.State, h.LastError)
			}
			p.Close()
		})
	}
}
