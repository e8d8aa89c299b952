package vcenter

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/vmware/govmomi/vim25/soap"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// newTLSConfig returns the TLS settings for vc. Verification is done by
// verifyPeer (system roots or caFile, or a pinned thumbprint) so that a
// failure can name the presented certificate; only insecureFlag turns it off.
func newTLSConfig(vc config.VCenter) (*tls.Config, error) {
	cfg := tlsConfig(vc)
	if vc.InsecureFlag {
		return cfg, nil
	}
	var roots *x509.CertPool // nil: the system roots
	if vc.CAFile != "" {
		pem, err := os.ReadFile(vc.CAFile)
		if err != nil {
			return nil, fmt.Errorf("vcenter %q: caFile: %w", vc.Name, err)
		}
		if roots, err = ParseCABundle(pem); err != nil {
			return nil, fmt.Errorf("vcenter %q: caFile %s: %w", vc.Name, vc.CAFile, err)
		}
	}
	want := normalizeThumbprint(vc.Thumbprint)
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		return verifyPeer(vc, roots, want, cs)
	}
	return cfg, nil
}

// tlsConfig is the TLS settings for vc before verification is set.
func tlsConfig(vc config.VCenter) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is not skipped: VerifyConnection does it, with an
		// error that names the certificate. Go's own check cannot do that.
		InsecureSkipVerify: true, //nolint:gosec // see above
	}
	if net.ParseIP(vc.Server) == nil {
		cfg.ServerName = vc.Server
	}
	return cfg
}

func normalizeThumbprint(s string) string {
	return strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
}

func verifyPeer(vc config.VCenter, roots *x509.CertPool, thumbprint string, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("vCenter %q (%s): no certificate presented", vc.Name, vc.Address())
	}
	leaf := cs.PeerCertificates[0]
	fail := func(reason string) error {
		return &CertificateError{VCenter: vc.Name, Address: vc.Address(), Fingerprint: soap.ThumbprintSHA256(leaf),
			Subject: leaf.Subject.String(), Issuer: leaf.Issuer.String(), Reason: reason}
	}
	if thumbprint != "" {
		if thumbprint == soap.ThumbprintSHA256(leaf) || thumbprint == soap.ThumbprintSHA1(leaf) {
			return nil
		}
		return fail("its thumbprint does not match the configured thumbprint " + thumbprint)
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: vc.Server}); err != nil {
		return fail(err.Error())
	}
	return nil
}

// dialer opens TLS connections bounded by the request's context (govmomi's
// own dialer ignores it, so a black-holed vCenter would hang for minutes).
type dialer struct {
	tls     *tls.Config
	timeout time.Duration
}

func (d dialer) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	td := &tls.Dialer{NetDialer: &net.Dialer{Timeout: d.timeout, KeepAlive: 30 * time.Second}, Config: d.tls}
	return td.DialContext(ctx, network, addr)
}
