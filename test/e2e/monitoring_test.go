//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// prometheusOperator is the release whose CRDs the monitoring objects are
// checked against, downloaded from the Go module proxy.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// installMonitoringCRDs creates the ServiceMonitor and PrometheusRule CRDs
// of the pinned Prometheus Operator and waits until they are served.
func (h *harness) installMonitoringCRDs(t *testing.T) {
	t.Helper()
	h.installCRDs(t, prometheusOperator, filepath.Join("example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join("example", "prometheus-operator-crd", "monitoring.coreos.com_prometheusrules.yaml"))
}

// installCRDs creates the CRDs in files (paths inside module, a
// module@version downloaded from the Go module proxy) and waits until
// they are served.
func (h *harness) installCRDs(t *testing.T, module string, files ...string) {
	t.Helper()
	out, err := exec.CommandContext(h.ctx, "go", "mod", "download", "-json", module).Output()
	must.OK(t, err)
	var mod struct{ Dir, Error string }
	must.OK(t, json.Unmarshal(out, &mod))
	if mod.Dir == "" {
		t.Fatalf("go mod download %s: %s", module, mod.Error)
	}
	dyn, err := dynamic.NewForConfig(h.cp.Config)
	must.OK(t, err)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(mod.Dir, name))
		must.OK(t, err)
		objs := h.decode(data)
		if len(objs) != 1 {
			t.Fatalf("%s: %d objects", name, len(objs))
		}
		_, err = crds.Create(h.ctx, objs[0], metav1.CreateOptions{})
		must.OK(t, err)
		poll.NoError(t, "CRD "+objs[0].GetName()+" established", 60*time.Second, func() error {
			u, err := crds.Get(h.ctx, objs[0].GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return errNotYet
		})
	}
}

// TestMonitoringObjects: the chart with every monitoring option, and
// deploy/monitoring, render objects that the API server accepts with the
// Prometheus Operator's CRDs installed (server-side dry run: the CRDs'
// schemas validate the ServiceMonitor and PrometheusRule).
func TestMonitoringObjects(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.installMonitoringCRDs(t)
	objs := h.helmManifests("kube-system", "--set", "metrics.serviceMonitor.enabled=true",
		"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true")
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
	}
	if kinds["ServiceMonitor"] != 1 || kinds["PrometheusRule"] != 1 || kinds["Service"] != 1 {
		t.Fatalf("the chart rendered %v", kinds)
	}
	h.dryRunApply(t, objs)
	mon := h.manifests("monitoring")
	if len(mon) != 3 {
		t.Fatalf("deploy/monitoring built %d objects", len(mon))
	}
	h.dryRunApply(t, append(mon, h.manifests()...))
}
