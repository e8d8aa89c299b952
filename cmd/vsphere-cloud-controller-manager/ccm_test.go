package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// An explicit --controllers list without node-topology never loses its
// features silently: a config that asks for one is refused, naming the
// flag and the field; otherwise a warning says what is lost.
func TestControllersWithoutNodeTopology(t *testing.T) {
	dir := t.TempDir()
	base := "vcenter:\n  a:\n    server: vc-a.example.com\n    user: u\n    password: p\n"
	preRun := func(cfg string, controllers string) (string, error) {
		path := filepath.Join(dir, "c.yaml")
		must.OK(t, os.WriteFile(path, []byte(base+cfg), 0o600))
		var stderr bytes.Buffer
		cmd, closeFn, err := newCCMCommand(nil, &stderr, make(chan struct{}), func() {})
		must.OK(t, err)
		defer closeFn()
		must.OK(t, cmd.ParseFlags([]string{"--cloud-config=" + path, "--controllers=" + controllers}))
		err = cmd.PreRunE(cmd, nil)
		return stderr.String(), err
	}
	for _, tc := range []struct{ cfg, field string }{
		{"nodes:\n  outOfService:\n    enabled: true\n", "nodes.outOfService.enabled"},
		{"labels:\n  placement: [host]\n", "labels.placement"},
		{"labels:\n  onDrift: relabel\n", "labels.onDrift"},
	} {
		_, err := preRun(tc.cfg, "cloud-node-controller,cloud-node-lifecycle-controller")
		if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "--controllers") {
			t.Errorf("%s without node-topology: %v; want an error naming the field and --controllers", tc.field, err)
		}
	}
	stderr, err := preRun("", "cloud-node-controller,cloud-node-lifecycle-controller")
	if err != nil || !strings.Contains(stderr, "warning: --controllers=cloud-node-controller,cloud-node-lifecycle-controller leaves out node-topology") {
		t.Errorf("no features asked: %v; stderr %q; want a warning saying what is lost", err, stderr)
	}
}

// The serving-csr controller is in the default set, so turning approval on
// needs no flag; an explicit --controllers list that leaves it out refuses
// the config that turns it on, naming the field and the flag.
func TestControllersWithoutServingCSR(t *testing.T) {
	on := &config.Config{Nodes: config.Nodes{ServingCertificates: config.ServingCertificates{Approve: true}}}
	for _, tc := range []struct {
		name        string
		cfg         *config.Config
		controllers []string
		refused     bool
	}{
		{"on, default controllers", on, []string{"*"}, false},
		{"on, named in the list", on, []string{"cloud-node-controller", "node-topology", "serving-csr"}, false},
		{"on, left out of the list", on, []string{"cloud-node-controller", "node-topology"}, true},
		{"on, disabled by name", on, []string{"*", "-serving-csr"}, true},
		{"off, left out of the list", &config.Config{}, []string{"cloud-node-controller"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := needsServingCSR(tc.cfg, tc.controllers)
			switch {
			case tc.refused && (err == nil || !strings.Contains(err.Error(), "nodes.servingCertificates.approve") || !strings.Contains(err.Error(), "--controllers")):
				t.Errorf("%v; want an error naming the field and --controllers", err)
			case !tc.refused && err != nil:
				t.Errorf("refused: %v", err)
			}
		})
	}
	// Through the command: the default --controllers value is "*".
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	must.OK(t, os.WriteFile(path, []byte("vcenter:\n  a:\n    server: vc-a.example.com\n    user: u\n    password: p\nnodes:\n  servingCertificates:\n    approve: true\n"), 0o600))
	var stderr bytes.Buffer
	cmd, closeFn, err := newCCMCommand(nil, &stderr, make(chan struct{}), func() {})
	must.OK(t, err)
	defer closeFn()
	must.OK(t, cmd.ParseFlags([]string{"--cloud-config=" + path, "--controllers=cloud-node-controller"}))
	if err := cmd.PreRunE(cmd, nil); err == nil || !strings.Contains(err.Error(), "serving-csr") {
		t.Errorf("the command accepted approval without its controller: %v", err)
	}
	if f := cmd.Flags().Lookup("controllers"); f == nil || f.DefValue != "[*]" {
		t.Errorf("--controllers default %v, want [*] (serving-csr on by default)", f)
	}
}

// --node-labels: the reference's syntax and key rule, valid values, no key
// this CCM computes, and a warning for keys the framework discards;
// refused through the command, naming the flag.
func TestNodeLabels(t *testing.T) {
	cfg := &config.Config{Labels: config.Labels{Placement: []config.PlacementLabel{config.PlacementHost},
		Additional: []config.AdditionalLabel{{Category: "cost", Label: "example.com/cost-center"}}}}
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		err     string
		warning string
	}{
		{"valid, empty value", map[string]string{"node.example.com/platform": "vsphere", "example.com/pool": ""}, "", ""},
		{"key not a qualified name", map[string]string{"bad key": "x"}, `invalid key "bad key"`, ""},
		{"prefix not a DNS subdomain", map[string]string{"Example.com/x": "y"}, `invalid key "Example.com/x"`, ""},
		{"value not a label value", map[string]string{"example.com/x": "a b"}, `invalid value "a b"`, ""},
		{"computed: vcenter label", map[string]string{provider.LabelVCenter: "x"}, "sets from vSphere", ""},
		{"computed: placement", map[string]string{"vsphere.vsphere-ccm.io/host": "x"}, "sets from vSphere", ""},
		{"computed: labels.additional", map[string]string{"example.com/cost-center": "x"}, "sets from vSphere", ""},
		{"discarded by the framework", map[string]string{"node-role.kubernetes.io/worker": ""}, "", "never set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warnings, err := checkNodeLabels(tc.labels, cfg)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--node-labels")):
				t.Fatalf("error %v, want one naming --node-labels and %q", err, tc.err)
			}
			if got := strings.Join(warnings, "\n"); (tc.warning == "") != (got == "") || !strings.Contains(got, tc.warning) {
				t.Errorf("warnings %q, want %q", got, tc.warning)
			}
		})
	}
	// Through the command, with the reference's syntax: parsed into the
	// pairs, and a bad key refused before anything starts. (A PreRunE that
	// succeeds registers the metrics, once per process: not run here.)
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	must.OK(t, os.WriteFile(path, []byte("vcenter:\n  a:\n    server: vc-a.example.com\n    user: u\n    password: p\n"), 0o600))
	cmd, closeFn, err := newCCMCommand(nil, &bytes.Buffer{}, make(chan struct{}), func() {})
	must.OK(t, err)
	defer closeFn()
	must.OK(t, cmd.ParseFlags([]string{"--cloud-config=" + path, "--node-labels=node.foo.bar=vsphere,foo.bar/mapi="}))
	if got := cmd.Flags().Lookup("node-labels").Value.String(); got != "[foo.bar/mapi=,node.foo.bar=vsphere]" {
		t.Errorf("--node-labels parsed as %s", got)
	}
	bad, closeBad, err := newCCMCommand(nil, &bytes.Buffer{}, make(chan struct{}), func() {})
	must.OK(t, err)
	defer closeBad()
	must.OK(t, bad.ParseFlags([]string{"--cloud-config=" + path, "--node-labels=-bad=x"}))
	if err := bad.PreRunE(bad, nil); err == nil || !strings.Contains(err.Error(), `--node-labels: invalid key "-bad"`) {
		t.Errorf("a bad key through the command: %v", err)
	}
}
