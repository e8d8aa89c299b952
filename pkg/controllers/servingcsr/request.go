package servingcsr

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// SignerName is the signer of kubelet serving certificates.
const SignerName = certificatesv1.KubeletServingSignerName

// nodeUserPrefix and nodesGroup are how a kubelet authenticates.
const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// Decision is what happens to a request.
type Decision string

// The decisions.
const (
	// Ignore: not this controller's (another signer) or already decided.
	Ignore Decision = "ignore"
	// Deny: a definite mismatch; the reason says which.
	Deny Decision = "deny"
	// Pending: the answer cannot be told now (a vCenter down, an
	// inventory not synced); retried, never denied.
	Pending Decision = "pending"
	// Approve: every check holds.
	Approve Decision = "approve"
)

// Verdict is a decision and why, for the CSR's condition, events and
// metrics. Reason is a short CamelCase word; Message names the value.
type Verdict struct {
	Decision Decision
	Reason   string
	Message  string
}

// Request is a kubelet serving request that passed Inspect: the Node it is
// for and the names and addresses it asks for.
type Request struct {
	// Node is the requesting Node's name.
	Node     string
	DNSNames []string
	IPs      []netip.Addr
	// Created is when the request was made: vCenter's answers about its
	// addresses are read after it.
	Created time.Time
}

// signableUsages are the sets of usages the kubelet-serving signer signs
// (kube-controller-manager's csrsigning: ValidateKubeletServingCSR in
// k8s.io/kubernetes/pkg/apis/certificates): exactly one of these, as a
// set. A request approved with any other would then fail at the signer.
var signableUsages = [][]certificatesv1.KeyUsage{
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth},
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}, // non-RSA keys
}

// signable reports whether the usages, as a set, are one the signer signs.
func signable(usages []certificatesv1.KeyUsage) bool {
	set := slices.Clone(usages)
	slices.Sort(set)
	set = slices.Compact(set)
	for _, want := range signableUsages {
		w := slices.Clone(want)
		slices.Sort(w)
		if slices.Equal(set, w) {
			return true
		}
	}
	return false
}

// Inspect checks what a request can be checked for without vCenter. node
// is the Node the requester names (nil when it does not exist). It
// returns the request, or the verdict that ends it: Ignore for another
// signer, a request already approved, denied or failed, or a Node of
// another provider (left to its approver, malformed or not); Deny for a
// request no Node may get.
func Inspect(csr *certificatesv1.CertificateSigningRequest, node *v1.Node) (Request, *Verdict) {
	if v := precheck(csr, node); v != nil {
		return Request{}, v
	}
	return Parse(csr)
}

// precheck is what of Inspect depends on the request's state and its Node,
// not on its immutable spec: the verdict that ends it, or nil.
func precheck(csr *certificatesv1.CertificateSigningRequest, node *v1.Node) *Verdict {
	if csr.Spec.SignerName != SignerName {
		return &Verdict{Decision: Ignore, Reason: "OtherSigner", Message: "signer " + csr.Spec.SignerName}
	}
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return &Verdict{Decision: Ignore, Reason: "Decided", Message: "already " + string(c.Type)}
		}
	}
	if len(csr.Status.Certificate) > 0 {
		return &Verdict{Decision: Ignore, Reason: "Decided", Message: "already issued"}
	}
	if node != nil && node.Spec.ProviderID != "" && !providerid.Owned(node.Spec.ProviderID) {
		return &Verdict{Decision: Ignore, Reason: "NotThisProvider",
			Message: fmt.Sprintf("Node %s has providerID %q, not a vSphere VM's: left to its provider's approver", node.Name, node.Spec.ProviderID)}
	}
	return nil
}

