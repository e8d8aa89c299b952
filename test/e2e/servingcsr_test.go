//go:build e2e

package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// servingRequest is what a kubelet puts in a serving certificate request
// (the kubelet's certificate manager: CN system:node:<name>, O
// system:nodes, its host names and addresses), with what the cases change.
type servingRequest struct {
	node     string // the requester (system:node:<node>)
	cn       string // the subject's CN; default system:node:<node>
	dns      []string
	ips      []string
	emails   []string
	uris     []string
	usages   []certificatesv1.KeyUsage // default the kubelet's
	wantSANs bool                      // the issued certificate must have exactly these SANs
}

// serving sets up the fleet with nodes.servingCertificates.approve, the
// RBAC of deploy/serving-certificates, a kube-controller-manager that signs
// with the cluster CA, and the CCM; every Node initialized.
func setupServing(t *testing.T, approve bool) *harness {
	h := setup(t)
	if approve {
		h.configTail = "nodes:\n  servingCertificates:\n    approve: true\n"
		h.writeConfig(nil)
		h.applyServingRBAC(t)
	}
	h.startSigner(t)
	return h
}

// startSigner starts a kube-controller-manager that signs with the
// cluster CA, and gives kubelets the rights kubeadm gives the
// system:nodes group to create their certificate requests.
func (h *harness) startSigner(t *testing.T) {
	t.Helper()
	must.OK(t, h.cp.StartSigning(h.ctx, built.controlPlane))
	_, err := h.kube.RbacV1().ClusterRoleBindings().Create(h.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e:nodes-request-certificates"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:nodes"}},
	}, metav1.CreateOptions{})
	must.OK(t, err)
}

// applyServingRBAC creates what `kubectl apply -k deploy/serving-certificates` creates.
func (h *harness) applyServingRBAC(t *testing.T) {
	t.Helper()
	objs := h.manifests("serving-certificates")
	h.dryRunApply(t, objs)
	resource := h.resources(t)
	for _, u := range objs {
		_, err := resource(u).Create(h.ctx, u, metav1.CreateOptions{})
		must.OK(t, err)
	}
}

// asNode is a client that authenticates as the kubelet of node.
func (h *harness) asNode(t *testing.T, node string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(h.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
	kube, err := kubernetes.NewForConfig(cfg)
	must.OK(t, err)
	return kube
}

// request creates the request as the kubelet does (client-go's
// util/certificate/csr, with a new key) and returns its name.
func (h *harness) request(t *testing.T, r servingRequest) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must.OK(t, err)
	cn := r.cn
	if cn == "" {
		cn = "system:node:" + r.node
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
		DNSNames: r.dns, EmailAddresses: r.emails}
	for _, s := range r.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(s))
	}
	for _, s := range r.uris {
		u, err := url.Parse(s)
		must.OK(t, err)
		tmpl.URIs = append(tmpl.URIs, u)
	}
	data, err := certutil.MakeCSRFromTemplate(key, tmpl)
	must.OK(t, err)
	usages := r.usages
	if usages == nil {
		usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	}
	name, _, err := csr.RequestCertificateWithContext(h.ctx, h.asNode(t, r.node), data, "", certificatesv1.KubeletServingSignerName, nil, usages, key)
	must.OK(t, err)
	return name
}

// decided waits for the request's approval or denial and returns the
// condition.
func (h *harness) decided(t *testing.T, name string) certificatesv1.CertificateSigningRequestCondition {
	t.Helper()
	var cond certificatesv1.CertificateSigningRequestCondition
	poll.NoError(t, "request "+name+" decided", 60*time.Second, func() error {
		c, err := h.kube.CertificatesV1().CertificateSigningRequests().Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range c.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
				cond = c
				return nil
			}
		}
		return errNotYet
	})
	return cond
}

// issued waits for the signed certificate of an approved request.
func (h *harness) issued(t *testing.T, name string) *x509.Certificate {
	t.Helper()
	var cert *x509.Certificate
	poll.NoError(t, "certificate of "+name, 60*time.Second, func() error {
		c, err := h.kube.CertificatesV1().CertificateSigningRequests().Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == certificatesv1.CertificateFailed {
				return fmt.Errorf("the signer failed it: %s", cond.Message)
			}
		}
		if len(c.Status.Certificate) == 0 {
			return errNotYet
		}
		block, _ := pem.Decode(c.Status.Certificate)
		if block == nil {
			return fmt.Errorf("certificate is not PEM")
		}
		cert, err = x509.ParseCertificate(block.Bytes)
		return err
	})
	return cert
}

