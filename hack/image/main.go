// Command image builds the CCM's container image as an OCI image archive
// without a container daemon and without pulling a base image (make image):
//
//	go run ./hack/image -binary bin/vsphere-cloud-controller-manager -out bin/vsphere-cloud-controller-manager.oci.tar \
//	  -ref vsphere-cloud-controller-manager:v1.2.3 -version v1.2.3 -revision <commit> -created <commit time> -source <repo URL>
//
// Load it with `podman load -i FILE` or push it with
// `skopeo copy oci-archive:FILE docker://registry/...`.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var s Spec
	var out, created string
	flag.StringVar(&s.Binary, "binary", "bin/vsphere-cloud-controller-manager", "the static CCM binary (make build)")
	flag.StringVar(&out, "out", "bin/vsphere-cloud-controller-manager.oci.tar", "the OCI image archive to write")
	flag.StringVar(&s.Ref, "ref", "vsphere-cloud-controller-manager:latest", "image name and tag recorded in the archive")
	flag.StringVar(&s.Version, "version", "", "version label (hack/version.sh version)")
	flag.StringVar(&s.Revision, "revision", "", "git commit label (hack/version.sh commit)")
	flag.StringVar(&s.Source, "source", "", "source repository URL label")
	flag.StringVar(&created, "created", "1970-01-01T00:00:00Z", "timestamp of every file and of the image, RFC 3339 (hack/version.sh date)")
	flag.Parse()
	if err := run(s, out, created); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(s Spec, out, created string) error {
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return fmt.Errorf("-created %q: %w", created, err)
	}
	s.Created = t
	if s.Version == "" || s.Revision == "" {
		return fmt.Errorf("-version and -revision are required (make image sets them from git)")
	}
	img, err := Build(s)
	if err != nil {
		return err
	}
	if err := WriteArchive(img, s.Ref, out, t); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s, image %s\n", out, s.Ref, digest)
	return nil
}
