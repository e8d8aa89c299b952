package vcenter

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// ParseCABundle reads a CA bundle as caFile holds it: PEM certificates,
// with any text between them (bundles carry comments). It refuses a bundle
// with no certificate, a CERTIFICATE block that does not parse, and one
// that ends inside a block (a file read while being written).
func ParseCABundle(bundle []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	rest := bundle
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if bytes.Contains(rest, []byte("-----BEGIN")) {
		return nil, errors.New("the file ends inside a PEM block (cut short, or written while read): no END line")
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return pool, nil
}

// CheckCABundle checks a CA bundle for vc before it is used: it must parse
// (ParseCABundle) and, where the vCenter answers within timeout, verify the
// certificate the vCenter presents now (a *CertificateError otherwise). A
// vCenter that cannot be reached is not a reason to refuse: the bundle is
// accepted on its parse alone, and that is logged. With a thumbprint or
// insecureFlag the bundle is not what verifies the vCenter: parsed only.
func CheckCABundle(ctx context.Context, vc config.VCenter, bundle []byte, timeout time.Duration) error {
	roots, err := ParseCABundle(bundle)
	if err != nil {
		return err
	}
	if vc.InsecureFlag || vc.Thumbprint != "" {
		return nil
	}
	cfg := tlsConfig(vc)
	cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyPeer(vc, roots, "", cs) }
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dialer{tls: cfg, timeout: timeout}.DialTLSContext(ctx, "tcp", vc.Address())
	if err == nil {
		_ = conn.Close()
		return nil
	}
	if ce := (*CertificateError)(nil); errors.As(err, &ce) {
		return ce
	}
	klog.FromContext(ctx).Info("The new CA bundle parses; it was not checked against the vCenter, which did not answer", "vcenter", vc.Name, "err", err)
	return nil
}