// waitCSREvent waits for an event of the CCM on the request with reason
// whose message contains text, and returns it.
func (h *harness) waitCSREvent(t *testing.T, name, reason, text string) v1.Event {
	t.Helper()
	var found v1.Event
	poll.NoError(t, reason+" event on "+name, 60*time.Second, func() error {
		evs, err := h.events(name)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Reason == reason && strings.Contains(ev.Message, text) {
				found = ev
				return nil
			}
		}
		return fmt.Errorf("%d events, none %s with %q", len(evs), reason, text)
	})
	return found
}

// notApproved checks that a request has no approval and no certificate.
func (h *harness) notApproved(t *testing.T, name string) {
	t.Helper()
	c, err := h.kube.CertificatesV1().CertificateSigningRequests().Get(h.ctx, name, metav1.GetOptions{})
	must.OK(t, err)
	for _, cond := range c.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved {
			t.Errorf("request %s approved: %s", name, cond.Message)
		}
	}
	if len(c.Status.Certificate) > 0 {
		t.Errorf("request %s has a certificate", name)
	}
}

// ownRequest is what the kubelet of vm asks for: the DNS and IP SANs of
// its Node's addresses, as the CCM set them.
func (h *harness) ownRequest(t *testing.T, vm vcsim.VM) servingRequest {
	t.Helper()
	n, err := h.node(vm.Name)
	must.OK(t, err)
	r := servingRequest{node: vm.Name, wantSANs: true}
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS:
			r.dns = append(r.dns, a.Address)
		case v1.NodeInternalIP, v1.NodeExternalIP:
			r.ips = append(r.ips, a.Address)
		}
	}
	if len(r.ips) == 0 {
		t.Fatalf("node %s has no address: %v", vm.Name, n.Status.Addresses)
	}
	return r
}

// approvedWithSANs checks that the request was approved by the CCM and
// signed by the real signer with exactly the requested SANs.
func (h *harness) approvedWithSANs(t *testing.T, name string, r servingRequest) {
	t.Helper()
	cond := h.decided(t, name)
	if cond.Type != certificatesv1.CertificateApproved || cond.Reason != "Proven" {
		t.Fatalf("request %s for %s: %s %s: %s", name, r.node, cond.Type, cond.Reason, cond.Message)
	}
	cert := h.issued(t, name)
	var ips []string
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	want := slices.Clone(r.ips)
	slices.Sort(want)
	slices.Sort(ips)
	if !slices.Equal(cert.DNSNames, r.dns) || !slices.Equal(ips, want) || cert.Subject.CommonName != "system:node:"+r.node {
		t.Errorf("certificate of %s: CN %s DNS %v IP %v; want DNS %v IP %v", r.node, cert.Subject.CommonName, cert.DNSNames, ips, r.dns, want)
	}
	if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("certificate of %s: usages %v", r.node, cert.ExtKeyUsage)
	}
}

