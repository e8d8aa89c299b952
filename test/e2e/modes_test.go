//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

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
	t.Parallel()
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
	setData := func(data map[string]string) { h.setSecretData(t, data) }
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

// TestCertificateTokenLifetimes: every vCenter in certificate mode (vc-a's
// certificate from the Secret, the others' from the config) with a 30 s
// token lifetime, as STS grants it. Across four renewals (90 s, three
// lifetimes)
// every vCenter stays up and usable, with one SOAP session and one
// inventory read each: each vAPI session is renewed with a new token at
// three quarters of its lifetime and never used after its token expired,
// and a Node registered at the end is initialized with its zone (tags read
// on the renewed vAPI session).
func TestCertificateTokenLifetimes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const lifetime = 30 * time.Second
	now := time.Now()
	quote := func(s string) string { q, _ := json.Marshal(s); return string(q) }
	per := map[string][]string{}
	var vcs []*vcsim.VCenter
	for _, v := range h.fleet.VCenters {
		su, err := vcsim.NewSolutionUser("ccm-"+v.Name, now.Add(-time.Hour), now.Add(24*time.Hour))
		must.OK(t, err)
		v.AddSolutionUser(su.Certificate)
		vcs = append(vcs, v)
		if v.Name == "vc-a" {
			h.setSecretData(t, map[string]string{"127.0.0.1.username": su.CertPEM, "127.0.0.1.password": su.KeyPEM})
			continue
		}
		per[v.Name] = []string{"certificate: " + quote(su.CertPEM), "privateKey: " + quote(su.KeyPEM)}
	}
	h.writeConfig(per)
	raw, err := os.ReadFile(h.cfgPath)
	must.OK(t, err)
	cfg := strings.Replace(string(raw), "global:\n", "global:\n  tokenLifetime: "+lifetime.String()+"\n", 1)
	for _, v := range vcs[1:] {
		cfg = strings.Replace(cfg, "    user: "+v.User+"\n    password: "+v.Password+"\n", "", 1)
	}
	must.OK(t, os.WriteFile(h.cfgPath, []byte(cfg), 0o600))

	ccm := h.startCCM()
	vms := h.fleet.VMs()
	last := vms[len(vms)-1]
	for i, vm := range vms[:len(vms)-1] {
		h.register(t, vm, i%2 == 1)
	}
	h.waitInitialized(t, vms[:len(vms)-1]...)

	// The fifth vAPI login of every vCenter (the first and four renewals,
	// 22.5 s apart: three lifetimes). Meanwhile every vCenter stays usable.
	poll.NoError(t, "four vAPI renewals on every vCenter", 5*lifetime, func() error {
		body, err := ccm.Get("/metrics")
		if err != nil {
			return err
		}
		for _, v := range vcs {
			if !strings.Contains(body, `vsphere_ccm_vcenter_unusable_seconds{vcenter="`+v.Name+`"} 0`) {
				t.Fatalf("%s became unusable while its tokens were renewed", v.Name)
			}
		}
		for _, v := range vcs {
			if st := v.TokenStats(); st.RESTLogins < 5 {
				return fmt.Errorf("%s: %d vAPI logins so far", v.Name, st.RESTLogins)
			}
		}
		return nil
	})
	h.register(t, last, false)
	h.waitInitialized(t, last)

	body, err := ccm.Get("/metrics")
	must.OK(t, err)
	for _, v := range vcs {
		st := v.TokenStats()
		t.Logf("%s: %+v", v.Name, st)
		if st.SOAPLogins != 1 {
			t.Errorf("%s: %d SOAP logins, want 1: the SOAP session (and the inventory) is kept", v.Name, st.SOAPLogins)
		}
		if st.RESTEnded != 0 || st.ExpiredLogins != 0 {
			t.Errorf("%s: %d requests on vAPI sessions whose token expired, %d logins with an expired token; want none", v.Name, st.RESTEnded, st.ExpiredLogins)
		}
		if st.LastRequested != lifetime || st.LastGranted != lifetime {
			t.Errorf("%s: token lifetime asked %s, granted %s; want %s", v.Name, st.LastRequested, st.LastGranted, lifetime)
		}
		if want := `vsphere_ccm_inventory_full_reads_total{vcenter="` + v.Name + `"} 1`; !strings.Contains(body, want) {
			t.Errorf("%s: want one full inventory read (%s)", v.Name, want)
		}
		if v.Logins() != 0 {
			t.Errorf("%s: %d password logins, want none", v.Name, v.Logins())
		}
	}
	if n, err := h.node(last.Name); err != nil || n.Labels["topology.kubernetes.io/zone"] == "" {
		t.Errorf("%s: no zone after the renewals: %v", last.Name, err)
	}
}

