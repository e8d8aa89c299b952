package deploy_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/version" // kubernetes_build_info, as in the binary
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/configwatch"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/clientcsr"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/servingcsr"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

const (
	alertsFile    = chart + "/files/alerts.yaml"
	dashboardFile = chart + "/files/dashboard.json"
)

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) ruleGroups {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := sigsyaml.UnmarshalStrict(data, &g); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return g
}

// promql is Prometheus's own PromQL parser with its default options.
var promql = parser.NewParser(parser.Options{})

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// ccmMetrics are the series names the CCM serves: its own metrics (with
// the _bucket, _sum and _count series of histograms) and the build info.
func ccmMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	reg := metrics.NewKubeRegistry() // registration creates the lazy metrics
	// Every metric the command registers (cmd/.../ccm.go).
	for _, c := range slices.Concat(provider.NewMetrics().Collectors(), nodetopology.NewMetrics().Collectors(), nodeevents.New(nil).Collectors(), configwatch.NewMetrics().Collectors(), servingcsr.NewMetrics().Collectors(), clientcsr.NewMetrics().Collectors()) {
		reg.MustRegister(c)
		ch := make(chan *prometheus.Desc, 10)
		c.(interface{ Describe(chan<- *prometheus.Desc) }).Describe(ch)
		close(ch)
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			names[m[1]] = true
			if _, ok := c.(*metrics.HistogramVec); ok {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					names[m[1]+s] = true
				}
			}
		}
	}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		names[f.GetName()] = true
	}
	if !names["kubernetes_build_info"] || !names["vsphere_ccm_vcenter_up"] {
		t.Fatalf("registry names incomplete: %v", names)
	}
	return names
}

// checkExpr parses expr with Prometheus's parser and checks that every
// metric it selects is served by the CCM.
func checkExpr(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	selected := 0
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			selected++
			if !known[vs.Name] {
				t.Errorf("%s: metric %q is not served by the CCM (renamed?)", where, vs.Name)
			}
		}
		return nil
	})
	if selected == 0 {
		t.Errorf("%s: %q selects no metric", where, expr)
	}
}

// TestAlertRules: every rule parses and uses only the CCM's metrics, has a
// severity and a summary, is documented in docs/metrics.md, and the
// kustomize PrometheusRule carries the same groups as the chart.
func TestAlertRules(t *testing.T) {
	known := ccmMetrics(t)
	rules := readRules(t)
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			checkExpr(t, "alert "+r.Alert, r.Expr, known)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s has no severity or summary", r.Alert)
			}
			if !strings.Contains(string(doc), "`"+r.Alert+"`") {
				t.Errorf("alert %s is not described in docs/metrics.md", r.Alert)
			}
		}
	}
	if n < 5 {
		t.Fatalf("%d rules", n)
	}
	data, err := os.ReadFile("monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec ruleGroups `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pr.Spec, rules) {
		t.Errorf("deploy/monitoring/prometheusrule.yaml differs from %s: copy the groups over", alertsFile)
	}
}

type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboard: the Grafana dashboard's queries parse and use only the
// CCM's metrics, it covers every metric of the CCM, and the kustomize copy
// is the chart's.
func TestDashboard(t *testing.T) {
	known := ccmMetrics(t)
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkExpr(t, "panel "+p.Title, q.Expr, known)
			if e, err := promql.ParseExpr(q.Expr); err == nil {
				parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
					if vs, ok := n.(*parser.VectorSelector); ok {
						used[strings.TrimSuffix(vs.Name, "_bucket")] = true
					}
					return nil
				})
			}
		}
	}
	for name := range known {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(name, "vsphere_ccm_") && !used[base] && !used[name] {
			t.Errorf("metric %s is on no panel of the dashboard", name)
		}
	}
	kustomized, err := os.ReadFile("monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(kustomized) != string(data) {
		t.Errorf("deploy/monitoring/dashboard.json differs from %s: copy it over", dashboardFile)
	}
}

