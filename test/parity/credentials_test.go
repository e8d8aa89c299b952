//go:build parity

package parity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/refwire"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// credentialCase is one Secret's data; {cert}, {key}, {otherKey},
// {expiredCert}, {expiredKey}, {ecCert}, {ecKey}, {unregCert}, {unregKey},
// {user}, {password} and {sm} (the session manager's URL) are replaced.
type credentialCase struct {
	name string
	data map[string]string
	// differs names the deliberate difference of this case, "" for none.
	differs string
}

// credentialCorpus is every credential input the reference reads from a
// Secret: each mode, each combination of its keys, and what it gets
// wrong.
func credentialCorpus() []credentialCase {
	const s = "127.0.0.1"
	return []credentialCase{
		{name: "password", data: map[string]string{s + ".username": "{user}", s + ".password": "{password}"}},
		{name: "wrong password", data: map[string]string{s + ".username": "{user}", s + ".password": "not-the-password"}},
		{name: "IPv6-safe keys", data: map[string]string{"server_a": s, "username_a": "{user}", "password_a": "{password}"}},
		{name: "username without password", data: map[string]string{s + ".username": "{user}"}},
		{name: "shared session", data: map[string]string{s + ".vc-session-manager-url": "{sm}", s + ".vc-session-manager-token": "tok-1"}},
		{name: "shared session and a password", data: map[string]string{s + ".vc-session-manager-url": "{sm}", s + ".vc-session-manager-token": "tok-1", s + ".username": "{user}", s + ".password": "{password}"}},
		{name: "shared session, token refused", data: map[string]string{s + ".vc-session-manager-url": "{sm}", s + ".vc-session-manager-token": "not-a-token"}},
		// Both choose a shared session and send nothing here: the reference
		// would send the Pod's service-account token, but there is none on
		// this machine; this CCM refuses the URL of a Secret without its
		// token (TestResolveSessionManager, TestSharedSessionRefused).
		{name: "shared session without token", data: map[string]string{s + ".vc-session-manager-url": "{sm}"}},
		{name: "empty session-manager URL beside a password", data: map[string]string{s + ".vc-session-manager-url": "", s + ".username": "{user}", s + ".password": "{password}"}},
		{name: "session-manager token without URL", data: map[string]string{s + ".vc-session-manager-token": "tok-1"}},
		{name: "certificate", data: map[string]string{s + ".username": "{cert}", s + ".password": "{key}"}},
		{name: "certificate in IPv6-safe keys", data: map[string]string{"server_a": s, "username_a": "{cert}", "password_a": "{key}"}},
		{name: "certificate STS does not know", data: map[string]string{s + ".username": "{unregCert}", s + ".password": "{unregKey}"}},
		{name: "certificate with another key", data: map[string]string{s + ".username": "{cert}", s + ".password": "{otherKey}"}},
		{name: "certificate with a password", data: map[string]string{s + ".username": "{cert}", s + ".password": "{password}"}},
		{name: "ECDSA certificate", data: map[string]string{s + ".username": "{ecCert}", s + ".password": "{ecKey}"}},
		{name: "private key as the password of a user", data: map[string]string{s + ".username": "{user}", s + ".password": "{key}"}, differs: "key-as-password"},
		{name: "expired certificate", data: map[string]string{s + ".username": "{expiredCert}", s + ".password": "{expiredKey}"}, differs: "expired-certificate"},
	}
}

// deliberateCredentialDifferences are the cases where this CCM refuses
// what the reference does (docs/migration.md): ours makes no request.
var deliberateCredentialDifferences = map[string]string{
	"key-as-password":     "the reference sends a PEM private key given as the password of a user to vCenter as a password; this CCM refuses it and sends nothing",
	"expired-certificate": "the reference asks STS for a token with an expired certificate, which STS refuses; this CCM refuses it before any request (neither connects)",
}

// loginCalls is what a login attempt sent, in order: the session
// manager's GET, STS Issue, and the SOAP login methods.
func loginCalls(v *vcsim.VCenter, sm *vcsim.SessionManager, fromVC, fromSM int) []string {
	var calls []string
	for range sm.Requests()[fromSM:] {
		calls = append(calls, "session-manager GET")
	}
	for _, r := range v.Requests()[fromVC:] {
		switch {
		case strings.HasPrefix(r.Path, "/sts/") && bytes.Contains(r.Body, []byte("/Issue")):
			calls = append(calls, "STS Issue")
		case r.Path == "/sdk":
			for _, m := range []string{"Login", "LoginByToken", "CloneSession"} {
				if bytes.Contains(r.Body, []byte("<"+m+">")) || bytes.Contains(r.Body, []byte("<"+m+" ")) {
					calls = append(calls, m)
				}
			}
		}
	}
	return calls
}

// staticSource is a credential source of fixed sources.
type staticSource struct {
	src credentials.Sources
	ch  chan struct{}
}

func (s staticSource) Get(vc config.VCenter) (secret.Credentials, string, error) {
	return credentials.Resolve(vc, s.src)
}
func (s staticSource) Changed() <-chan struct{} { return s.ch }

