package servingcsr

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// template is what a kubelet asks for (kubelet's serving certificate
// manager: CN system:node:<name>, O system:nodes, its host names and
// addresses).
func template() *x509.CertificateRequest {
	return &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "system:node:worker-1", Organization: []string{"system:nodes"}},
		DNSNames:    []string{"worker-1"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.5")},
	}
}

func csrOf(t testing.TB, tmpl *x509.CertificateRequest, mut func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	c := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: SignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth},
			Username:   "system:node:worker-1",
			Groups:     []string{"system:nodes", "system:authenticated"},
		},
	}
	if mut != nil {
		mut(c)
	}
	return c
}

// TestInspect: the checks that need no vCenter, with the shapes known
// approvers let through (the removed GCP approver, kubelet-serving-cert-
// approver and kubelet-csr-approver each accepted some of them).
func TestInspect(t *testing.T) {
	withTmpl := func(mut func(*x509.CertificateRequest)) *x509.CertificateRequest {
		tm := template()
		mut(tm)
		return tm
	}
	uri, _ := url.Parse("spiffe://cluster/ns/default")
	for _, tc := range []struct {
		name     string
		tmpl     *x509.CertificateRequest
		mut      func(*certificatesv1.CertificateSigningRequest)
		decision Decision // "" when it passes
		reason   string
		node     *v1.Node // default: worker-1, a vSphere Node
	}{
		{name: "a kubelet's request", tmpl: template()},
		{name: "another signer is not ours", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
		}, decision: Ignore, reason: "OtherSigner"},
		{name: "already approved", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved}}
		}, decision: Ignore, reason: "Decided"},
		{name: "already denied", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied}}
		}, decision: Ignore, reason: "Decided"},
		{name: "requested by a user, not a Node", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = "admin"
		}, decision: Deny, reason: "NotANode"},
		{name: "a node name without the nodes group", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Groups = []string{"system:authenticated"}
		}, decision: Deny, reason: "NotANode"},
		{name: "CN of another Node than the requester", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.Subject.CommonName = "system:node:worker-2" }),
			decision: Deny, reason: "SubjectMismatch"},
		{name: "organization system:masters", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.Subject.Organization = []string{"system:masters"} }),
			decision: Deny, reason: "SubjectMismatch"},
		{name: "an extra organization", tmpl: withTmpl(func(r *x509.CertificateRequest) {
			r.Subject.Organization = []string{"system:nodes", "system:masters"}
		}), decision: Deny, reason: "SubjectMismatch"},
		{name: "too many SANs", tmpl: withTmpl(func(r *x509.CertificateRequest) {
			for i := range MaxSANs {
				r.DNSNames = append(r.DNSNames, fmt.Sprintf("name-%d.example.com", i))
			}
		}), decision: Deny, reason: "TooManySANs"},
		{name: "a DNS SAN that is no DNS name", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.DNSNames = []string{"worker_1 .example.com"} }),
			decision: Deny, reason: "SANNotAllowed"},
		{name: "an address as a DNS SAN", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.DNSNames = []string{"10.0.0.5"} }),
			decision: Deny, reason: "SANNotAllowed"},
		{name: "localhost as a DNS SAN", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.DNSNames = []string{"localhost"} }),
			decision: Deny, reason: "SANNotAllowed"},
		{name: "a name under localhost", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.DNSNames = []string{"worker-1.localhost"} }),
			decision: Deny, reason: "SANNotAllowed"},
		{name: "client auth usage", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
		}, decision: Deny, reason: "UsageNotAllowed"},
		{name: "no server auth", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
		}, decision: Deny, reason: "UsageNotAllowed"},
		// The signer signs {digital signature, key encipherment, server
		// auth} or {digital signature, server auth}, as sets, nothing else.
		{name: "server auth alone (the signer would fail it)", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth}
		}, decision: Deny, reason: "UsageNotAllowed"},
		{name: "key encipherment without digital signature", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
		}, decision: Deny, reason: "UsageNotAllowed"},
		{name: "the non-RSA set, repeated and reordered", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth, certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
		}},
		// docs/security.md: another provider's Nodes are left to their
		// approver, even when their requests are malformed.
		{name: "another provider's Node, malformed", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = []byte("garbage")
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}
		}, node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Spec: v1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}, decision: Ignore, reason: "NotThisProvider"},
		{name: "a Node not initialized yet, malformed", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("garbage") },
			node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}, decision: Deny, reason: "Malformed"},
		{name: "a URI SAN", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.URIs = []*url.URL{uri} }), decision: Deny, reason: "SANNotAllowed"},
		{name: "an email SAN", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.EmailAddresses = []string{"a@example.com"} }), decision: Deny, reason: "SANNotAllowed"},
		{name: "no SAN", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.DNSNames, r.IPAddresses = nil, nil }), decision: Deny, reason: "NoSAN"},
		{name: "a wildcard", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.DNSNames = append(r.DNSNames, "*.example.com") }), decision: Deny, reason: "SANNotAllowed"},
		{name: "loopback", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.IPAddresses = append(r.IPAddresses, net.ParseIP("127.0.0.1")) }), decision: Deny, reason: "SANNotAllowed"},
		{name: "link-local", tmpl: withTmpl(func(r *x509.CertificateRequest) { r.IPAddresses = append(r.IPAddresses, net.ParseIP("169.254.1.1")) }), decision: Deny, reason: "SANNotAllowed"},
		{name: "not PEM", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("garbage") },
			decision: Deny, reason: "Malformed"},
		{name: "a signature that does not verify", tmpl: template(), mut: func(c *certificatesv1.CertificateSigningRequest) {
			b, _ := pem.Decode(c.Spec.Request)
			b.Bytes[len(b.Bytes)-3] ^= 0xff
			c.Spec.Request = pem.EncodeToMemory(b)
		}, decision: Deny, reason: "Malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node
			if node == nil {
				node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-000000000001"}}
			}
			req, v := Inspect(csrOf(t, tc.tmpl, tc.mut), node)
			if tc.decision == "" {
				if v != nil {
					t.Fatalf("verdict %+v, want it to pass", v)
				}
				if req.Node != "worker-1" || !slices.Equal(req.DNSNames, []string{"worker-1"}) || !slices.Equal(req.IPs, []netip.Addr{netip.MustParseAddr("10.0.0.5")}) {
					t.Fatalf("request %+v", req)
				}
				return
			}
			if v == nil || v.Decision != tc.decision || v.Reason != tc.reason || v.Message == "" {
				t.Fatalf("verdict %+v, want %s %s", v, tc.decision, tc.reason)
			}
		})
	}
}

// FuzzInspect: any request bytes are inspected without a panic, and a
// request that passes is for its requester with at least one SAN.
func FuzzInspect(f *testing.F) {
	f.Add(csrOf(f, template(), nil).Spec.Request)
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n"))
	f.Fuzz(func(t *testing.T, request []byte) {
		c := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request, SignerName: SignerName, Username: "system:node:worker-1", Groups: []string{"system:nodes"},
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}}}
		req, v := Inspect(c, nil)
		if v == nil && (req.Node != "worker-1" || len(req.DNSNames)+len(req.IPs) == 0) {
			t.Fatalf("passed: %+v", req)
		}
	})
}