// TestChartMonitoring: with every monitoring option the chart renders the
// metrics Service, a ServiceMonitor selecting it, a PrometheusRule with the
// alert groups and the dashboard ConfigMap; without, only the Service.
func TestChartMonitoring(t *testing.T) {
	h := helm(t)
	values := "testdata/stretched-values.yaml"
	kinds := func(args ...string) map[string]*unstructured.Unstructured {
		out, err := run(t, h, append([]string{"template", "ccm", chart, "-n", "kube-system", "-f", values}, args...)...)
		if err != nil {
			t.Fatalf("helm template %v: %v", args, err)
		}
		byKind := map[string]*unstructured.Unstructured{}
		for _, doc := range strings.Split(out, "\n---") {
			var u unstructured.Unstructured
			if err := sigsyaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatal(err)
			}
			if u.Object != nil {
				byKind[u.GetKind()+"/"+u.GetName()] = &u
			}
		}
		return byKind
	}
	off := kinds()
	if _, ok := off["Service/vsphere-cloud-controller-manager-metrics"]; !ok {
		t.Errorf("no metrics Service by default: %v", slices.Sorted(maps.Keys(off)))
	}
	for k := range off {
		if strings.HasPrefix(k, "ServiceMonitor/") || strings.HasPrefix(k, "PrometheusRule/") {
			t.Errorf("%s rendered without being enabled", k)
		}
	}
	on := kinds("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom",
		"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true")
	sm, pr, cm := on["ServiceMonitor/vsphere-cloud-controller-manager"], on["PrometheusRule/vsphere-cloud-controller-manager"], on["ConfigMap/vsphere-cloud-controller-manager-dashboard"]
	svc := on["Service/vsphere-cloud-controller-manager-metrics"]
	if sm == nil || pr == nil || cm == nil || svc == nil {
		t.Fatalf("rendered %v", slices.Sorted(maps.Keys(on)))
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, the Service has %q", k, v, svc.GetLabels()[k])
		}
	}
	if sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor labels %v", sm.GetLabels())
	}
	var rendered ruleGroups
	b, _ := json.Marshal(map[string]any{"groups": pr.Object["spec"].(map[string]any)["groups"]})
	if err := json.Unmarshal(b, &rendered); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rendered, readRules(t)) {
		t.Errorf("the chart's PrometheusRule differs from %s", alertsFile)
	}
	data, _ := os.ReadFile(dashboardFile)
	got, _, _ := unstructured.NestedString(cm.Object, "data", "vsphere-cloud-controller-manager.json")
	if strings.TrimSpace(got) != strings.TrimSpace(string(data)) || cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap: labels %v, JSON equal %v", cm.GetLabels(), strings.TrimSpace(got) == strings.TrimSpace(string(data)))
	}
}

// TestKustomizeMonitoring: deploy/monitoring builds a ServiceMonitor for
// the Service of deploy/base, the PrometheusRule and the dashboard.
func TestKustomizeMonitoring(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	base, err := k.Run(filesys.MakeFsOnDisk(), "base")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range m.Resources() {
		kinds = append(kinds, r.GetKind()+"/"+r.GetName())
		if r.GetNamespace() != "kube-system" {
			t.Errorf("%s/%s in namespace %q", r.GetKind(), r.GetName(), r.GetNamespace())
		}
	}
	slices.Sort(kinds)
	want := []string{"ConfigMap/vsphere-cloud-controller-manager-dashboard", "PrometheusRule/vsphere-cloud-controller-manager", "ServiceMonitor/vsphere-cloud-controller-manager"}
	if !slices.Equal(kinds, want) {
		t.Errorf("deploy/monitoring builds %v, want %v", kinds, want)
	}
	var svcLabels map[string]string
	for _, r := range base.Resources() {
		if r.GetKind() == "Service" {
			svcLabels = r.GetLabels()
		}
	}
	for _, r := range m.Resources() {
		if r.GetKind() != "ServiceMonitor" {
			continue
		}
		obj, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		sel, _, _ := unstructured.NestedStringMap(obj, "spec", "selector", "matchLabels")
		for k, v := range sel {
			if svcLabels[k] != v {
				t.Errorf("the ServiceMonitor selects %s=%s; deploy/base's Service has %v", k, v, svcLabels)
			}
		}
	}
	if _, err := os.Stat(filepath.Join("base", "service.yaml")); err != nil {
		t.Error(err)
	}
}

// TestEveryAlertTested: monitoring/alerts.test.yaml (run by `make rules`
// with promtool) has, for every alert, a case where it fires and one
// where it must not.
func TestEveryAlertTested(t *testing.T) {
	data, err := os.ReadFile("monitoring/alerts.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string            `json:"alertname"`
				ExpAlerts []json.RawMessage `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := sigsyaml.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	if want := []string{"../chart/vsphere-cloud-controller-manager/files/alerts.yaml"}; !slices.Equal(tests.RuleFiles, want) {
		t.Errorf("rule_files = %v, want %v", tests.RuleFiles, want)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: monitoring/alerts.test.yaml needs a case where it fires (%v) and one where it does not (%v)", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
}