// Parse reads a request's spec (immutable once created): the request, or
// the denial that ends it.
func Parse(csr *certificatesv1.CertificateSigningRequest) (Request, *Verdict) {
	deny := func(reason, format string, args ...any) (Request, *Verdict) {
		return Request{}, &Verdict{Decision: Deny, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	name, ok := strings.CutPrefix(csr.Spec.Username, nodeUserPrefix)
	if !ok || name == "" || !slices.Contains(csr.Spec.Groups, nodesGroup) {
		return deny("NotANode", "requested by %q (groups %v), not by a Node (system:node:<name> in group system:nodes)", csr.Spec.Username, csr.Spec.Groups)
	}
	if !signable(csr.Spec.Usages) {
		return deny("UsageNotAllowed", "usages %q: the kubelet-serving signer signs exactly digital signature, key encipherment and server auth, or digital signature and server auth", csr.Spec.Usages)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return deny("Malformed", "spec.request is not a PEM CERTIFICATE REQUEST")
	}
	x, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return deny("Malformed", "the request does not parse: %v", err)
	}
	if err := x.CheckSignature(); err != nil {
		return deny("Malformed", "the request's signature does not verify: %v", err)
	}
	if want := nodeUserPrefix + name; x.Subject.CommonName != want {
		return deny("SubjectMismatch", "subject CN %q, want %q (the requester)", x.Subject.CommonName, want)
	}
	if !slices.Equal(x.Subject.Organization, []string{nodesGroup}) {
		return deny("SubjectMismatch", "subject organization %q, want [%s]", x.Subject.Organization, nodesGroup)
	}
	if len(x.EmailAddresses) > 0 || len(x.URIs) > 0 {
		return deny("SANNotAllowed", "email or URI SANs (%d, %d): a kubelet serving certificate has DNS and IP SANs only", len(x.EmailAddresses), len(x.URIs))
	}
	if len(x.DNSNames) == 0 && len(x.IPAddresses) == 0 {
		return deny("NoSAN", "no DNS or IP SAN")
	}
	if n := len(x.DNSNames) + len(x.IPAddresses); n > MaxSANs {
		return deny("TooManySANs", "%d SANs: a kubelet asks for its host names and addresses, a handful; at most %d are checked", n, MaxSANs)
	}
	req := Request{Node: name, DNSNames: x.DNSNames, Created: csr.CreationTimestamp.Time}
	for _, d := range x.DNSNames {
		if err := dnsSANProblem(d); err != "" {
			return deny("SANNotAllowed", "DNS SAN %q: %s", d, err)
		}
	}
	for _, ip := range x.IPAddresses {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return deny("Malformed", "IP SAN %v", ip)
		}
		a = a.Unmap()
		if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() {
			return deny("SANNotAllowed", "IP SAN %s is not a node address", a)
		}
		req.IPs = append(req.IPs, a)
	}
	return req, nil
}

// MaxSANs bounds the SANs of a request: a kubelet asks for its host
// names and addresses (a handful); each SAN costs checks, and a vCenter
// search for each address.
const MaxSANs = 16

// dnsSANProblem says what makes d no name of a Node ("" when none): a
// wildcard, text that is not a DNS-1123 subdomain, an address written as a
// name, or localhost.
func dnsSANProblem(d string) string {
	n := strings.TrimSuffix(d, ".")
	switch {
	case strings.Contains(n, "*"):
		return "a wildcard"
	case len(validation.IsDNS1123Subdomain(strings.ToLower(n))) > 0:
		return "not a DNS name (lower-case letters, digits, '-' and '.', at most 253 characters)"
	case isAddress(n):
		return "an address written as a name"
	case strings.EqualFold(n, "localhost") || strings.HasSuffix(strings.ToLower(n), ".localhost"):
		return "localhost, never a name others reach a Node by"
	}
	return ""
}

// isAddress: an IPv4 address in any of its text forms (dotted decimal
// digits only: 10.0.0.1, 010.0.0.1).
func isAddress(n string) bool {
	if _, err := netip.ParseAddr(n); err == nil {
		return true
	}
	return strings.Trim(n, "0123456789.") == "" && strings.Count(n, ".") == 3
}

// NodeName is the Node a request is for, from its requester ("" when the
// requester is not a Node).
func NodeName(csr *certificatesv1.CertificateSigningRequest) string {
	n, _ := strings.CutPrefix(csr.Spec.Username, nodeUserPrefix)
	if n == csr.Spec.Username {
		return ""
	}
	return n
}
