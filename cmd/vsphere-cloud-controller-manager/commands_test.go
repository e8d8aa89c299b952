package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

func runCmd(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, env, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidateExamples(t *testing.T) {
	for _, f := range must.Glob(t, "../../config-examples/*") {
		code, out, stderr := runCmd(t, nil, "config", "validate", f)
		if code != 0 {
			t.Errorf("validate %s: exit %d\n%s", f, code, stderr)
		}
		if !strings.Contains(out, "valid") || !strings.Contains(out, "VCENTER") || !strings.Contains(out, "CREDENTIALS") {
			t.Errorf("validate %s: no summary:\n%s", f, out)
		}
	}
}

func TestValidateInvalid(t *testing.T) {
	tests := []struct {
		file string
		want []string // each must appear on stderr
	}{
		{"../../pkg/config/testdata/invalid/misspelled.yaml", []string{"misspelled.yaml:7: vcenter[\"a\"].sever: unknown key \"sever\"", "did you mean server?"}},
		{"../../pkg/config/testdata/invalid/bad-cidrs.yaml", []string{"bad-cidrs.yaml:8: nodes.internalNetworkSubnetCidr[0]"}},
		{"../../pkg/config/testdata/invalid/duplicate-servers.yaml", []string{"duplicate-servers.yaml:8: vcenter[\"b\"].server", "same server and port"}},
		{"../../pkg/config/testdata/invalid/missing-credentials.yaml", []string{"missing-credentials.yaml:2: vcenter[\"a\"]: no credentials"}},
		{"../../pkg/config/testdata/invalid/ini-keys-in-yaml.yaml", []string{"ini-keys-in-yaml.yaml:7: vcenter[\"a\"].ca-file", "ignored in YAML, as the reference CCM ignores it; rename it caFile"}},
		{"testdata/does-not-exist.yaml", []string{"read cloud-config"}},
	}
	for _, tt := range tests {
		code, out, stderr := runCmd(t, nil, "config", "validate", tt.file)
		if code != 1 {
			t.Errorf("validate %s: exit %d, want 1", tt.file, code)
		}
		if out != "" {
			t.Errorf("validate %s wrote to stdout: %s", tt.file, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("validate %s: stderr lacks %q:\n%s", tt.file, w, stderr)
			}
		}
	}
}

func TestConvertINIExample(t *testing.T) {
	code, out, stderr := runCmd(t, nil, "config", "convert", "../../config-examples/legacy.ini")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	converted, _, err := config.Parse("converted.yaml", []byte(out), config.Options{})
	if err != nil {
		t.Fatalf("converted output does not validate: %v\n%s", err, out)
	}
	want, _, err := config.Load("../../config-examples/stretched-3-vcenters.yaml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _, _, _ := config.Encode(want, config.EncodeOptions{})
	b, _, _, _ := config.Encode(converted, config.EncodeOptions{})
	if !bytes.Equal(a, b) {
		t.Errorf("convert(legacy.ini) differs from the stretched YAML example:\n%s\nvs\n%s", b, a)
	}
	if !strings.Contains(stderr, "[Workspace]") {
		t.Errorf("no warning about the ignored [Workspace] section: %s", stderr)
	}
}

// A sentinel password appears in no output of validate or convert, valid or not,
// from the file or from the environment.
func TestSentinelPasswordNeverPrinted(t *testing.T) {
	const sentinel = "Qx7v"
	env := []string{"VSPHERE_PASSWORD=Env-Qx7v-Secret", "VCENTER_1_PASSWORD=Qx7v", "VSPHERE_VCENTER_1=vc1.example.com"}
	for _, args := range [][]string{
		{"config", "validate", "testdata/sentinel.conf"},
		{"config", "convert", "testdata/sentinel.conf"},
		{"config", "validate", "testdata/sentinel-broken.yaml"},
		{"config", "convert", "testdata/sentinel-broken.yaml"},
		{"config", "validate", "-o", "json", "testdata/sentinel.conf"},
		{"config", "validate", "-o", "json", "testdata/sentinel-broken.yaml"},
	} {
		code, out, stderr := runCmd(t, env, args...)
		if strings.Contains(out+stderr, sentinel) {
			t.Errorf("%v (exit %d) printed the password:\n%s\n%s", args, code, out, stderr)
		}
	}
	code, _, stderr := runCmd(t, env, "config", "convert", "testdata/sentinel.conf")
	if code != 0 || !strings.Contains(stderr, "create Secret kube-system/vsphere-credentials with their credentials") {
		t.Errorf("convert should succeed and say where the credentials go: exit %d, %s", code, stderr)
	}
}

// TestConvertSecretOut: inline credentials go to a Secret manifest or a
// secrets directory, never to stdout; the converted config validates and,
// with them, resolves the same user for the same vCenter.
func TestConvertSecretOut(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, out string
		read      func(t *testing.T, path string) map[string][]byte
	}{
		{"manifest", filepath.Join(dir, "secret.yaml"), func(t *testing.T, path string) map[string][]byte {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var s corev1.Secret
			if err := sigsyaml.UnmarshalStrict(b, &s); err != nil {
				t.Fatal(err)
			}
			if s.Name != "ccm-creds" || s.Namespace != "infra" || s.Kind != "Secret" {
				t.Errorf("Secret %s/%s kind %q", s.Namespace, s.Name, s.Kind)
			}
			return s.Data
		}},
		{"directory", filepath.Join(dir, "creds") + "/", func(t *testing.T, path string) map[string][]byte {
			data, err := credentials.ReadDirectory(path)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, nil, "config", "convert", "--secret-out", tc.out,
				"--secret-name", "ccm-creds", "--secret-namespace", "infra", "testdata/sentinel.conf")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if strings.Contains(out+stderr, "Qx7v") {
				t.Fatalf("the password on stdout or stderr:\n%s\n%s", out, stderr)
			}
			cfg, _, err := config.Parse("converted.yaml", []byte(out), config.Options{})
			if err != nil {
				t.Fatalf("converted output does not validate: %v\n%s", err, out)
			}
			set, warnings, err := credentials.ParseData(tc.read(t, tc.out))
			if err != nil || len(warnings) > 0 {
				t.Fatalf("credentials: %v %v", err, warnings)
			}
			vc := cfg.VCenters[0]
			got, _ := set[vc.Server].(secret.Password)
			if got.Username != "administrator@vsphere.local" || got.Password.Reveal() != "Sentinel-Qx7v=Pw" {
				t.Errorf("vCenter %s: moved credentials user %q", vc.Server, got.Username)
			}
			srcs := strings.Join(vc.Credentials.Sources(), " ")
			if tc.name == "manifest" && !strings.Contains(srcs, "infra/ccm-creds") || tc.name == "directory" && !strings.Contains(srcs, "creds") {
				t.Errorf("converted config reads credentials from %s", srcs)
			}
			// Never over an existing file.
			if code, _, stderr := runCmd(t, nil, "config", "convert", "--secret-out", tc.out, "testdata/sentinel.conf"); code == 0 || !strings.Contains(stderr, "exists") {
				t.Errorf("second run: exit %d, %s", code, stderr)
			}
		})
	}
}

