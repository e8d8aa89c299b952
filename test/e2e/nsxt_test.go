//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/preflight"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// nsxtSections is the part of pkg/config/testdata/nsxt/every-section.* from
// its first NSX-T section on: every key of the reference's nsxt,
// loadBalancer, loadBalancerClass and route sections.
func (h *harness) nsxtSections(t *testing.T, ext, first string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, "pkg", "config", "testdata", "nsxt", "every-section."+ext))
	must.OK(t, err)
	i := strings.Index(string(b), first)
	if i < 0 {
		t.Fatalf("every-section.%s has no %s", ext, first)
	}
	return "\n" + string(b)[i:]
}

// iniConfig is the fleet's cloud-config in the legacy INI format, every
// vCenter with inline credentials.
func (h *harness) iniConfig() string {
	var b strings.Builder
	b.WriteString("[Global]\nconnect-timeout = 5s\nrequest-timeout = 5s\n\n[Labels]\nzone = k8s-zone\nregion = k8s-region\n")
	for _, v := range h.fleet.VCenters {
		fmt.Fprintf(&b, "\n[VirtualCenter %q]\nserver = %s\nport = %d\nca-file = %s\nuser = %s\npassword = %s\n",
			v.Name, v.Host, v.Port, v.CAFile, strconv.Quote(v.User), strconv.Quote(v.Password))
	}
	return b.String()
}

// TestNSXTSectionsYAML: a cloud-config with every key of the reference's
// NSX-T sections (YAML) starts, initializes Nodes, says at start that the
// reference's load balancer and routes are not run here (a warning and
// vsphere_ccm_config_unserved_controllers), never shows the NSX-T password
// or token; migrate preflight lists the Services the reference's load
// balancer served and the Nodes it routed, and blocks until
// --acknowledge-nsxt.
func TestNSXTSectionsYAML(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.configTail = h.nsxtSections(t, "yaml", "nsxt:")
	h.writeConfig(nil)
	testNSXTSections(t, h)
}

// TestNSXTSectionsINI: the same in the legacy INI format.
func TestNSXTSectionsINI(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.cfgPath = filepath.Join(h.work, "vsphere.conf")
	must.OK(t, os.WriteFile(h.cfgPath, []byte(h.iniConfig()+h.nsxtSections(t, "conf", "[NSXT]")), 0o600))
	testNSXTSections(t, h)
}

func testNSXTSections(t *testing.T, h *harness) {
	c := h.startCCM()
	h.registerAll(t)
	h.waitInitialized(t, h.fleet.VMs()...)
	for _, ctrl := range []string{"service", "route"} {
		if v := c.metric(t, `vsphere_ccm_config_unserved_controllers{controller="`+ctrl+`"}`); v != 1 {
			t.Errorf("unserved %s controller: %v, want 1", ctrl, v)
		}
	}
	log := c.LogText()
	for _, want := range []string{"runs no load balancer controller", "runs no route controller"} {
		if !strings.Contains(log, want) {
			t.Errorf("no start-up warning %q in the log", want)
		}
	}
	for _, s := range []string{"nsx-password-never-shown", "vmc-token-never-shown"} {
		if strings.Contains(log, s) {
			t.Errorf("an NSX-T secret is in the CCM log")
		}
	}

	// The reference's load balancer served web/shop (no class), web/api
	// (class public); not web/typo (a class the config lacks: the
	// reference failed it), web/metallb (another controller's class) or
	// web/internal (no load balancer).
	must.OK(t, h.ensureNamespace("web"))
	metallb := "metallb.io/metallb"
	for _, s := range []struct {
		name, class string
		lbClass     *string
		typ         v1.ServiceType
		ip          string
	}{
		{"shop", "", nil, v1.ServiceTypeLoadBalancer, "192.0.2.10"},
		{"api", "public", nil, v1.ServiceTypeLoadBalancer, ""},
		{"typo", "pubic", nil, v1.ServiceTypeLoadBalancer, ""},
		{"metallb", "", &metallb, v1.ServiceTypeLoadBalancer, ""},
		{"internal", "", nil, v1.ServiceTypeClusterIP, ""},
	} {
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: s.name},
			Spec: v1.ServiceSpec{Type: s.typ, LoadBalancerClass: s.lbClass, Ports: []v1.ServicePort{{Port: 443}}}}
		if s.class != "" {
			svc.Annotations = map[string]string{"loadbalancer.vmware.io/class": s.class}
		}
		created, err := h.kube.CoreV1().Services("web").Create(h.ctx, svc, metav1.CreateOptions{})
		must.OK(t, err)
		if s.ip != "" {
			created.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: s.ip}}
			_, err = h.kube.CoreV1().Services("web").UpdateStatus(h.ctx, created, metav1.UpdateOptions{})
			must.OK(t, err)
		}
	}
	// The reference's route controller routed the Pod range of each Node
	// that has one.
	routed := h.fleet.VMs()[0].Name
	n, err := h.node(routed)
	must.OK(t, err)
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.7.0/24", []string{"10.244.7.0/24"}
	_, err = h.kube.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)

	code, r, stderr := h.preflight(t)
	if code != 3 || !r.Blocking || r.NSXTAcknowledged {
		t.Fatalf("exit %d, report %+v\n%s", code, r, stderr)
	}
	want := []preflight.Unmanaged{
		{Kind: "Service", Name: "web/api", NSXT: "load balancer (class public)"},
		{Kind: "Service", Name: "web/shop", NSXT: "load balancer (class default) at 192.0.2.10"},
		{Kind: "Node", Name: routed, NSXT: "static route for 10.244.7.0/24 on /infra/tier-1s/t1"},
	}
	if fmt.Sprint(r.NSXTUnmanaged) != fmt.Sprint(want) {
		t.Errorf("unmanaged NSX-T objects:\n got %v\nwant %v", r.NSXTUnmanaged, want)
	}
	for _, d := range r.Differences {
		if d.Impact == preflight.Blocking {
			t.Errorf("a Node difference blocks: %+v", d)
		}
	}
	if !strings.Contains(stderr, "runs no load balancer controller") {
		t.Errorf("preflight does not warn about the load balancer sections:\n%s", stderr)
	}

	code, r, stderr = h.preflight(t, "--acknowledge-nsxt")
	if code != 0 || r.Blocking || !r.NSXTAcknowledged || len(r.NSXTUnmanaged) != 3 {
		t.Fatalf("acknowledged: exit %d, report %+v\n%s", code, r, stderr)
	}
}

// ensureNamespace creates a namespace unless it exists.
func (h *harness) ensureNamespace(name string) error {
	_, err := h.kube.CoreV1().Namespaces().Create(h.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
