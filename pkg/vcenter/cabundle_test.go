package vcenter_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// otherCA is a PEM CA certificate that signed nothing the fleet presents.
func otherCA(t *testing.T) []byte {
	t.Helper()
	b, err := vcsim.OtherCA()
	must.OK(t, err)
	return b
}

// TestParseCABundle: what a caFile may hold.
func TestParseCABundle(t *testing.T) {
	f := startFleet(t)
	good, err := os.ReadFile(f.CAFile)
	must.OK(t, err)
	for _, tc := range []struct {
		name, bundle, err string
	}{
		{"the fleet's CA", string(good), ""},
		{"with comments, as distributions ship bundles", "# Subject: the fleet's CA\n" + string(good) + "\n# end\n" + string(otherCA(t)), ""},
		{"cut short while written", string(good[:len(good)/2]), "ends inside a PEM block"},
		{"the second certificate cut short", string(good) + string(otherCA(t))[:100], "ends inside a PEM block"},
		{"garbage", "not a certificate at all\n", "no PEM certificate found"},
		{"empty", "", "no PEM certificate found"},
		{"a key only", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "no PEM certificate found"},
		{"a CERTIFICATE block that is not one", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "certificate 1 does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vcenter.ParseCABundle([]byte(tc.bundle))
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got %v, want %q", err, tc.err)
			}
		})
	}
}

// TestCheckCABundle: a new bundle against the certificate the simulated
// vCenter presents: the one that signed it passes, another CA is refused
// with the presented certificate named, a vCenter that does not answer
// leaves the bundle to its parse, and with a thumbprint the bundle is not
// what verifies it.
func TestCheckCABundle(t *testing.T) {
	f := startFleet(t)
	good, err := os.ReadFile(f.CAFile)
	must.OK(t, err)
	cfg := parseConfig(t, f, nil, nil)
	vc := cfg.VCenters[0]
	ctx := context.Background()
	if err := vcenter.CheckCABundle(ctx, vc, good, 5*time.Second); err != nil {
		t.Errorf("the fleet's CA: %v", err)
	}
	err = vcenter.CheckCABundle(ctx, vc, otherCA(t), 5*time.Second)
	var ce *vcenter.CertificateError
	if !errors.As(err, &ce) || ce.VCenter != vc.Name || ce.Fingerprint == "" {
		t.Errorf("another CA: %v, want a CertificateError naming the presented certificate", err)
	}
	if err := vcenter.CheckCABundle(ctx, vc, []byte("garbage"), 5*time.Second); err == nil {
		t.Error("garbage accepted")
	}
	pinned := vc
	pinned.Thumbprint = "AA:BB"
	if err := vcenter.CheckCABundle(ctx, pinned, otherCA(t), 5*time.Second); err != nil {
		t.Errorf("with a thumbprint, the bundle is parsed only: %v", err)
	}
	// Nobody listens there any more: the bundle is accepted on its parse.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.OK(t, err)
	addr := l.Addr().(*net.TCPAddr)
	must.OK(t, l.Close())
	gone := vc
	gone.Server, gone.Port = "127.0.0.1", addr.Port
	if err := vcenter.CheckCABundle(ctx, gone, otherCA(t), 5*time.Second); err != nil {
		t.Errorf("an unreachable vCenter: %v, want the bundle accepted on its parse", err)
	}
}
