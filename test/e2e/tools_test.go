//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// TestConfigMistake: a config mistake exits non-zero with file:line, the
// field path and a suggestion. A key written with a value is named; one
// named like a password is not (a secret glued to its key can be one).
func TestConfigMistake(t *testing.T) {
	t.Parallel()
	h := setup(t)
	bad := filepath.Join(h.work, "bad.yaml")
	must.OK(t, os.WriteFile(bad, []byte("global:\n  port: 443\nvcenter:\n  x:\n    server: vc.example.com\n    insecureFlg: true\n    pasword: Zq9-secret\n"), 0o600))
	var stderr bytes.Buffer
	cmd := exec.CommandContext(h.ctx, h.binary, "--cloud-config="+bad, "--kubeconfig="+h.cp.Kubeconfig)
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("exit: %v", err)
	}
	out := stderr.String()
	if !strings.Contains(out, bad+`:6: vcenter["x"].insecureFlg: unknown key "insecureFlg"`) || !strings.Contains(out, "did you mean insecureFlag") {
		t.Errorf("stderr does not name file:line, the field and the key, with the suggestion:\n%s", out)
	}
	if !strings.Contains(out, bad+`:7: vcenter["x"]: unknown key`) || !strings.Contains(out, "did you mean password") ||
		strings.Contains(out, "pasword") || strings.Contains(out, "Zq9") {
		t.Errorf("stderr shows a key named like a password, or its value:\n%s", out)
	}
}

// TestHelmChart: the chart renders manifests the API server accepts.
func TestHelmChart(t *testing.T) {
	t.Parallel()
	h := setup(t)
	objs := h.helmManifests("kube-system")
	if len(objs) < 10 {
		t.Fatalf("the chart rendered %d objects", len(objs))
	}
	h.dryRunApply(t, objs)
	// With a values file written for the reference's chart on top: its pod
	// settings are valid for the API server too.
	ref := h.helmManifests("kube-system", "-f", filepath.Join(h.root, "deploy", "testdata", "reference-chart-values.yaml"),
		"-f", filepath.Join(h.root, "deploy", "testdata", "reference-chart-overrides.yaml"))
	h.dryRunApply(t, ref)
}

// TestTopologyExplain: the subcommand reads the Secret through a
// kubeconfig and explains one node.
func TestTopologyExplain(t *testing.T) {
	t.Parallel()
	h := setup(t)
	vm := h.fleet.VCenter("vc-a").VMs[0]
	h.register(t, vm, true)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(h.ctx, h.binary, "topology", "explain", "--cloud-config", h.cfgPath,
		"--kubeconfig", h.cp.Kubeconfig, "--node", vm.Name, "-o", "json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("topology explain: %v\n%s", err, stderr.String())
	}
	var ex provider.Explanation
	must.OK(t, json.Unmarshal(stdout.Bytes(), &ex))
	if len(ex.Placements) != 1 || ex.Placements[0].VM != vm.Name || ex.Placements[0].Zone == nil ||
		ex.Placements[0].Zone.Value != "zone-"+vm.Cluster || !strings.Contains(ex.Placements[0].Zone.From, "cluster "+vm.Cluster) {
		t.Errorf("explain: %s", stdout.String())
	}
}

// TestHealthAndMetrics: /healthz and /metrics are served; the metrics
// show every vCenter, the requests by method and the caches, and no
// password.
func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	h := setup(t)
	c := h.startCCM()
	h.registerAll(t)
	h.waitInitialized(t, h.fleet.VMs()...)
	body, err := c.Get("/healthz")
	must.OK(t, err)
	if body != "ok" {
		t.Errorf("/healthz: %q", body)
	}
	want := []string{
		`vsphere_ccm_vcenter_up{vcenter="vc-a"} 1`, `vsphere_ccm_vcenter_up{vcenter="vc-b"} 1`,
		`vsphere_ccm_vcenter_logins_total{result="success",vcenter="vc-a"}`,
		`vsphere_ccm_node_lookups_total{result="found"}`,
		`vsphere_ccm_vcenter_requests_total{api="soap",method="WaitForUpdatesEx",outcome="ok",vcenter="vc-b"}`,
		`vsphere_ccm_vcenter_requests_total{api="rest",method="tagging/tag-association:list-attached-objects-on-tags",outcome="ok",vcenter="vc-c"}`,
		`vsphere_ccm_inventory_vms{vcenter="vc-b"} 3`,
		`vsphere_ccm_tag_cache_age_seconds{vcenter="vc-a"}`,
		`vsphere_ccm_vcenter_unusable_seconds{vcenter="vc-c"} 0`,
	}
	// The build is stamped (make build): --version and the build info
	// metric name the same version.
	out, err := exec.CommandContext(h.ctx, h.binary, "--version").Output()
	must.OK(t, err)
	version, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "vsphere-cloud-controller-manager ")
	if !ok || !strings.HasPrefix(version, "v") || strings.Contains(version, "$Format") {
		t.Errorf("--version printed %q, want vsphere-cloud-controller-manager v...", out)
	}
	want = append(want, `git_version="`+version+`"`)
	body, err = c.Get("/metrics")
	must.OK(t, err)
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	for _, pw := range h.passwords() {
		if strings.Contains(body, pw) || strings.Contains(body, "password") {
			t.Errorf("/metrics mentions a password")
		}
	}
}
