package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// buildCCM builds the CCM binary stamped with version, as make build does.
func buildCCM(t *testing.T, version string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "vsphere-cloud-controller-manager")
	const pkg = "k8s.io/component-base/version"
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags",
		"-s -w -X "+pkg+".gitVersion="+version+" -X "+pkg+"/verflag.programName=vsphere-cloud-controller-manager",
		"-o", bin, "../../cmd/vsphere-cloud-controller-manager")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func sha(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// untar extracts a tar stream into dir (regular files and directories).
func untar(t *testing.T, r io.Reader, dir string) []*tar.Header {
	t.Helper()
	var headers []*tar.Header
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers = append(headers, h)
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, os.FileMode(h.Mode)&0o777|0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("unexpected entry %s of type %c", h.Name, h.Typeflag)
		}
	}
}

// TestImage builds the image archive twice from the same binary and
// checks: the same bytes (reproducible); an OCI layout with the reference
// name; the config (non-root user, entrypoint the binary, labels with
// version, commit and source); the files (the binary, a CA bundle that
// parses, the passwd entry of the user, no shell); and that the binary in
// the layer runs and reports the stamped version. If podman is installed,
// it loads the archive and runs --version in a container.
func TestImage(t *testing.T) {
	const version = "v9.9.9-image-test"
	spec := Spec{Binary: buildCCM(t, version), Ref: "vsphere-cloud-controller-manager:" + version, Version: version,
		Revision: "0123456789abcdef0123456789abcdef01234567", Source: "https://example.test/vsphere-ccm",
		Created: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	var archives []string
	for i := range 2 {
		img, err := Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "image-"+string(rune('a'+i))+".oci.tar")
		if err := WriteArchive(img, spec.Ref, out, spec.Created); err != nil {
			t.Fatal(err)
		}
		archives = append(archives, out)
	}
	if sha(t, archives[0]) != sha(t, archives[1]) {
		t.Fatal("two builds from the same source differ")
	}

	f, err := os.Open(archives[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	layoutDir := filepath.Join(dir, "layout")
	untar(t, f, layoutDir)
	p, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != spec.Ref {
		t.Fatalf("index %+v, want one image named %s", im.Manifests, spec.Ref)
	}
	img, err := p.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != BinaryPath || len(c.Cmd) != 0 {
		t.Errorf("user %q entrypoint %q cmd %q", c.User, c.Entrypoint, c.Cmd)
	}
	for k, want := range map[string]string{"org.opencontainers.image.version": version, "org.opencontainers.image.revision": spec.Revision,
		"org.opencontainers.image.source": spec.Source, "org.opencontainers.image.licenses": "Apache-2.0"} {
		if c.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" || !cfg.Created.Time.Equal(spec.Created) {
		t.Errorf("platform %s/%s created %v", cfg.OS, cfg.Architecture, cfg.Created)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 on an empty base", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	root := filepath.Join(dir, "rootfs")
	headers := untar(t, rc, root)
	byName := map[string]*tar.Header{}
	for _, h := range headers {
		byName["/"+strings.TrimSuffix(h.Name, "/")] = h
		if !h.ModTime.Equal(spec.Created) {
			t.Errorf("%s has time %v, want the commit's", h.Name, h.ModTime)
		}
	}
	for _, shell := range []string{"/bin/sh", "/bin/bash", "/bin", "/usr/bin/sh"} {
		if _, ok := byName[shell]; ok {
			t.Errorf("the image has %s", shell)
		}
	}
	if h := byName[BinaryPath]; h == nil || h.Mode != 0o755 || h.Uid != 0 {
		t.Errorf("binary entry %+v, want mode 0755 owned by root", h)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), ":65532:65532:") {
		t.Errorf("/etc/passwd %q (%v), want the nonroot user 65532", passwd, err)
	}
	pemData, err := os.ReadFile(filepath.Join(root, CABundlePath))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rest := pemData; ; n++ {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("CA bundle certificate %d: %v", n, err)
		}
	}
	if n < 100 {
		t.Errorf("CA bundle has %d certificates, want the public roots (> 100)", n)
	}

	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(root, BinaryPath), "--version")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || strings.TrimSpace(out.String()) != "vsphere-cloud-controller-manager "+version {
		t.Errorf("the binary in the image says %q (%v), want vsphere-cloud-controller-manager %s", out.String(), err, version)
	}

	t.Run("podman", func(t *testing.T) {
		if _, err := exec.LookPath("podman"); err != nil {
			t.Skip("podman is not installed")
		}
		if out, err := exec.Command("podman", "load", "-i", archives[0]).CombinedOutput(); err != nil {
			t.Fatalf("podman load: %v\n%s", err, out)
		}
		ref := "localhost/" + spec.Ref
		defer exec.Command("podman", "rmi", "-f", ref).Run()
		out, err := exec.Command("podman", "image", "inspect", "--format", "{{.Config.User}} {{.Config.Entrypoint}}", ref).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "65532:65532 ["+BinaryPath+"]" {
			t.Errorf("podman image inspect: %v: %s", err, out)
		}
		out, err = exec.Command("podman", "run", "--rm", "--network=none", ref, "--version").CombinedOutput()
		if err != nil && strings.Contains(string(out), "OCI permission denied") {
			// A sandbox that forbids the runtime's setrlimit (seen in
			// containers without CAP_SYS_RESOURCE): nothing the image can fix.
			t.Skipf("podman cannot start containers here: %s", strings.TrimSpace(string(out)))
		}
		if err != nil || !strings.Contains(string(out), version) {
			t.Errorf("podman run --version: %v\n%s", err, out)
		}
	})
}