// TestSTSUnreachable: vc-b in certificate mode with 20 s tokens and a 10 s
// tag refresh. Once its Node is initialized, vc-b's STS becomes unreachable
// (every connection to it closed) for longer than a token's lifetime, so
// the vAPI session expires unrenewed. The SOAP session goes on: vc-b stays
// up and usable, a Node registered meanwhile is initialized with its zone
// (the lookup over SOAP, the zone from the tag cache), tags pend (the tag
// cache ages), the renewal failure is exported and said once at default
// verbosity, and vc-b is degraded, never down. Once STS answers, the vAPI
// session is renewed and tags are read again: one SOAP login in all.
func TestSTSUnreachable(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const lifetime = 20 * time.Second
	b := h.fleet.VCenter("vc-b")
	now := time.Now()
	su, err := vcsim.NewSolutionUser("ccm-b", now.Add(-time.Hour), now.Add(24*time.Hour))
	must.OK(t, err)
	b.AddSolutionUser(su.Certificate)
	quote := func(s string) string { q, _ := json.Marshal(s); return string(q) }
	h.writeConfig(map[string][]string{"vc-b": {"certificate: " + quote(su.CertPEM), "privateKey: " + quote(su.KeyPEM)}})
	raw, err := os.ReadFile(h.cfgPath)
	must.OK(t, err)
	cfg := strings.Replace(string(raw), "global:\n", "global:\n  tokenLifetime: "+lifetime.String()+"\n  tagRefreshInterval: 10s\n", 1)
	cfg = strings.Replace(cfg, "    user: "+b.User+"\n    password: "+b.Password+"\n", "", 1)
	must.OK(t, os.WriteFile(h.cfgPath, []byte(cfg), 0o600))

	ccm := h.startCCM()
	h.register(t, b.VMs[0], false)
	h.waitInitialized(t, b.VMs[0])
	b.SetSTSDown(true)
	series := func(name string) string { return name + `{vcenter="vc-b"}` }
	poll.NoError(t, "vc-b's vAPI token expired unrenewed", 4*lifetime, func() error {
		expiry := ccm.Gauge(series("vsphere_ccm_vcenter_vapi_token_expiry_timestamp_seconds"))
		failing := ccm.Gauge(series("vsphere_ccm_vcenter_vapi_renewal_failing_seconds"))
		if expiry == 0 || failing == 0 || time.Now().Before(time.Unix(int64(expiry), 0).Add(5*time.Second)) {
			return fmt.Errorf("token expiry %v, renewal failing for %vs", expiry, failing)
		}
		return nil
	})
	if up, unusable := ccm.Gauge(series("vsphere_ccm_vcenter_up")), ccm.Gauge(series("vsphere_ccm_vcenter_unusable_seconds")); up != 1 || unusable != 0 {
		t.Errorf("vc-b up %v, unusable for %vs, with its SOAP session alive; want up and usable", up, unusable)
	}
	h.register(t, b.VMs[1], false)
	h.waitInitialized(t, b.VMs[1])
	if n, err := h.node(b.VMs[1].Name); err != nil || n.Labels["topology.kubernetes.io/zone"] == "" {
		t.Errorf("a Node of vc-b initialized while its vAPI session was expired has no zone: %v", err)
	}
	poll.NoError(t, "tags pending on vc-b", 4*lifetime, func() error {
		if age := ccm.Gauge(series("vsphere_ccm_tag_cache_age_seconds")); age < 25 {
			return fmt.Errorf("tag cache %vs old", age)
		}
		return nil
	})
	b.SetSTSDown(false)
	poll.NoError(t, "vc-b renewed and its tags read again", 4*lifetime, func() error {
		failing, age := ccm.Gauge(series("vsphere_ccm_vcenter_vapi_renewal_failing_seconds")), ccm.Gauge(series("vsphere_ccm_tag_cache_age_seconds"))
		if failing != 0 || age > 15 {
			return fmt.Errorf("renewal failing for %vs, tag cache %vs old", failing, age)
		}
		return nil
	})
	log := ccm.LogText()
	if n := strings.Count(log, "Renewing the vAPI session is failing"); n != 1 {
		t.Errorf("the renewal failure logged %d times at default verbosity, want once", n)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"vCenter health changed"`) && strings.Contains(line, `vcenter="vc-b"`) && strings.Contains(line, `to="down"`) && !strings.Contains(line, "client closed") {
			t.Errorf("vc-b marked down while its SOAP session lived: %s", line)
		}
	}
	if !strings.Contains(log, `vcenter="vc-b" from="connected" to="degraded"`) {
		t.Errorf("vc-b was not reported degraded")
	}
	if st := b.TokenStats(); st.SOAPLogins != 1 {
		t.Errorf("vc-b: %d SOAP logins, want 1", st.SOAPLogins)
	}
}
