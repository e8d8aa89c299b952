package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Paths and identity inside the image.
const (
	BinaryPath   = "/usr/local/bin/vsphere-cloud-controller-manager"
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	UID          = 65532
	User         = "65532:65532"
)

// Spec is what the image is built from. Everything that ends up in the
// image comes from it, so the same Spec gives the same digest.
type Spec struct {
	Binary   string    // the static CCM binary
	Ref      string    // the image name:tag recorded in the archive's index
	Version  string    // org.opencontainers.image.version
	Revision string    // the git commit
	Source   string    // the repository URL
	Created  time.Time // the commit's time: every timestamp in the image
}

// Labels are the image's OCI annotations-as-labels.
func (s Spec) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "vsphere-cloud-controller-manager",
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.revision": s.Revision,
		"org.opencontainers.image.source":   s.Source,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  s.Created.UTC().Format(time.RFC3339),
	}
}

// Build returns the image: one layer on an empty base (no shell, no
// package manager) holding the binary, a CA bundle for vCenters with
// publicly signed certificates, and /etc/passwd and /etc/group entries for
// the non-root user it runs as.
func Build(s Spec) (v1.Image, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	ca, err := caBundle()
	if err != nil {
		return nil, err
	}
	files := []file{
		{path: "etc/", mode: 0o755, dir: true},
		{path: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID))},
		{path: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID))},
		{path: "etc/ssl/", mode: 0o755, dir: true},
		{path: "etc/ssl/certs/", mode: 0o755, dir: true},
		{path: CABundlePath[1:], mode: 0o644, data: ca},
		{path: "home/", mode: 0o755, dir: true},
		{path: "home/nonroot/", mode: 0o700, dir: true, uid: UID},
		{path: "tmp/", mode: 0o1777, dir: true},
		{path: "usr/", mode: 0o755, dir: true},
		{path: "usr/local/", mode: 0o755, dir: true},
		{path: "usr/local/bin/", mode: 0o755, dir: true},
		{path: BinaryPath[1:], mode: 0o755, data: bin},
	}
	layerTar, err := tarOf(files, s.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "make image (hack/image)", Comment: s.Version},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config.User = User
	cfg.Config.Entrypoint = []string{BinaryPath}
	cfg.Config.Cmd = nil
	cfg.Config.WorkingDir = "/home/nonroot"
	cfg.Config.Env = []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CABundlePath}
	cfg.Config.Labels = s.Labels()
	return mutate.ConfigFile(img, cfg)
}

// caBundle is the Mozilla root store as PEM, from the pinned
// golang.org/x/crypto/x509roots module (not the build machine's files).
// Roots with constraints that PEM cannot carry (distrust after a date) are
// left out.
func caBundle() ([]byte, error) {
	var b bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("the root bundle is empty")
	}
	return b.Bytes(), nil
}

type file struct {
	path string
	mode int64
	dir  bool
	uid  int
	data []byte
}

// tarOf writes files in path order with one timestamp and fixed owners,
// so the layer's bytes depend only on its content.
func tarOf(files []file, mtime time.Time) ([]byte, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, ModTime: mtime.UTC(), Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteArchive writes img as an OCI image archive (a tar of an OCI image
// layout, what `podman load` and `skopeo copy oci-archive:` read) with the
// reference name in the index, deterministically.
func WriteArchive(img v1.Image, ref, out string, mtime time.Time) error {
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return err
	}
	var files []file
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			files = append(files, file{path: rel + "/", mode: 0o755, dir: true})
			return nil
		}
		data, err := os.ReadFile(path)
		files = append(files, file{path: rel, mode: 0o644, data: data})
		return err
	})
	if err != nil {
		return err
	}
	archive, err := tarOf(files, mtime)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, archive, 0o644)
}
