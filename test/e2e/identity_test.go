//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/clientcsr"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// The bootstrap token of the test, as kubeadm makes one.
const (
	tokenID     = "abcdef"
	tokenSecret = "0123456789abcdef"
)

// bootstrap creates what kubeadm init leaves for joining Nodes: a
// bootstrap token (a kube-system Secret) in kubeadm's extra group, and the
// binding that lets its holders create certificate requests
// (kubeadm:kubelet-bootstrap). Not kubeadm's auto-approval
// (kubeadm:node-autoapprove-bootstrap): the signer in these tests runs no
// approver. It returns a client that authenticates with the token, as a
// kubelet's bootstrap kubeconfig does.
func (h *harness) bootstrap(t *testing.T) kubernetes.Interface {
	t.Helper()
	_, err := h.kube.CoreV1().Secrets("kube-system").Create(h.ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + tokenID},
		Type:       "bootstrap.kubernetes.io/token",
		StringData: map[string]string{"token-id": tokenID, "token-secret": tokenSecret,
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
			"auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token"},
	}, metav1.CreateOptions{})
	must.OK(t, err)
	_, err = h.kube.RbacV1().ClusterRoleBindings().Create(h.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:kubelet-bootstrap"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:bootstrappers:kubeadm:default-node-token"}},
	}, metav1.CreateOptions{})
	must.OK(t, err)
	cfg := rest.AnonymousClientConfig(h.cp.Config)
	cfg.BearerToken = tokenID + "." + tokenSecret
	kube, err := kubernetes.NewForConfig(cfg)
	must.OK(t, err)
	return kube
}

// kubeletKey is a kubelet's pending client key, and its fingerprint as
// the guest step publishes it.
func kubeletKey(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must.OK(t, err)
	fp, err := clientcsr.Fingerprint(&key.PublicKey)
	must.OK(t, err)
	return key, fp
}

// publish does the guest step on vm: its fingerprint in its guestinfo.
func (h *harness) publish(t *testing.T, vm vcsim.VM, fp string) {
	t.Helper()
	must.OK(t, h.fleet.VCenter(vm.VCenter).PublishGuestInfo(h.ctx, vm.Ref, config.DefaultKeyFingerprintKey, fp))
}

// requestClientCert makes a kubelet's bootstrap request (the kubelet's
// LoadClientCert: client-go's certificate/csr, CN system:node:<node>, O
// system:nodes, its usages) with the bootstrap client, and returns its
// name.
func requestClientCert(t *testing.T, ctx context.Context, boot kubernetes.Interface, key *ecdsa.PrivateKey, node string) string {
	t.Helper()
	pemReq, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, nil, nil)
	must.OK(t, err)
	name, _, err := csr.RequestCertificateWithContext(ctx, boot, pemReq, "", certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}, key)
	must.OK(t, err)
	return name
}

// clientVerdict waits for a request's approval (and the signer's
// certificate) or denial, and returns the condition.
func (h *harness) clientVerdict(t *testing.T, name string) (certificatesv1.CertificateSigningRequestCondition, []byte) {
	t.Helper()
	var cond certificatesv1.CertificateSigningRequestCondition
	var cert []byte
	poll.NoError(t, "request "+name+" decided", 90*time.Second, func() error {
		r, err := h.kube.CertificatesV1().CertificateSigningRequests().Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range r.Status.Conditions {
			switch {
			case c.Type == certificatesv1.CertificateDenied:
				cond = c
				return nil
			case c.Type == certificatesv1.CertificateApproved && len(r.Status.Certificate) > 0:
				cond, cert = c, r.Status.Certificate
				return nil
			}
		}
		return fmt.Errorf("conditions %v", r.Status.Conditions)
	})
	return cond, cert
}

