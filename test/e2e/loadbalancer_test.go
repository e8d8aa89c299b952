//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"text/template"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// metalLB is the MetalLB release whose CRDs the recipe is checked against.
const metalLB = "go.universe.tf/metallb@v0.14.9"

// TestLoadBalancerRecipes: the MetalLB and kube-vip recipes of
// docs/operations.md, rendered for the zones the CCM gave the Nodes, are
// accepted by the API server (server-side dry run; for MetalLB with its
// CRDs, whose schemas validate the objects), and each site's L2
// advertisement or kube-vip DaemonSet selects exactly the Nodes of that
// site: the zone labels from vSphere decide which Nodes answer for which
// addresses.
func TestLoadBalancerRecipes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.startCCM()
	h.registerAll(t)
	h.waitInitialized(t, h.fleet.VMs()...)
	nodes, err := h.kube.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
	must.OK(t, err)
	var zones []string
	for _, n := range nodes.Items {
		if z := n.Labels[zoneLabel]; z != "" && !slices.Contains(zones, z) {
			zones = append(zones, z)
		}
	}
	slices.Sort(zones)
	if len(zones) < 3 {
		t.Fatalf("zones %v, want at least 3 sites", zones)
	}
	type site struct{ Zone, Addresses, Range, Interface, Image string }
	var sites []site
	for i, z := range zones {
		sites = append(sites, site{Zone: z, Addresses: fmt.Sprintf("10.%d.0.0/24", 10+i),
			Range: fmt.Sprintf("10.%d.0.10-10.%d.0.50", 10+i, 10+i), Interface: "ens192", Image: "ghcr.io/kube-vip/kube-vip:v0.9.2"})
	}
	render := func(name string) []*unstructured.Unstructured {
		text, err := os.ReadFile(filepath.Join(h.root, "deploy", "loadbalancers", name))
		must.OK(t, err)
		var out bytes.Buffer
		must.OK(t, template.Must(template.New(name).Parse(string(text))).Execute(&out, map[string]any{"Sites": sites}))
		return h.decode(out.Bytes())
	}
	// siteNodes checks that a selector picks exactly the Nodes of a site.
	siteNodes := func(what, zone string, match map[string]string) {
		sel := labels.SelectorFromSet(match)
		var picked, want []string
		for _, n := range nodes.Items {
			if sel.Matches(labels.Set(n.Labels)) {
				picked = append(picked, n.Name)
			}
			if n.Labels[zoneLabel] == zone {
				want = append(want, n.Name)
			}
		}
		if len(picked) == 0 || !slices.Equal(picked, want) {
			t.Errorf("%s selects %v, want the Nodes of its site %v", what, picked, want)
		}
	}

	// kube-vip: plain objects, no CRDs; the namespaces for real (the
	// DaemonSets' dry run needs none, the Services of a site would).
	kv := render("kube-vip-per-site.yaml.tmpl")
	if len(kv) != 1+2*len(sites) {
		t.Fatalf("kube-vip: rendered %d objects for %d sites", len(kv), len(sites))
	}
	h.dryRunApply(t, kv)
	for _, u := range kv {
		switch u.GetKind() {
		case "DaemonSet":
			ns, _, err := unstructured.NestedStringMap(u.Object, "spec", "template", "spec", "nodeSelector")
			must.OK(t, err)
			siteNodes("DaemonSet "+u.GetName(), ns[zoneLabel], ns)
		case "ConfigMap":
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			for _, s := range sites {
				if data["range-"+s.Zone] != s.Range {
					t.Errorf("kubevip ConfigMap: range-%s = %q, want %q", s.Zone, data["range-"+s.Zone], s.Range)
				}
			}
		}
	}

	objs := render("metallb-per-site.yaml.tmpl")
	if len(objs) != 2*len(sites) {
		t.Fatalf("rendered %d objects for %d sites", len(objs), len(sites))
	}

	h.installCRDs(t, metalLB, filepath.Join("config", "crd", "bases", "metallb.io_ipaddresspools.yaml"),
		filepath.Join("config", "crd", "bases", "metallb.io_l2advertisements.yaml"))
	_, err = h.kube.CoreV1().Namespaces().Create(h.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metallb-system"}}, metav1.CreateOptions{})
	must.OK(t, err)
	h.dryRunApply(t, objs)

	for _, u := range objs {
		if u.GetKind() != "L2Advertisement" {
			continue
		}
		sels, _, err := unstructured.NestedSlice(u.Object, "spec", "nodeSelectors")
		must.OK(t, err)
		if len(sels) != 1 {
			t.Fatalf("%s: %d node selectors", u.GetName(), len(sels))
		}
		ml, _, _ := unstructured.NestedStringMap(sels[0].(map[string]any), "matchLabels")
		siteNodes("L2Advertisement "+u.GetName(), u.GetName(), ml)
	}
}
