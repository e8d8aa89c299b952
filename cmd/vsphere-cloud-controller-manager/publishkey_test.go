package main

import (
	"bytes"
	"context"
	"crypto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/util/keyutil"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/clientcsr"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// fakeRPCTool is a vmware-rpctool that records its argument in log, and
// fails when fail exists.
func fakeRPCTool(t *testing.T) (tool, log, fail string) {
	t.Helper()
	dir := t.TempDir()
	tool, log, fail = filepath.Join(dir, "vmware-rpctool"), filepath.Join(dir, "args"), filepath.Join(dir, "fail")
	must.OK(t, os.WriteFile(tool, []byte("#!/bin/sh\nif [ -e "+fail+" ]; then echo 'Failed sending message to VMware.' >&2; exit 1; fi\nprintf '%s\\n' \"$1\" >> "+log+"\n"), 0o755))
	return tool, log, fail
}

// TestPublishKey: the key is made where the kubelet's bootstrap loads it,
// kept across runs, and its fingerprint (the one the controller computes
// from a request made with it) published with VMware Tools.
func TestPublishKey(t *testing.T) {
	tool, log, fail := fakeRPCTool(t)
	keyPath := filepath.Join(t.TempDir(), "pki", "kubelet-client.key.tmp")
	publish := func() (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"node", "publish-key", "--key", keyPath, "--rpctool", tool}, nil, &stdout, &stderr)
		return code, strings.TrimSpace(stdout.String()), stderr.String()
	}
	code, fp, stderr := publish()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	st, err := os.Stat(keyPath)
	must.OK(t, err)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", st.Mode().Perm())
	}
	pemKey, err := os.ReadFile(keyPath)
	must.OK(t, err)
	key, err := keyutil.ParsePrivateKeyPEM(pemKey)
	must.OK(t, err)
	want, err := clientcsr.Fingerprint(key.(crypto.Signer).Public())
	must.OK(t, err)
	if fp != want {
		t.Errorf("printed %s, the key's fingerprint is %s", fp, want)
	}
	if code, again, _ := publish(); code != 0 || again != fp {
		t.Errorf("second run: exit %d, %s; want the same key", code, again)
	}
	args, err := os.ReadFile(log)
	must.OK(t, err)
	line := "info-set guestinfo.vsphere-ccm.kubelet-client-key " + fp
	if string(args) != line+"\n"+line+"\n" {
		t.Errorf("rpctool called with %q, want %q twice", args, line)
	}
	must.OK(t, os.WriteFile(fail, nil, 0o600))
	if code, _, stderr := publish(); code == 0 || !strings.Contains(stderr, "Failed sending message to VMware") {
		t.Errorf("a failing rpctool: exit %d, %s", code, stderr)
	}
}

// TestPublishKeyOneLiner: the shell steps docs/security.md gives for a
// guest without this binary (openssl, sha256sum) make a key the kubelet
// loads and the fingerprint the controller computes.
func TestPublishKeyOneLiner(t *testing.T) {
	for _, tool := range []string{"sh", "openssl", "sha256sum", "cut"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "kubelet-client.key.tmp")
	script := `K=` + key + `
[ -s "$K" ] || (umask 077; openssl ecparam -name prime256v1 -genkey -noout -out "$K")
openssl pkey -in "$K" -pubout -outform DER | sha256sum | cut -d' ' -f1`
	out, err := exec.Command("sh", "-c", script).Output()
	must.OK(t, err)
	pemKey, err := os.ReadFile(key)
	must.OK(t, err)
	parsed, err := keyutil.ParsePrivateKeyPEM(pemKey) // as the kubelet's bootstrap loads it
	must.OK(t, err)
	want, err := clientcsr.Fingerprint(parsed.(crypto.Signer).Public())
	must.OK(t, err)
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("the one-liner publishes %s, the controller computes %s", got, want)
	}
}