// TestServingCertificates: with approval on, every Node of the fleet gets
// a serving certificate for exactly the names and addresses it asks for,
// approved by the CCM and signed by the real kube-controller-manager; and
// every adversarial case, each a subtest, is denied or left waiting, never
// approved: the bypasses known approvers let through.
func TestServingCertificates(t *testing.T) {
	t.Parallel()
	h := setupServing(t, true)
	c := h.startCCM()
	h.registerAll(t)
	vms := h.fleet.VMs()
	h.waitInitialized(t, vms...)

	t.Run("every Node", func(t *testing.T) {
		for _, vm := range vms {
			r := h.ownRequest(t, vm)
			h.approvedWithSANs(t, h.request(t, r), r)
		}
	})

	a, b := h.fleet.VCenter("vc-a").VMs[0], h.fleet.VCenter("vc-a").VMs[1]
	own := h.ownRequest(t, a)
	denied := func(t *testing.T, r servingRequest, reason string) {
		t.Helper()
		name := h.request(t, r)
		cond := h.decided(t, name)
		if cond.Type != certificatesv1.CertificateDenied || cond.Reason != reason {
			t.Errorf("%s: %s %s (%s); want denied %s", name, cond.Type, cond.Reason, cond.Message, reason)
		}
		h.waitCSREvent(t, name, "ServingCertificateDenied", reason)
		h.notApproved(t, name)
	}
	with := func(mut func(*servingRequest)) servingRequest {
		r := own
		r.dns, r.ips = slices.Clone(own.dns), slices.Clone(own.ips)
		r.wantSANs = false
		mut(&r)
		return r
	}
	for _, tc := range []struct {
		name   string
		req    servingRequest
		reason string
	}{
		// Node b's status.addresses claims it (pending alone), and vCenter says it is not a's VM's.
		{"another Node's IP", with(func(r *servingRequest) { r.ips = append(r.ips, b.IPv4) }), "IPNotNodes"},
		{"an IP no VM has", with(func(r *servingRequest) { r.ips = append(r.ips, "192.0.2.200") }), "IPNotNodes"},
		{"another Node's name", with(func(r *servingRequest) { r.dns = append(r.dns, b.Name) }), "DNSNotNodes"},
		{"a wildcard", with(func(r *servingRequest) { r.dns = append(r.dns, "*."+a.Name) }), "SANNotAllowed"},
		{"the API server's names", with(func(r *servingRequest) {
			r.dns = append(r.dns, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
		}), "ClusterName"}, // kubernetes alone is a Service's name: a claim, which waits
		{"the API server's name with its namespace", with(func(r *servingRequest) { r.dns = append(r.dns, "kubernetes.default") }), "ClusterName"},
		{"a name in the cluster domain", with(func(r *servingRequest) { r.dns = append(r.dns, "kubernetes.default.svc.cluster.local") }), "ClusterName"},
		// The kubelet-serving signer signs these two usage sets only: any
		// other would be approved, then failed by the signer.
		{"server auth alone", with(func(r *servingRequest) { r.usages = []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth} }), "UsageNotAllowed"},
		{"a name under the Node's", with(func(r *servingRequest) { r.dns = append(r.dns, "evil."+a.Name) }), "DNSNotNodes"},
		// kubelet-csr-approver accepts any DNS name the Node's name prefixes.
		{"a name the Node's prefixes", with(func(r *servingRequest) { r.dns = append(r.dns, a.Name+".attacker.example") }), "DNSNotNodes"},
		{"another name the Node's prefixes", with(func(r *servingRequest) { r.dns = append(r.dns, a.Name+"0") }), "DNSNotNodes"},
		{"a CN that is not the requester", with(func(r *servingRequest) { r.cn = "system:node:" + b.Name }), "SubjectMismatch"},
		{"client auth usage", with(func(r *servingRequest) {
			r.usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth}
		}), "UsageNotAllowed"},
		{"a URI SAN", with(func(r *servingRequest) { r.uris = []string{"spiffe://cluster.local/ns/kube-system/sa/admin"} }), "SANNotAllowed"},
		{"an email SAN", with(func(r *servingRequest) { r.emails = []string{"admin@example.com"} }), "SANNotAllowed"},
		{"a loopback IP", with(func(r *servingRequest) { r.ips = append(r.ips, "127.0.0.1") }), "SANNotAllowed"},
	} {
		t.Run(tc.name, func(t *testing.T) { denied(t, tc.req, tc.reason) })
	}

	t.Run("a VIP two VMs report", func(t *testing.T) {
		vcA := h.fleet.VCenter("vc-a")
		vcA.SetGuest(b.Ref, b.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{b.IPv4, b.IPv6, a.IPv4}, Connected: true, DeviceConfigId: 4000}})
		defer vcA.SetGuest(b.Ref, b.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{b.IPv4, b.IPv6}, Connected: true, DeviceConfigId: 4000}})
		// The inventory follows within a long poll; until then the
		// address has one owner. The first request denied for it shows
		// the change arrived; none may be approved.
		poll.NoError(t, "the VIP denied", 60*time.Second, func() error {
			name := h.request(t, own)
			cond := h.decided(t, name)
			if cond.Type == certificatesv1.CertificateDenied && cond.Reason == "SharedIP" {
				return nil
			}
			return fmt.Errorf("%s %s", cond.Type, cond.Reason)
		})
	})

	t.Run("a Node registered with another Node's VM", func(t *testing.T) {
		// The kubelet reports the machine UUID the Node is matched by: a
		// bootstrap credential can register a Node with any VM's.
		must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, "impostor", strings.ToUpper(a.UUID)))
		defer func() {
			must.OK(t, h.kube.CoreV1().Nodes().Delete(h.ctx, "impostor", metav1.DeleteOptions{}))
		}()
		poll.NoError(t, "impostor initialized with a's VM", 60*time.Second, func() error {
			n, err := h.node("impostor")
			if err != nil {
				return err
			}
			if n.Spec.ProviderID == "" {
				return errNotYet
			}
			return nil
		})
		name := h.request(t, servingRequest{node: "impostor", dns: []string{"impostor"}, ips: []string{a.IPv4}})
		h.waitCSREvent(t, name, "ServingCertificatePending", "VMOfTwoNodes")
		h.notApproved(t, name)
		// And a's own request waits too, until the duplicate is gone.
		mine := h.request(t, own)
		h.waitCSREvent(t, mine, "ServingCertificatePending", "VMOfTwoNodes")
		h.notApproved(t, mine)
	})

	t.Run("the guest's host name set to another Node's name", func(t *testing.T) {
		vcA := h.fleet.VCenter("vc-a")
		const moved = "10.77.0.31" // changed with the host name: the sync point
		vcA.SetGuest(a.Ref, b.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{moved, a.IPv4, a.IPv6}, Connected: true, DeviceConfigId: 4000}})
		defer vcA.SetGuest(a.Ref, a.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{a.IPv4, a.IPv6}, Connected: true, DeviceConfigId: 4000}})
		// The CCM recomputed a's addresses from the new guest report, and
		// did not publish the name the approver would deny a.
		n := h.waitAddress(t, a.Name, moved)
		if slices.Contains(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: b.Name}) {
			t.Errorf("a's Node published b's name as its Hostname: %v", n.Status.Addresses)
		}
		name := h.request(t, servingRequest{node: a.Name, dns: []string{b.Name}, ips: []string{moved}})
		cond := h.decided(t, name)
		if cond.Type != certificatesv1.CertificateDenied || cond.Reason != "DNSNotNodes" {
			t.Errorf("%s: %s %s (%s); want denied DNSNotNodes", name, cond.Type, cond.Reason, cond.Message)
		}
		h.notApproved(t, name)
	})

	t.Run("a Node without providerID", func(t *testing.T) {
		// A Node no VM matches: never initialized.
		must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, "ghost", "4211DEAD-0000-4000-8000-000000000099"))
		name := h.request(t, servingRequest{node: "ghost", dns: []string{"ghost"}, ips: []string{"10.250.0.1"}})
		ev := h.waitCSREvent(t, name, "ServingCertificatePending", "Node")
		if !strings.Contains(ev.Message, "NodeNotInitialized") && !strings.Contains(ev.Message, "NodeNotFound") {
			t.Errorf("pending for %q", ev.Message)
		}
		h.notApproved(t, name)
	})

	t.Run("a powered-off VM", func(t *testing.T) {
		vm := h.fleet.VCenter("vc-b").VMs[2]
		r := h.ownRequest(t, vm)
		h.powerOff(t, vm)
		// The sync point: the lifecycle controller's shutdown taint comes
		// from the same inventory, so the CCM knows the VM is off.
		poll.NoError(t, "shutdown taint on "+vm.Name, 60*time.Second, func() error {
			n, err := h.node(vm.Name)
			if err != nil {
				return err
			}
			if !hasTaint(n, "node.cloudprovider.kubernetes.io/shutdown") {
				return errNotYet
			}
			return nil
		})
		name := h.request(t, r)
		h.waitCSREvent(t, name, "ServingCertificatePending", "VMPoweredOff")
		h.notApproved(t, name)
	})

	t.Run("a UUID found in two vCenters", func(t *testing.T) {
		vm, dup := h.fleet.VCenter("vc-b").VMs[0], h.fleet.VCenter("vc-c").VMs[1]
		r := h.ownRequest(t, vm)
		vcC := h.fleet.VCenter("vc-c")
		vcC.SetUUID(dup.Ref, vm.UUID)
		defer vcC.SetUUID(dup.Ref, dup.UUID)
		// The sync point: the Node's next status pass finds the UUID twice.
		h.waitEvent(t, vm.Name, "AmbiguousVM", dup.Name)
		name := h.request(t, r)
		h.waitCSREvent(t, name, "ServingCertificatePending", "VMs match")
		h.notApproved(t, name)
	})

	t.Run("a vCenter down, then back", func(t *testing.T) {
		vm := h.fleet.VCenter("vc-c").VMs[0]
		r := h.ownRequest(t, vm)
		vcC := h.fleet.VCenter("vc-c")
		must.OK(t, vcC.SetMode(vcsim.Down))
		poll.NoError(t, "vc-c seen down", 60*time.Second, func() error {
			if v := c.metric(t, `vsphere_ccm_vcenter_up{vcenter="vc-c"}`); v != 0 {
				return errNotYet
			}
			return nil
		})
		name := h.request(t, r)
		h.waitCSREvent(t, name, "ServingCertificatePending", "VMUnknown")
		h.notApproved(t, name)
		// The operator's command says why it waits, and exits 3.
		code, out := h.csrExplain(t, name)
		if code != 3 || !strings.Contains(out, name) || !strings.Contains(out, "pending") || !strings.Contains(out, "VMUnknown") || !strings.Contains(out, "vc-c") {
			t.Errorf("csr explain: exit %d\n%s", code, out)
		}
		must.OK(t, vcC.SetMode(vcsim.Up))
		back := time.Now()
		h.approvedWithSANs(t, name, r)
		t.Logf("approved %v after vc-c came back", time.Since(back).Round(100*time.Millisecond))
	})

	t.Run("renewed after the VM's IP changed", func(t *testing.T) {
		vm := h.fleet.VCenter("vc-b").VMs[1]
		old := h.ownRequest(t, vm)
		const newIP = "10.77.0.21"
		h.fleet.VCenter("vc-b").SetGuest(vm.Ref, vm.Name, []types.GuestNicInfo{{Network: "VM Network", IpAddress: []string{newIP}, Connected: true, DeviceConfigId: 4000}})
		// The kubelet asks again once its Node's addresses change.
		poll.NoError(t, "the Node's new address", 60*time.Second, func() error {
			n, err := h.node(vm.Name)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(n.Status.Addresses, func(a v1.NodeAddress) bool { return a.Address == newIP }) {
				return errNotYet
			}
			return nil
		})
		renewed := h.ownRequest(t, vm)
		h.approvedWithSANs(t, h.request(t, renewed), renewed)
		stale := old
		stale.wantSANs = false
		denied(t, stale, "IPNotNodes")
	})

	// Every request decided counted, by decision and reason.
	if v := c.metric(t, `vsphere_ccm_serving_csr_decisions_total{decision="approve",reason="Proven"}`); v < float64(len(vms)+2) {
		t.Errorf("approvals counted: %v", v)
	}
	if v := c.metric(t, `vsphere_ccm_serving_csr_decisions_total{decision="deny",reason="IPNotNodes"}`); v < 2 {
		t.Errorf("IPNotNodes denials counted: %v", v)
	}
	if v := c.metric(t, `vsphere_ccm_serving_csr_decisions_total{decision="deny",reason="ClusterName"}`); v < 1 {
		t.Errorf("ClusterName denials counted: %v", v)
	}
}

