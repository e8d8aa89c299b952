// Package ccmproc runs the CCM binary as a process against a test control
// plane, as a Deployment would run it: the one way the demo, the
// benchmarks, the soak and the e2e tests start it. Start, stop (SIGTERM),
// kill (SIGKILL), log, health, metrics and memory.
package ccmproc

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
)

// Process is one CCM binary running against a test control plane.
type Process struct {
	cmd     *exec.Cmd
	log     *os.File
	serving string        // https://127.0.0.1:<port>, for /healthz and /metrics
	exited  chan struct{} // closed when the process has ended (its Wait returned)
}

// Start runs binary with the control plane's CCM flags, configArg as
// the cloud config (a path, or a whole flag for the zero-cost CCM), and
// set overriding or adding flags ("--v": "1").
func Start(cp *controlplane.ControlPlane, binary, configArg, logPath string, set map[string]string) (*Process, error) {
	return StartEnv(cp, binary, configArg, logPath, set, nil)
}

// StartEnv is Start with env (KEY=VALUE) added to the process's
// environment.
func StartEnv(cp *controlplane.ControlPlane, binary, configArg, logPath string, set map[string]string, env []string) (*Process, error) {
	args, err := cp.CCMArgs("")
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(configArg, "--") {
		args[0] = configArg
	} else {
		args[0] = "--cloud-config=" + configArg
	}
	seen := map[string]bool{}
	for i, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := set[name]; ok {
			args[i] = name + "=" + v
			seen[name] = true
		}
	}
	for name, v := range set {
		if !seen[name] {
			args = append(args, name+"="+v)
		}
	}
	p := &Process{}
	for _, a := range args {
		if port, ok := strings.CutPrefix(a, "--secure-port="); ok {
			p.serving = "https://127.0.0.1:" + port
		}
	}
	if p.log, err = os.Create(logPath); err != nil {
		return nil, err
	}
	p.cmd = exec.Command(binary, args...)
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		p.log.Close()
		return nil, err
	}
	p.exited = make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Flags turns "--name=value" arguments into the set of Start.
func Flags(args ...string) map[string]string {
	out := make(map[string]string, len(args))
	for _, a := range args {
		name, v, _ := strings.Cut(a, "=")
		out[name] = v
	}
	return out
}

// Stop ends the process with SIGTERM and waits for it (a process that
// has ended already is not signalled).
func (p *Process) Stop() {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
	}
	p.log.Close()
}

// StopWithin ends the process with SIGTERM and, if it has not ended
// within d, with SIGKILL; it reports whether it ended by itself.
func (p *Process) StopWithin(d time.Duration) bool {
	clean := true
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			clean = false
			p.Kill()
		}
	}
	p.log.Close()
	return clean
}

// LogText is the process's log so far.
func (p *Process) LogText() string {
	b, _ := os.ReadFile(p.log.Name())
	return string(b)
}

// Kill ends the process with SIGKILL, as a node failure would.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// PeakRSS is the process's peak resident set size (VmHWM) in KB.
func (p *Process) PeakRSS() int64 { return p.Status("VmHWM") }

// PID is the process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Status reads one KB field of /proc/<pid>/status (VmHWM, RssAnon,
// RssFile); 0 if unknown.
func (p *Process) Status(field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// LogContains reports whether the process's log has s.
func (p *Process) LogContains(s string) bool { return strings.Contains(p.LogText(), s) }

func (p *Process) String() string { return filepath.Base(p.log.Name()) }

// LogPath is the file the process logs to.
func (p *Process) LogPath() string { return p.log.Name() }

// Serving is the base URL of its secure serving (health, metrics).
func (p *Process) Serving() string { return p.serving }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.exited }

// ExitCode is the process's exit status once it has ended (-1 when killed
// by a signal, or still running).
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Exited reports whether the process has ended (stopped or killed).
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

var insecure = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the benchmark CCM's self-signed serving certificate

// WaitHealthy waits until /healthz answers ok (at most 2 minutes).
func (p *Process) WaitHealthy(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := insecure.Get(p.serving + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the CCM did not become healthy within 2 minutes (log %s)", p.log.Name())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitStarted waits until /metrics shows each of vcenters vCenters up, its
// inventory filled and its tag cache refreshed.
func (p *Process) WaitStarted(ctx context.Context, vcenters int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		res, err := insecure.Get(p.serving + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			ready := 0
			for _, line := range strings.Split(string(b), "\n") {
				for _, prefix := range []string{"vsphere_ccm_vcenter_up{", "vsphere_ccm_inventory_vms{", "vsphere_ccm_tag_cache_age_seconds{"} {
					if strings.HasPrefix(line, prefix) && !strings.HasSuffix(line, " 0") && !strings.HasSuffix(line, " -1") {
						ready++
					}
				}
			}
			if ready == 3*vcenters {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the provider did not report every vCenter started within %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Get fetches a path from the secure serving port: the body of a 200
// answer, an error otherwise.
func (p *Process) Get(path string) (string, error) {
	res, err := insecure.Get(p.serving + path)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s\n%s", path, res.Status, b)
	}
	return string(b), nil
}

// Do sends a request to the secure serving port (req's URL starts with
// Serving), trusting its self-signed certificate.
func (p *Process) Do(req *http.Request) (*http.Response, error) { return insecure.Do(req) }

// Metric reads one series from /metrics, its name and labels exactly as
// exposed (`name` or `name{label="v"}`); 0 if absent.
func (p *Process) Metric(series string) (float64, error) {
	body, err := p.Get("/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, nil
}

// Gauge is Metric, 0 on any error.
func (p *Process) Gauge(series string) float64 {
	v, _ := p.Metric(series)
	return v
}

// Counts are vSphere requests by API.
type Counts struct {
	SOAP, REST, RESTLogins float64
	// Polls are the inventory's long polls (WaitForUpdatesEx), which run
	// whatever the CCM is asked: the other requests are the work's.
	Polls float64
}

// ScrapeMethods sums vsphere_ccm_vcenter_requests_total by API and
// method ("soap WaitForUpdatesEx") from /metrics.
func (p *Process) ScrapeMethods() (map[string]float64, error) {
	res, err := insecure.Get(p.serving + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return SumSeries(res.Body, provider.MetricRequestsTotal, func(l map[string]string) string { return l["api"] + " " + l["method"] })
}

// ScrapeCounts sums vsphere_ccm_vcenter_requests_total by API from /metrics.
func (p *Process) ScrapeCounts() (Counts, error) {
	var c Counts
	methods, err := p.ScrapeMethods()
	if err != nil {
		return c, err
	}
	for m, v := range methods {
		api, method, _ := strings.Cut(m, " ")
		switch api {
		case "soap":
			c.SOAP += v
			if method == "WaitForUpdatesEx" {
				c.Polls += v
			}
		case "rest":
			c.REST += v
			if method == "session:post" {
				c.RESTLogins += v
			}
		}
	}
	return c, nil
}