// TestKubeletIdentity: nodes.identity on, with the real bootstrap flow (a
// bootstrap token, the kubelet's own request code, kube-apiserver's
// bootstrap authenticator and kube-controller-manager's signer) and the
// RBAC of deploy/node-identity. A truthful VM's kubelet gets its
// certificate, issued for its Node name, and its Node initializes; a token
// holder in no VM, a VM asking for another VM's name, and a key two VMs
// publish are denied, with the reason on the request and the metric; a
// Node reporting another VM's machine is not initialized, and kept.
func TestKubeletIdentity(t *testing.T) {
	t.Parallel()
	h, boot, ccm := startIdentity(t, "")
	vms := h.fleet.VMs()

	// A truthful VM: its guest published its kubelet's key.
	key, fp := kubeletKey(t)
	h.publish(t, vms[0], fp)
	name := requestClientCert(t, h.ctx, boot, key, vms[0].Name)
	cond, pemCert := h.clientVerdict(t, name)
	if cond.Type != certificatesv1.CertificateApproved || cond.Reason != clientcsr.ReasonBound {
		t.Fatalf("a truthful VM's request: %s %s: %s", cond.Type, cond.Reason, cond.Message)
	}
	certs, err := certutil.ParseCertsPEM(pemCert)
	must.OK(t, err)
	if cn := certs[0].Subject.CommonName; cn != "system:node:"+vms[0].Name {
		t.Errorf("issued for %q", cn)
	}
	must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, vms[0].Name, strings.ToUpper(vms[0].UUID)))
	h.waitInitialized(t, vms[0])

	// Denied: the reason on the request, a Warning event, the metric.
	h.expectDenied(t, boot, ccm, []deniedCase{
		{"a token holder in no VM", func() (*ecdsa.PrivateKey, string) {
			k, _ := kubeletKey(t)
			return k, vms[1].Name
		}, clientcsr.ReasonNoVM},
		{"a VM asking for another VM's name", func() (*ecdsa.PrivateKey, string) {
			k, f := kubeletKey(t)
			h.publish(t, vms[2], f)
			return k, vms[3].Name
		}, clientcsr.ReasonNameMismatch},
		{"one key published by two VMs", func() (*ecdsa.PrivateKey, string) {
			k, f := kubeletKey(t)
			h.publish(t, vms[4], f)
			h.publish(t, vms[5], f)
			return k, vms[4].Name
		}, clientcsr.ReasonSeveralVMs},
	})

	// A Node that reports another VM's machine: not initialized, kept.
	impostor := vms[6].Name
	must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, impostor, strings.ToUpper(vms[0].UUID)))
	h.waitEvent(t, impostor, "NodeIdentityMismatch", vms[0].Name)
	n, err := h.node(impostor)
	must.OK(t, err)
	if n.Spec.ProviderID != "" {
		t.Errorf("Node %s initialized as %s", impostor, n.Spec.ProviderID)
	}
	if v := ccm.Gauge("vsphere_ccm_node_identity_mismatches_total"); v < 1 {
		t.Errorf("vsphere_ccm_node_identity_mismatches_total %v", v)
	}
}

