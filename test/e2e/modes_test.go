//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestCredentialModes: every credential mode initializes Nodes through the
// real API server, from a Secret and from the config. vc-a's Secret holds
// a shared session (a session manager's URL and token, nothing else), then
// rotates to a solution user's certificate and key, then to a password,
// without a restart: each change logs in anew in its mode. vc-b's config
// holds a certificate (certificate, privateKey), vc-c's a session manager.
// No key, token or ticket appears in the CCM's log.
func TestCredentialModes(t *testing.T) { testCredentialModes(t, "--v=2") }

// TestCredentialModesVerbose: the same at --v=10 (lowered to the cap, 7,
// with a warning): still no key, token or ticket in the log.
func TestCredentialModesVerbose(t *testing.T) { testCredentialModes(t, "--v=10") }

func testCredentialModes(t *testing.T, verbosity string) {
	h := setup(t)
	a, b, c := h.fleet.VCenter("vc-a"), h.fleet.VCenter("vc-b"), h.fleet.VCenter("vc-c")
	now := time.Now()
	suA, err := vcsim.NewSolutionUser("ccm-a", now.Add(-time.Hour), now.Add(24*time.Hour))
	must.OK(t, err)
	suB, err := vcsim.NewSolutionUser("ccm-b", now.Add(-time.Hour), now.Add(24*time.Hour))
	must.OK(t, err)
	a.AddSolutionUser(suA.Certificate)
	b.AddSolutionUser(suB.Certificate)
	smA, err := a.StartSessionManager(h.ctx, vcsim.SessionManagerOptions{Tokens: []string{"token-a-S3ntinel"}})
	must.OK(t, err)
	t.Cleanup(smA.Close)
	smC, err := c.StartSessionManager(h.ctx, vcsim.SessionManagerOptions{Tokens: []string{"token-c-S3ntinel"}})
	must.OK(t, err)
	t.Cleanup(smC.Close)

	quote := func(s string) string { q, _ := json.Marshal(s); return string(q) } // a YAML double-quoted scalar
	h.writeConfig(map[string][]string{
		"vc-b": {"certificate: " + quote(suB.CertPEM), "privateKey: " + quote(suB.KeyPEM)},
		"vc-c": {"sessionManagerURL: " + smC.URL, "sessionManagerToken: token-c-S3ntinel"},
	})
	raw, err := os.ReadFile(h.cfgPath)
	must.OK(t, err)
	cfg := string(raw)
	for _, v := range []*vcsim.VCenter{b, c} {
		cfg = strings.Replace(cfg, "    user: "+v.User+"\n    password: "+v.Password+"\n", "", 1)
	}
	must.OK(t, os.WriteFile(h.cfgPath, []byte(cfg), 0o600))
	setData := func(data map[string]string) {
		s, err := h.kube.CoreV1().Secrets("kube-system").Get(h.ctx, secretName, metav1.GetOptions{})
		must.OK(t, err)
		s.Data = map[string][]byte{}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		_, err = h.kube.CoreV1().Secrets("kube-system").Update(h.ctx, s, metav1.UpdateOptions{})
		must.OK(t, err)
	}
	setData(map[string]string{"127.0.0.1.vc-session-manager-url": smA.URL, "127.0.0.1.vc-session-manager-token": "token-a-S3ntinel"})

	ccm := h.startCCM(verbosity)
	h.register(t, a.VMs[0], false)
	h.register(t, b.VMs[0], false)
	h.register(t, c.VMs[0], true)
	h.waitInitialized(t, a.VMs[0], b.VMs[0], c.VMs[0])
	if len(smA.Requests()) == 0 || len(smC.Requests()) == 0 {
		t.Errorf("session manager requests: vc-a %d, vc-c %d; want the shared sessions used", len(smA.Requests()), len(smC.Requests()))
	}
	if issued, _ := b.TokensIssued(); issued == 0 {
		t.Error("vc-b: STS issued no token: the certificate in the config was not used")
	}
	for _, v := range []*vcsim.VCenter{a, b, c} {
		if v.Logins() != 0 || len(v.FailedLogins()) != 0 {
			t.Errorf("%s: %d password logins, %d failed; want none", v.Name, v.Logins(), len(v.FailedLogins()))
		}
	}

	// The Secret rotates to a certificate: a new login, by token.
	h.waitSecretLoaded(t, ccm, func() {
		setData(map[string]string{"127.0.0.1.username": suA.CertPEM, "127.0.0.1.password": suA.KeyPEM})
	})
	poll.True(t, "vc-a logs in with the certificate", func() bool { issued, _ := a.TokensIssued(); return issued > 0 })
	h.register(t, a.VMs[1], false)
	h.waitInitialized(t, a.VMs[1])

	// Then to a password.
	h.waitSecretLoaded(t, ccm, func() {
		setData(map[string]string{"127.0.0.1.username": a.User, "127.0.0.1.password": a.Password})
	})
	poll.True(t, "vc-a logs in with the password", func() bool { return a.Logins() > 0 })
	h.register(t, a.VMs[2], true)
	h.waitInitialized(t, a.VMs[2])
	if n := len(a.FailedLogins()); n != 0 {
		t.Errorf("vc-a: %d failed logins across the rotations", n)
	}

	log := ccm.LogText()
	if verbosity == "--v=10" && !strings.Contains(log, "-v=10 lowered to 7") {
		t.Errorf("no warning that -v=10 was lowered to the cap")
	}
	for _, secret := range []string{"token-a-S3ntinel", "token-c-S3ntinel", strings.Split(suA.KeyPEM, "\n")[1], strings.Split(suB.KeyPEM, "\n")[1]} {
		if strings.Contains(log, secret) {
			t.Errorf("a key or token appears in the CCM log %s", ccm.LogPath())
		}
	}
	for _, r := range append(smA.Requests(), smC.Requests()...) {
		if r.Ticket != "" && strings.Contains(log, r.Ticket) {
			t.Errorf("a session ticket appears in the CCM log %s", ccm.LogPath())
		}
	}
}
