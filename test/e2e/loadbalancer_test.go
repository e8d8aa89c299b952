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

// TestLoadBalancerRecipes: the MetalLB recipe of docs/operations.md,
// rendered for the zones the CCM gave the Nodes, is accepted by the API
// server with MetalLB's CRDs (server-side dry run: the CRDs' schemas
// validate it), and each site's L2 advertisement selects exactly the Nodes
// of that site: the zone labels from vSphere decide which Nodes answer for
// which addresses.
func TestLoadBalancerRecipes(t *testing.T) {
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
	type site struct{ Zone, Addresses string }
	var sites []site
	for i, z := range zones {
		sites = append(sites, site{z, fmt.Sprintf("10.%d.0.0/24", 10+i)})
	}
	text, err := os.ReadFile(filepath.Join(h.root, "deploy", "loadbalancers", "metallb-per-site.yaml.tmpl"))
	must.OK(t, err)
	var out bytes.Buffer
	must.OK(t, template.Must(template.New("metallb").Parse(string(text))).Execute(&out, map[string]any{"Sites": sites}))
	objs := h.decode(out.Bytes())
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
		sel := labels.SelectorFromSet(ml)
		var picked, want []string
		for _, n := range nodes.Items {
			if sel.Matches(labels.Set(n.Labels)) {
				picked = append(picked, n.Name)
			}
			if n.Labels[zoneLabel] == u.GetName() {
				want = append(want, n.Name)
			}
		}
		if len(picked) == 0 || !slices.Equal(picked, want) {
			t.Errorf("L2Advertisement %s selects %v, want the Nodes of its site %v", u.GetName(), picked, want)
		}
	}
}