func TestCapVModule(t *testing.T) {
	for _, c := range []struct {
		in, want string
		changed  bool
	}{
		{"request=10", "request=7", true},
		{"round_trippers=8,node_controller=4", "round_trippers=7,node_controller=4", true},
		{"foo=3", "foo=3", false},
		{"bad,request=9", "request=7", true},
	} {
		got, changed := capVModule(c.in)
		if got != c.want || changed != c.changed {
			t.Errorf("capVModule(%q) = %q, %v; want %q, %v", c.in, got, changed, c.want, c.changed)
		}
	}
}

// config validate -o json: one report on stdout, valid or not; exit status
// 0 or 1; every problem with file, line, field and message.
func TestValidateJSON(t *testing.T) {
	tests := []struct {
		file   string
		code   int
		format string
		check  func(t *testing.T, r validationReport)
	}{
		{"../../config-examples/stretched-host-groups.yaml", 0, "YAML", func(t *testing.T, r validationReport) {
			if !r.Valid || len(r.Errors) != 0 || len(r.VCenters) != 1 || r.VCenters[0].Server != "vcenter.example.com" ||
				len(r.HostGroupZones) != 2 || r.Labels == nil || r.Labels.Zone != "k8s-zone" {
				t.Errorf("report %+v", r)
			}
			if src := r.VCenters[0].CredentialSources; len(src) != 1 || !strings.Contains(src[0], "kube-system/vsphere-credentials") {
				t.Errorf("credential sources %v", src)
			}
		}},
		{"../../config-examples/legacy.ini", 0, "INI", func(t *testing.T, r validationReport) {
			if !r.Valid || len(r.Warnings) == 0 {
				t.Errorf("report %+v, want valid with the [Workspace] warning", r)
			}
		}},
		{"../../pkg/config/testdata/invalid/bad-host-group-zones.yaml", 1, "YAML", func(t *testing.T, r validationReport) {
			if r.Valid || len(r.Errors) != 15 || len(r.VCenters) != 0 {
				t.Fatalf("valid %v, %d errors, %d vCenters; want invalid, 15 errors, no summary", r.Valid, len(r.Errors), len(r.VCenters))
			}
			e := r.Errors[0]
			if e.File != r.File || e.Line != 12 || e.Field != "hostGroupZones[0].hostGroupPattern" ||
				!strings.Contains(e.Message, "not both") || !strings.HasPrefix(e.Text, r.File+":12: ") {
				t.Errorf("first error %+v", e)
			}
		}},
		{"testdata/does-not-exist.yaml", 1, "", func(t *testing.T, r validationReport) {
			if r.Valid || len(r.Errors) != 1 || !strings.Contains(r.Errors[0].Message, "read cloud-config") {
				t.Errorf("report %+v", r)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			code, out, stderr := runCmd(t, nil, "config", "validate", "-o", "json", tt.file)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.code, stderr)
			}
			var r validationReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("stdout is not one JSON report: %v\n%s", err, out)
			}
			if r.Format != tt.format || r.File != tt.file {
				t.Errorf("format %q file %q", r.Format, r.File)
			}
			tt.check(t, r)
		})
	}
	if code, _, stderr := runCmd(t, nil, "config", "validate", "-o", "yaml", "../../config-examples/legacy.ini"); code == 0 || !strings.Contains(stderr, "use text or json") {
		t.Errorf("-o yaml: exit %d, %s", code, stderr)
	}
}

