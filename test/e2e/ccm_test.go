//go:build e2e

package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// ccm is one CCM process of a test, run as a Deployment would run it.
type ccm struct {
	*ccmproc.Process
}

// startCCM runs the binary with the test's cloud config, authenticated as
// the shipped ServiceAccount, without leader election unless extra
// ("--name=value" flags) says otherwise. When the test ends the process is
// stopped; its log (kept in .cache/e2e for post-mortems) is shown if the
// test failed and is checked for passwords and RBAC denials.
func (h *harness) startCCM(extra ...string) *ccm {
	h.t.Helper()
	c, err := h.launch(h.ccmEnv, extra...)
	must.OK(h.t, err)
	return c
}

// launch is startCCM with env, and safe to call from any goroutine: an
// error is returned, not raised.
func (h *harness) launch(env []string, extra ...string) (*ccm, error) {
	artifacts := filepath.Join(h.root, ".cache", "e2e")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.ccms++
	n := h.ccms
	h.mu.Unlock()
	logPath := filepath.Join(artifacts, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(h.t.Name(), "/", "_"), n))
	set := ccmproc.Flags(extra...)
	for _, f := range []string{"--kubeconfig", "--authentication-kubeconfig", "--authorization-kubeconfig"} {
		set[f] = h.ccmKubeconfig
	}
	p, err := ccmproc.StartEnv(h.cp, h.binary, h.cfgPath, logPath, set, env)
	if err != nil {
		return nil, err
	}
	c := &ccm{Process: p}
	t := h.t
	t.Cleanup(func() {
		p.StopWithin(15 * time.Second)
		log := p.LogText()
		if t.Failed() {
			t.Logf("CCM log (tail; all of it in %s):\n%s", logPath, tailString(log, 6000))
		}
		if strings.Contains(strings.ToLower(log), "forbidden") {
			t.Errorf("the CCM hit an RBAC denial with the shipped RBAC; see %s", logPath)
		}
		for _, pw := range h.passwords() {
			for _, form := range []string{pw, base64.StdEncoding.EncodeToString([]byte(pw))} {
				if strings.Contains(log, form) {
					t.Errorf("a password appears in the CCM log %s", logPath)
				}
			}
		}
	})
	return c, nil
}

// passwords are every password the test's vCenters have accepted, for
// the log checks.
func (h *harness) passwords() []string {
	var out []string
	for _, v := range h.fleet.VCenters {
		out = append(out, v.Password, v.CurrentPassword())
	}
	return out
}

// metric returns the value of one series (name{labels} exactly as
// exposed) from /metrics; 0 if absent.
func (c *ccm) metric(t *testing.T, series string) float64 {
	t.Helper()
	v, err := c.Metric(series)
	must.OK(t, err)
	return v
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
