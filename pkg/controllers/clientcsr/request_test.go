package clientcsr

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// kubeletRequest is a request as a kubelet makes it at bootstrap
// (k8s.io/client-go/util/certificate/csr: CN system:node:<name>, O
// system:nodes, an ECDSA P-256 key), with edit applied to the template.
func kubeletRequest(t *testing.T, node string, edit func(*x509.CertificateRequest)) (*certificatesv1.CertificateSigningRequest, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must.OK(t, err)
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	must.OK(t, err)
	csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		SignerName: SignerName, Username: "system:bootstrap:abcdef", Groups: []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"},
		Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}}
	return csr, key
}

// TestInspect: the shape of a kubelet client request, and what Mine
// leaves to others.
func TestInspect(t *testing.T) {
	good, key := kubeletRequest(t, "worker-1", nil)
	req, err := Inspect(good)
	must.OK(t, err)
	want, err := Fingerprint(&key.PublicKey)
	must.OK(t, err)
	if req.Node != "worker-1" || req.Fingerprint != want || len(want) != 64 {
		t.Errorf("%+v, want node worker-1 and fingerprint %s", req, want)
	}
	for _, tc := range []struct {
		name string
		edit func(*x509.CertificateRequest)
		csr  func(*certificatesv1.CertificateSigningRequest)
		err  string
	}{
		{name: "not a node", edit: func(r *x509.CertificateRequest) { r.Subject.CommonName = "admin" }, err: "not system:node:<name>"},
		{name: "masters too", edit: func(r *x509.CertificateRequest) { r.Subject.Organization = []string{"system:nodes", "system:masters"} }, err: "not exactly [system:nodes]"},
		{name: "a SAN", edit: func(r *x509.CertificateRequest) { r.IPAddresses = []net.IP{net.ParseIP("10.0.0.1")} }, err: "names no DNS name"},
		{name: "server auth", csr: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
		}, err: "is not one of a kubelet client certificate"},
		{name: "no client auth", csr: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
		}, err: "lack client auth"},
		{name: "not PEM", csr: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("garbage") }, err: "not a PEM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csr, _ := kubeletRequest(t, "worker-1", tc.edit)
			if tc.csr != nil {
				tc.csr(csr)
			}
			if _, err := Inspect(csr); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v, want %q", err, tc.err)
			}
		})
	}
	renewal, _ := kubeletRequest(t, "worker-1", nil)
	renewal.Spec.Username, renewal.Spec.Groups = "system:node:worker-1", []string{"system:nodes", "system:authenticated"}
	serving, _ := kubeletRequest(t, "worker-1", nil)
	serving.Spec.SignerName = certificatesv1.KubeletServingSignerName
	admin, _ := kubeletRequest(t, "worker-1", nil)
	admin.Spec.Username, admin.Spec.Groups = "kubernetes-admin", []string{"system:masters"}
	approved, _ := kubeletRequest(t, "worker-1", nil)
	approved.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved}}
	for name, csr := range map[string]*certificatesv1.CertificateSigningRequest{"renewal": renewal, "serving": serving, "admin": admin, "approved": approved} {
		if Mine(csr) {
			t.Errorf("%s: decided here, want left to its approver", name)
		}
	}
	if !Mine(good) {
		t.Error("a bootstrap request is not decided here")
	}
}
