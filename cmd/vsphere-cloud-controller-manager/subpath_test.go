package main

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// TestSubPathMount: the cloud-config mounted as a file of its own (a
// subPath) is found in the mount table; one inside a mounted directory (a
// ConfigMap volume as the shipped manifests mount it) is not.
func TestSubPathMount(t *testing.T) {
	table, err := os.ReadFile("testdata/mountinfo-subpath")
	must.OK(t, err)
	fsys := fstest.MapFS{"proc/self/mountinfo": {Data: table}}
	for _, tc := range []struct{ path, want string }{
		{"/etc/kubernetes/vsphere.conf", "/var/lib/kubelet/pods/3f2c9d1e-7a44-4b8e-9c0d-51e2a6b7c8d9/volume-subpaths/cloud-config/vsphere-cloud-controller-manager/0"},
		{"/etc/kubernetes//vsphere.conf", "/var/lib/kubelet/pods/3f2c9d1e-7a44-4b8e-9c0d-51e2a6b7c8d9/volume-subpaths/cloud-config/vsphere-cloud-controller-manager/0"},
		{"/etc/my config.yaml", "/srv/configs/with space.yaml"},
		{"/etc/vsphere-ca/ca.pem", ""},  // inside a mounted directory
		{"/etc/cloud/vsphere.conf", ""}, // not mounted at all
	} {
		if got := subPathMount(fsys, tc.path); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.path, got, tc.want)
		}
	}
	if got := subPathMount(fstest.MapFS{}, "/etc/kubernetes/vsphere.conf"); got != "" {
		t.Errorf("no mount table: %q", got)
	}
}