// TestParityCredentials feeds the reference's own credential manager and
// connection code (hack/refnode -credentials: credentialmanager, vclib) and
// this CCM the same Secrets, against the same simulated vCenter (with STS
// and a session manager speaking the reference's contract), and compares
// the mode chosen and the login calls made. The only differences allowed
// are deliberateCredentialDifferences, where this CCM refuses what would
// leak a key or cannot work.
func TestParityCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ref, err := refwire.Build(ctx, filepath.Join("..", ".."), ".", t.TempDir(), "refnode")
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	v := fleet.VCenters[0]
	sm, err := v.StartSessionManager(ctx, vcsim.SessionManagerOptions{Tokens: []string{"tok-1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "pkg", "secret", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	now := time.Now()
	unreg, err := vcsim.NewSolutionUser("not-registered", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert := read("solution-user.crt")
	for _, name := range []string{"solution-user.crt", "expired.crt"} {
		c, err := secret.NewCertificate(read(name), secret.New(read(strings.TrimSuffix(name, ".crt")+".key")))
		if err != nil {
			t.Fatal(err)
		}
		v.AddSolutionUser(c.Leaf())
	}
	repl := strings.NewReplacer("{cert}", cert, "{key}", read("solution-user.key"), "{otherKey}", read("other.key"),
		"{expiredCert}", read("expired.crt"), "{expiredKey}", read("expired.key"), "{ecCert}", read("ec.crt"), "{ecKey}", read("ec.key"),
		"{unregCert}", unreg.CertPEM, "{unregKey}", unreg.KeyPEM, "{user}", v.User, "{password}", v.Password, "{sm}", sm.URL)
	proc, err := refwire.StartCredentials(ctx, ref, "SSL_CERT_FILE="+v.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	v.RecordRequests()

	seen := map[string]bool{}
	for _, tc := range credentialCorpus() {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, val := range tc.data {
				data[k] = []byte(repl.Replace(val))
			}
			fromVC, fromSM := len(v.Requests()), len(sm.Requests())
			a, err := proc.AskCredentials(v.Host, strconv.Itoa(v.Port), v.CAFile, data)
			if err != nil {
				t.Fatal(err)
			}
			refReqs, refCalls, refOK := v.Requests()[fromVC:], loginCalls(v, sm, fromVC, fromSM), a.Connected

			fromVC, fromSM = len(v.Requests()), len(sm.Requests())
			ourOK, mode := ourLogin(ctx, t, v, data)
			ourReqs, ourCalls := v.Requests()[fromVC:], loginCalls(v, sm, fromVC, fromSM)

			t.Logf("reference (mode %q): %v connected=%v; this CCM (mode %q): %v connected=%v", a.Mode, refCalls, refOK, mode, ourCalls, ourOK)
			same := slices.Equal(refCalls, ourCalls) && refOK == ourOK && a.Mode == string(mode)
			switch {
			case tc.differs == "" && !same:
				t.Errorf("the reference made %v (connected %v), this CCM %v (connected %v)", refCalls, refOK, ourCalls, ourOK)
			case tc.differs != "" && same:
				t.Errorf("deliberate difference %q no longer shows: both made %v", tc.differs, ourCalls)
			case tc.differs != "":
				seen[tc.differs] = true
				if len(ourCalls) != 0 || ourOK {
					t.Errorf("%s: this CCM made %v (connected %v), want no request", tc.differs, ourCalls, ourOK)
				}
			}
			// A private key never leaves this CCM; the reference's leak is shown.
			for _, keyFile := range []string{"solution-user.key", "other.key", "expired.key", "ec.key"} {
				line := strings.Split(read(keyFile), "\n")[1]
				if sent(ourReqs, line) {
					t.Errorf("this CCM sent %s", keyFile)
				}
				if tc.differs == "key-as-password" && keyFile == "solution-user.key" && !sent(refReqs, line) {
					t.Errorf("the reference did not send the key given as a password: the case no longer shows its leak")
				}
			}
		})
	}
	for d, why := range deliberateCredentialDifferences {
		if !seen[d] {
			t.Errorf("deliberate difference %q (%s) not shown by the corpus", d, why)
		}
	}
}

// ourLogin logs in once with this CCM's credential reading and vCenter client,
// as the controller manager does, and reports the mode it chose.
func ourLogin(ctx context.Context, t *testing.T, v *vcsim.VCenter, data map[string][]byte) (bool, secret.Mode) {
	t.Helper()
	cfg, _, err := config.Parse("parity.yaml", []byte(fmt.Sprintf(
		"global:\n  secretName: vsphere-creds\n  secretNamespace: kube-system\nvcenter:\n  vc-a:\n    server: %s\n    port: %d\n    caFile: %s\n",
		v.Host, v.Port, v.CAFile)), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, _, parseErr := credentials.ParseData(data)
	src := staticSource{src: credentials.Sources{Secrets: map[config.SecretRef]credentials.Set{{Namespace: "kube-system", Name: "vsphere-creds"}: set}}, ch: make(chan struct{})}
	// The mode chosen: that of the credentials used, or of those refused
	// before any request (a certificate that cannot log in, a session
	// manager a bearer token must not go to).
	var mode secret.Mode
	c, _, err := src.Get(cfg.VCenters[0])
	switch {
	case err == nil:
		mode = c.Mode()
	case errors.Is(err, credentials.ErrSessionManagerRefused):
		mode = secret.ModeSharedSession
	case errors.Is(parseErr, secret.ErrCertificate):
		mode = secret.ModeCertificate
	}
	p, err := vcenter.NewPool(cfg, vcenter.Options{Credentials: src, RetryMin: time.Hour, RetryMax: time.Hour, KeepAlive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	p.Start(pctx)
	err = p.WaitFirstAttempt(ctx)
	cl, _ := p.Client("vc-a")
	ok := err == nil && cl.Health().State == vcenter.Connected
	cancel()
	p.Close()
	return ok, mode
}

// sent reports whether any request's body or headers contain s.
func sent(reqs []vcsim.Request, s string) bool {
	for _, r := range reqs {
		var h bytes.Buffer
		_ = r.Header.Write(&h)
		if bytes.Contains(r.Body, []byte(s)) || bytes.Contains(h.Bytes(), []byte(s)) {
			return true
		}
	}
	return false
}
