//go:build e2e

package e2e

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// ccm is one CCM process of a test, run as a Deployment would run it.
type ccm struct {
	cmd     *exec.Cmd
	log     string // kept in .cache/e2e for post-mortems
	serving string // the secure serving address (health, metrics)
	exited  chan struct{}
}

// startCCM runs the binary with the test's cloud config, authenticated as
// the shipped ServiceAccount, without leader election unless extra says
// otherwise. When the test ends the process is stopped; its log is shown
// if the test failed and is checked for passwords and RBAC denials.
func (h *harness) startCCM(extra ...string) *ccm {
	h.t.Helper()
	artifacts := filepath.Join(h.root, ".cache", "e2e")
	must.OK(h.t, os.MkdirAll(artifacts, 0o755))
	h.ccms++
	c := &ccm{log: filepath.Join(artifacts, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(h.t.Name(), "/", "_"), h.ccms)), exited: make(chan struct{})}
	logf, err := os.Create(c.log)
	must.OK(h.t, err)
	args, err := h.cp.CCMArgs(h.cfgPath)
	must.OK(h.t, err)
	for i, a := range args {
		if port, ok := strings.CutPrefix(a, "--secure-port="); ok {
			c.serving = "https://127.0.0.1:" + port
		}
		for _, f := range []string{"--kubeconfig=", "--authentication-kubeconfig=", "--authorization-kubeconfig="} {
			if strings.HasPrefix(a, f) {
				args[i] = f + h.ccmKubeconfig
			}
		}
	}
	args = append(args, extra...)
	c.cmd = exec.Command(h.binary, args...)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must.OK(h.t, c.cmd.Start())
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t := h.t
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(15 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
		logf.Close()
		log, _ := os.ReadFile(c.log)
		if t.Failed() {
			t.Logf("CCM log (tail; all of it in %s):\n%s", c.log, tailString(string(log), 6000))
		}
		if strings.Contains(strings.ToLower(string(log)), "forbidden") {
			t.Errorf("the CCM hit an RBAC denial with the shipped RBAC; see %s", c.log)
		}
		for _, pw := range h.passwords() {
			for _, form := range []string{pw, base64.StdEncoding.EncodeToString([]byte(pw))} {
				if strings.Contains(string(log), form) {
					t.Errorf("a password appears in the CCM log %s", c.log)
				}
			}
		}
	})
	return c
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

// kill ends the process with SIGKILL, as a lost node would.
func (c *ccm) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// logText is the process's log so far.
func (c *ccm) logText() string {
	b, _ := os.ReadFile(c.log)
	return string(b)
}

var insecureHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed serving cert of the test CCM

// get fetches a path from the CCM's secure serving port.
func (c *ccm) get(path string) (string, error) {
	res, err := insecureHTTP.Get(c.serving + path)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s\n%s", path, res.Status, b)
	}
	return string(b), nil
}

// metric returns the value of one series (name{labels} exactly as
// exposed) from /metrics; 0 if absent.
func (c *ccm) metric(t *testing.T, series string) float64 {
	t.Helper()
	body, err := c.get("/metrics")
	must.OK(t, err)
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			must.OK(t, err)
			return f
		}
	}
	return 0
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