// waitAddress waits for the Node to have the address, and returns it.
func (h *harness) waitAddress(t *testing.T, node, address string) *v1.Node {
	t.Helper()
	var found *v1.Node
	poll.NoError(t, "address "+address+" on "+node, 60*time.Second, func() error {
		n, err := h.node(node)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(n.Status.Addresses, func(a v1.NodeAddress) bool { return a.Address == address }) {
			return fmt.Errorf("addresses %v", n.Status.Addresses)
		}
		found = n
		return nil
	})
	return found
}

// csrExplain runs `csr explain` on the named requests and returns its
// exit status and output.
func (h *harness) csrExplain(t *testing.T, names ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.CommandContext(h.ctx, h.binary, append([]string{"csr", "explain", "--cloud-config", h.cfgPath,
		"--kubeconfig", h.cp.Kubeconfig, "--timeout", "30s"}, names...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	}
	t.Fatalf("csr explain: %v", err)
	return 0, ""
}

// TestServingCertificatesOff: without nodes.servingCertificates.approve
// the CCM leaves kubelet serving requests to other approvers, and needs
// no RBAC on them.
func TestServingCertificatesOff(t *testing.T) {
	t.Parallel()
	h := setupServing(t, false)
	c := h.startCCM()
	h.registerAll(t)
	vms := h.fleet.VMs()
	h.waitInitialized(t, vms...)
	// The sync point: the controller manager decided not to start it.
	poll.NoError(t, "serving-csr left out", 60*time.Second, func() error {
		if !strings.Contains(c.LogText(), "Kubelet serving certificate requests are left to other approvers") {
			return errNotYet
		}
		return nil
	})
	var names []string
	for _, vm := range vms {
		names = append(names, h.request(t, h.ownRequest(t, vm)))
	}
	// A later Node's initialization orders after the requests: the CCM
	// was running while they existed.
	extra := h.fleet.VCenter("vc-a").VMs[0]
	must.OK(t, h.kube.CoreV1().Nodes().Delete(h.ctx, extra.Name, metav1.DeleteOptions{}))
	h.register(t, extra, false)
	h.waitInitialized(t, extra)
	for _, name := range names {
		h.notApproved(t, name)
		evs, err := h.events(name)
		must.OK(t, err)
		if len(evs) > 0 {
			t.Errorf("events on %s with approval off: %v", name, evs)
		}
	}
}