// TestKubeletIdentityByNameKey: with nodes.identity.nodeNameKey the Node
// name a VM may be is what its provisioner set in that extraConfig key,
// not the VM's name: a VM named otherwise is approved for the Node its key
// names, initialized as it, and given its serving certificate (serving
// approval on: the binding, not the VM's or guest's name, proves the Node's
// name); a VM asking for its own VM name against
// its key, and one whose provisioner set no name, are denied; a Node
// reporting a VM bound to another name is not initialized.
func TestKubeletIdentityByNameKey(t *testing.T) {
	t.Parallel()
	const nameKey = "k8s.node-name"
	h, boot, ccm := startIdentity(t, "    nodeNameKey: "+nameKey+"\n  servingCertificates:\n    approve: true\n")
	vms := h.fleet.VMs()
	bind := func(vm vcsim.VM, node string) {
		t.Helper()
		must.OK(t, h.fleet.VCenter(vm.VCenter).PublishGuestInfo(h.ctx, vm.Ref, nameKey, node))
	}

	// The provisioner named vms[0]'s Node "worker-a"; its VM name is not.
	bind(vms[0], "worker-a")
	key, fp := kubeletKey(t)
	h.publish(t, vms[0], fp)
	name := requestClientCert(t, h.ctx, boot, key, "worker-a")
	cond, _ := h.clientVerdict(t, name)
	if cond.Type != certificatesv1.CertificateApproved || cond.Reason != clientcsr.ReasonBound || !strings.Contains(cond.Message, nameKey) {
		t.Fatalf("the bound name's request: %s %s: %s", cond.Type, cond.Reason, cond.Message)
	}
	must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, "worker-a", strings.ToUpper(vms[0].UUID)))
	asNode := vms[0]
	asNode.Name = "worker-a"
	h.waitInitialized(t, asNode)
	// Its serving certificate: neither its VM's name nor its guest host
	// name is the Node's; the provisioner's binding is.
	serving := h.ownRequest(t, asNode)
	h.approvedWithSANs(t, h.request(t, serving), serving)

	h.expectDenied(t, boot, ccm, []deniedCase{
		{"the VM's own name against its key", func() (*ecdsa.PrivateKey, string) {
			bind(vms[1], "worker-b")
			k, f := kubeletKey(t)
			h.publish(t, vms[1], f)
			return k, vms[1].Name
		}, clientcsr.ReasonNameMismatch},
		{"no Node name set", func() (*ecdsa.PrivateKey, string) {
			k, f := kubeletKey(t)
			h.publish(t, vms[2], f)
			return k, vms[2].Name
		}, clientcsr.ReasonNoNodeName},
	})

	// A Node named like vms[3] reporting it, though its key names another.
	bind(vms[3], "worker-d")
	impostor := vms[3].Name
	must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, impostor, strings.ToUpper(vms[3].UUID)))
	h.waitEvent(t, impostor, "NodeIdentityMismatch", nameKey)
	n, err := h.node(impostor)
	must.OK(t, err)
	if n.Spec.ProviderID != "" {
		t.Errorf("Node %s initialized as %s", impostor, n.Spec.ProviderID)
	}
}

// deniedCase is a bootstrap request that must be denied for reason:
// setup returns its key and the Node name it asks for.
type deniedCase struct {
	name   string
	setup  func() (*ecdsa.PrivateKey, string)
	reason string
}

// expectDenied makes each case's request and checks its denial: the
// reason on the request, no certificate, a Warning event, the metric.
func (h *harness) expectDenied(t *testing.T, boot kubernetes.Interface, ccm *ccm, cases []deniedCase) {
	t.Helper()
	for _, tc := range cases {
		k, node := tc.setup()
		name := requestClientCert(t, h.ctx, boot, k, node)
		cond, cert := h.clientVerdict(t, name)
		if cond.Type != certificatesv1.CertificateDenied || cond.Reason != tc.reason || len(cert) != 0 {
			t.Errorf("%s: %s %s (%s), want denied %s", tc.name, cond.Type, cond.Reason, cond.Message, tc.reason)
			continue
		}
		h.waitEvent(t, name, tc.reason)
		series := `vsphere_ccm_client_csr_decisions_total{decision="deny",reason="` + tc.reason + `"}`
		if v := ccm.Gauge(series); v != 1 {
			t.Errorf("%s: %s %v, want 1", tc.name, series, v)
		}
	}
}

// startIdentity starts a fleet, the signer and the CCM with
// nodes.identity on (keyPublishTimeout 5s, and more lines of the identity
// section, or of nodes after it), its RBAC applied (and serving
// certificates', if more turns their approval on), and returns the
// harness, a bootstrap token's client and the CCM.
func startIdentity(t *testing.T, more string) (*harness, kubernetes.Interface, *ccm) {
	t.Helper()
	h := setup(t)
	h.configTail = "nodes:\n  identity:\n    approveClientCertificates: true\n    keyPublishTimeout: 5s\n" + more
	h.writeConfig(nil)
	if strings.Contains(more, "servingCertificates:") {
		h.applyServingRBAC(t)
	}
	for _, u := range h.manifests("node-identity") {
		_, err := h.resources(t)(u).Create(h.ctx, u, metav1.CreateOptions{})
		must.OK(t, err)
	}
	h.startSigner(t)
	boot := h.bootstrap(t)
	return h, boot, h.startCCM()
}