// `csr explain` is an operator command (not the controller manager) and
// checks its flags before reading anything.
func TestCSRExplainFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"csr", "explain"}, "--cloud-config is required"},
		{[]string{"csr", "explain", "--cloud-config", "x.yaml"}, "--kubeconfig is required"},
		{[]string{"csr", "explain", "--cloud-config", "x.yaml", "--kubeconfig", "k", "-o", "yaml"}, `-o "yaml"`},
	} {
		code, _, stderr := runCmd(t, nil, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 (usage) and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// The profiles are served on loopback only, and only when asked for.
func TestDebugServer(t *testing.T) {
	var stderr bytes.Buffer
	stop, err := startDebugServer(nil, &stderr)
	must.OK(t, err)
	stop()
	if stderr.Len() > 0 {
		t.Errorf("served without being asked: %s", stderr.String())
	}
	for _, addr := range []string{"0.0.0.0:0", "10.0.0.1:6060", ":6060", "example.com:6060", "6060"} {
		if _, err := startDebugServer([]string{DebugAddrEnv + "=" + addr}, &stderr); err == nil {
			t.Errorf("%s accepted", addr)
		}
	}
	stop, err = startDebugServer([]string{DebugAddrEnv + "=127.0.0.1:0"}, &stderr)
	must.OK(t, err)
	defer stop()
	if !strings.Contains(stderr.String(), "/debug/pprof/") {
		t.Errorf("no address printed: %s", stderr.String())
	}
}
