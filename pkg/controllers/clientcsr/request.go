// Package clientcsr is the kubelet-client-csr controller (nodes.identity):
// it approves a kubelet's first client certificate request, made with a
// bootstrap token, only when vCenter's records bind the request's public
// key and its Node name to one VM, and denies it otherwise. A bootstrap
// token alone then makes its holder no Node.
//
// The binding: the guest publishes the SHA-256 fingerprint of the
// kubelet's pending client key in its own guestinfo (no other VM can write
// a VM's guestinfo), and vCenter names the VM like the Node. Renewals (by
// system:node: users, with the Node's current certificate) and other
// signers are left to their approvers.
package clientcsr

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// SignerName is the signer of kubelet client certificates.
const SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName

// The requester of a bootstrap request: the bootstrap token's user, in the
// group every bootstrap token is in.
const (
	bootstrapUserPrefix = "system:bootstrap:"
	bootstrappersGroup  = "system:bootstrappers"
	nodeUserPrefix      = "system:node:"
	nodesGroup          = "system:nodes"
)

// Request is a kubelet client certificate request, read once.
type Request struct {
	// Node is the Node name the certificate would be for (its CN after
	// system:node:).
	Node string
	// Fingerprint is the SHA-256 of the public key's DER
	// SubjectPublicKeyInfo, lower-case hex: what the guest publishes.
	Fingerprint string
	// Requester is the user that made the request.
	Requester string
}

// Fingerprint is the fingerprint of a public key as the guest publishes
// it: SHA-256 of its DER SubjectPublicKeyInfo, lower-case hex.
func Fingerprint(pub any) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:]), nil
}

// Mine tells whether this controller decides csr: a pending request for
// the kubelet client signer from a bootstrap token. Renewals
// (system:node: users) and other requesters are left to their approvers.
func Mine(csr *certificatesv1.CertificateSigningRequest) bool {
	if csr.Spec.SignerName != SignerName || decided(csr) {
		return false
	}
	return strings.HasPrefix(csr.Spec.Username, bootstrapUserPrefix) && slices.Contains(csr.Spec.Groups, bootstrappersGroup)
}

// decided: approved or denied already (by anyone).
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return true
		}
	}
	return false
}

// Inspect reads a request of Mine: a kubelet client request has the shape
// kube-controller-manager's signer and approver require (CN
// system:node:<name>, O system:nodes only, no names or addresses, client
// auth usages), a valid signature, and a key whose fingerprint can be
// published. The error says what is wrong: such a request is denied.
func Inspect(csr *certificatesv1.CertificateSigningRequest) (Request, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return Request{}, fmt.Errorf("spec.request is not a PEM CERTIFICATE REQUEST")
	}
	cr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return Request{}, fmt.Errorf("spec.request does not parse: %w", err)
	}
	if err := cr.CheckSignature(); err != nil {
		return Request{}, fmt.Errorf("spec.request is not signed by its key: %w", err)
	}
	name, ok := strings.CutPrefix(cr.Subject.CommonName, nodeUserPrefix)
	if !ok || name == "" {
		return Request{}, fmt.Errorf("the subject's common name %q is not system:node:<name>", cr.Subject.CommonName)
	}
	if !slices.Equal(cr.Subject.Organization, []string{nodesGroup}) {
		return Request{}, fmt.Errorf("the subject's organizations %q are not exactly [system:nodes]", cr.Subject.Organization)
	}
	if len(cr.DNSNames)+len(cr.IPAddresses)+len(cr.EmailAddresses)+len(cr.URIs) > 0 {
		return Request{}, fmt.Errorf("a kubelet client certificate names no DNS name, address, e-mail or URI")
	}
	client := false
	for _, u := range csr.Spec.Usages {
		switch u {
		case certificatesv1.UsageClientAuth:
			client = true
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		default:
			return Request{}, fmt.Errorf("usage %q is not one of a kubelet client certificate", u)
		}
	}
	if !client {
		return Request{}, fmt.Errorf("usages %q lack client auth", csr.Spec.Usages)
	}
	fp, err := Fingerprint(cr.PublicKey)
	if err != nil {
		return Request{}, err
	}
	return Request{Node: name, Fingerprint: fp, Requester: csr.Spec.Username}, nil
}
