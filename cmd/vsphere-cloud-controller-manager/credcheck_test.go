package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

func pemFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "pkg", "secret", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeSecret writes a Secret manifest as kubectl prints it (data in base64).
func writeSecret(t *testing.T, dir, name string, data map[string]string) string {
	t.Helper()
	s := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Data: map[string][]byte{}}
	s.APIVersion, s.Kind = "v1", "Secret"
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	b, err := sigsyaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestValidateCredentialModes: `config validate --secret` names each
// vCenter's mode and source, and fails on credentials the CCM could not
// use (an expired certificate, a private key given as a password), before
// any request and without printing them.
func TestValidateCredentialModes(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "vsphere.yaml")
	if err := os.WriteFile(cfgPath, []byte(`global:
  secretName: creds
  secretNamespace: kube-system
vcenter:
  cert:
    server: vc-cert.example.com
  shared:
    server: vc-shared.example.com
  password:
    server: vc-password.example.com
  not-given:
    server: vc-other.example.com
    secretName: other
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := pemFile(t, "solution-user.crt"), pemFile(t, "solution-user.key")
	good := writeSecret(t, dir, "creds", map[string]string{
		"vc-cert.example.com.username":                   cert,
		"vc-cert.example.com.password":                   key,
		"vc-shared.example.com.vc-session-manager-url":   "https://sm.example.com/session",
		"vc-shared.example.com.vc-session-manager-token": "bearer-S3ntinel",
		"vc-password.example.com.username":               "administrator@vsphere.local",
		"vc-password.example.com.password":               "pa55-S3ntinel",
	})
	code, out, stderr := runCmd(t, nil, "config", "validate", "--secret", good, cfgPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"certificate: certificate CN=k8s-ccm-solution-user,OU=solution users, from Secret kube-system/creds",
		"sharedSession: session manager https://sm.example.com/session, from Secret kube-system/creds",
		"password: administrator@vsphere.local, from Secret kube-system/creds",
		"unknown here: Secret kube-system/other not given (--secret FILE)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}

	// JSON: the same, per vCenter.
	code, out, _ = runCmd(t, nil, "config", "validate", "-o", "json", "--secret", good, cfgPath)
	var r validationReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	modes := map[string]secret.Mode{}
	for _, vc := range r.VCenters {
		modes[vc.Name] = vc.Credentials.Mode
	}
	if modes["cert"] != secret.ModeCertificate || modes["shared"] != secret.ModeSharedSession || modes["password"] != secret.ModePassword || modes["not-given"] != "" {
		t.Errorf("modes %v", modes)
	}

	// Unusable: an expired certificate, a key as the password of a user.
	bad := writeSecret(t, dir, "creds", map[string]string{
		"vc-cert.example.com.username":     pemFile(t, "expired.crt"),
		"vc-cert.example.com.password":     pemFile(t, "expired.key"),
		"vc-password.example.com.username": "administrator@vsphere.local",
		"vc-password.example.com.password": key,
	})
	for _, format := range []string{"text", "json"} {
		code, out, stderr = runCmd(t, nil, "config", "validate", "-o", format, "--secret", bad, cfgPath)
		text := out + stderr
		if code != 1 || !strings.Contains(text, "expired at 2021-01-01T00:00:00Z") || !strings.Contains(text, "a PEM private key is given as a password") {
			t.Errorf("%s: exit %d, want 1 naming the expired certificate and the key given as a password:\n%s", format, code, text)
		}
		for _, l := range strings.Split(key, "\n")[1:4] {
			if strings.Contains(text, l) {
				t.Fatalf("%s: the output reveals the private key", format)
			}
		}
	}
}

// TestConvertCredentialModes: `config convert` moves inline credentials of
// every mode to the Secret, in the keys the reference reads; the converted
// config and Secret give back the same credentials.
func TestConvertCredentialModes(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "secret.yaml")
	code, converted, stderr := runCmd(t, nil, "config", "convert", "--secret-out", out, "../../pkg/config/testdata/valid/credential-modes.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(converted+stderr, "PRIVATE KEY") || strings.Contains(converted+stderr, "bearer-token") {
		t.Fatalf("a key or token in the converted config or the notes:\n%s\n%s", converted, stderr)
	}
	orig, _, err := config.Load("../../pkg/config/testdata/valid/credential-modes.yaml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Parse("converted.yaml", []byte(converted), config.Options{})
	if err != nil {
		t.Fatalf("converted config: %v\n%s", err, converted)
	}
	secrets, err := readSecretManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	set, warnings, err := credentials.ParseData(secrets[0].Data)
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "travel in clear") {
		t.Fatalf("Secret: %v, warnings %v; want the plain http session manager's warning only", err, warnings)
	}
	src := credentials.Sources{Secrets: map[config.SecretRef]credentials.Set{{Namespace: secrets[0].Namespace, Name: secrets[0].Name}: set}}
	for _, vc := range cfg.VCenters {
		got, source, err := credentials.Resolve(vc, src)
		o, _ := orig.VCenter(vc.Name)
		want, _, _ := credentials.Resolve(o, credentials.Sources{})
		wantSource := "Secret "
		if s, ok := want.(secret.SharedSession); ok && !s.Token.IsSet() {
			wantSource = "inline config" // no token: stays in the config, where the token file may follow it
		}
		if err != nil || !strings.HasPrefix(source, wantSource) || got.Mode() != want.Mode() || got.Identity() != want.Identity() {
			t.Errorf("%s: %v from %q (%v), want %v %q from %s", vc.Name, got, source, err, want.Mode(), want.Identity(), wantSource)
		}
		if s, ok := want.(secret.SharedSession); ok {
			g, _ := got.(secret.SharedSession)
			if !g.Token.Equal(s.Token) || g.TokenFile != s.TokenFile {
				t.Errorf("%s: token or token file not kept (%q, %q)", vc.Name, g.TokenFile, s.TokenFile)
			}
		}
	}
}
