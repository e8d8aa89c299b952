package provider_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

func TestMetrics(t *testing.T) {
	e := stretched(t, "", nil)
	// A second provider on the same fleet, with metrics and a wrong password for vc-c.
	m := provider.NewMetrics()
	reg := metrics.NewKubeRegistry()
	for _, c := range m.Collectors() {
		reg.MustRegister(c)
	}
	text := e.fleet.Config("global:\n  connectTimeout: 5s\nlabels:\n  zone: k8s-zone\n  region: k8s-region\n", nil)
	text = strings.Replace(text, "password: "+e.fleet.VCenter("vc-c").Password, "password: wrong", 1)
	cfg, _, err := config.Parse("m.yaml", []byte(text), config.Options{})
	must.OK(t, err)
	p, err := provider.New(cfg, provider.Options{Metrics: m, VCenter: vcenter.Options{RetryMin: time.Hour}})
	must.OK(t, err)
	must.OK(t, p.Start(e.ctx, nil))
	defer p.Close()
	must.OK(t, p.Inventory().Index("vc-a").WaitSynced(e.ctx))
	must.OK(t, p.Pool().WaitFirstAttempt(e.ctx))
	vm := e.fleet.VCenter("vc-a").VMs[0]
	if _, err := p.InstanceMetadata(e.ctx, node(vm)); err != nil {
		t.Fatal(err)
	}
	_, _ = p.InstanceExists(e.ctx, ghost("x", "4299ffff-0000-4000-8000-000000000000"))
	m.Refresh(p)
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vsphere_ccm_vcenter_up [ALPHA] 1 when the vCenter is connected or degraded, 0 when down.
# TYPE vsphere_ccm_vcenter_up gauge
vsphere_ccm_vcenter_up{vcenter="vc-a"} 1
vsphere_ccm_vcenter_up{vcenter="vc-b"} 1
vsphere_ccm_vcenter_up{vcenter="vc-c"} 0
# HELP vsphere_ccm_vcenter_logins_total [ALPHA] Login attempts (SOAP and REST) by vCenter and result (success, rejected, ticket_refused, error).
# TYPE vsphere_ccm_vcenter_logins_total counter
vsphere_ccm_vcenter_logins_total{result="error",vcenter="vc-a"} 0
vsphere_ccm_vcenter_logins_total{result="error",vcenter="vc-b"} 0
vsphere_ccm_vcenter_logins_total{result="error",vcenter="vc-c"} 0
vsphere_ccm_vcenter_logins_total{result="rejected",vcenter="vc-a"} 0
vsphere_ccm_vcenter_logins_total{result="rejected",vcenter="vc-b"} 0
vsphere_ccm_vcenter_logins_total{result="rejected",vcenter="vc-c"} 1
vsphere_ccm_vcenter_logins_total{result="success",vcenter="vc-a"} 2
vsphere_ccm_vcenter_logins_total{result="success",vcenter="vc-b"} 2
vsphere_ccm_vcenter_logins_total{result="success",vcenter="vc-c"} 0
vsphere_ccm_vcenter_logins_total{result="ticket_refused",vcenter="vc-a"} 0
vsphere_ccm_vcenter_logins_total{result="ticket_refused",vcenter="vc-b"} 0
vsphere_ccm_vcenter_logins_total{result="ticket_refused",vcenter="vc-c"} 0
# HELP vsphere_ccm_node_lookups_total [ALPHA] Node to VM lookups by result (found, not_found, ambiguous, error).
# TYPE vsphere_ccm_node_lookups_total counter
vsphere_ccm_node_lookups_total{result="ambiguous"} 0
vsphere_ccm_node_lookups_total{result="error"} 1
vsphere_ccm_node_lookups_total{result="found"} 1
vsphere_ccm_node_lookups_total{result="not_found"} 0
# HELP vsphere_ccm_vm_absence_verdicts_total [ALPHA] InstanceExists verdicts on VMs not found: gone (the Node is deleted), kept_by_policy (nodes.deletion: never), unproven (kept, error), delayed (proven, kept for nodes.deletionDelay, error), no_permission (vCenter refused to read the VM's recorded reference: kept, error), unrecorded (no record of the VM's reference on the Node: kept, error).
# TYPE vsphere_ccm_vm_absence_verdicts_total counter
vsphere_ccm_vm_absence_verdicts_total{verdict="delayed"} 0
vsphere_ccm_vm_absence_verdicts_total{verdict="gone"} 0
vsphere_ccm_vm_absence_verdicts_total{verdict="kept_by_policy"} 0
vsphere_ccm_vm_absence_verdicts_total{verdict="no_permission"} 0
vsphere_ccm_vm_absence_verdicts_total{verdict="unproven"} 0
vsphere_ccm_vm_absence_verdicts_total{verdict="unrecorded"} 0
`), "vsphere_ccm_vcenter_up", "vsphere_ccm_vcenter_logins_total", "vsphere_ccm_node_lookups_total", "vsphere_ccm_vm_absence_verdicts_total")
	if err != nil {
		t.Error(err)
	}
	families, err := reg.Gather()
	must.OK(t, err)
	seen := map[string]bool{}
	for _, f := range families {
		seen[f.GetName()] = true
		if n := f.GetName(); n == "vsphere_ccm_inventory_sync_age_seconds" || n == "vsphere_ccm_tag_cache_age_seconds" {
			// vc-c never loaded (wrong password): its age counts from the
			// start, so the stale alerts fire for a cache never loaded.
			vcs := 0
			for _, mt := range f.GetMetric() {
				vcs++
				if v := mt.GetGauge().GetValue(); v < 0 {
					t.Errorf("%s %v = %v, want an age >= 0", n, mt.GetLabel(), v)
				}
			}
			if vcs != 3 {
				t.Errorf("%s has %d vCenters, want 3", n, vcs)
			}
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if strings.Contains(l.GetValue(), "wrong") || strings.Contains(l.GetValue(), "initial-") {
					t.Errorf("a password in a metric label: %s", f.GetName())
				}
			}
		}
	}
	for _, name := range []string{"vsphere_ccm_vcenter_requests_total", "vsphere_ccm_vcenter_request_duration_seconds",
		"vsphere_ccm_inventory_vms", "vsphere_ccm_inventory_sync_age_seconds", "vsphere_ccm_inventory_full_reads_total", "vsphere_ccm_tag_cache_age_seconds"} {
		if !seen[name] {
			t.Errorf("metric %s missing", name)
		}
	}
}

// registry registers m in a registry of its own (before its values are
// set: unregistered metrics drop them).
func registry(t *testing.T, m *provider.Metrics) metrics.KubeRegistry {
	t.Helper()
	reg := metrics.NewKubeRegistry()
	for _, c := range m.Collectors() {
		reg.MustRegister(c)
	}
	return reg
}

// gauge returns the value of a metric with the label vcenter=vc.
func gauge(t *testing.T, reg metrics.KubeRegistry, name, vc string) float64 {
	t.Helper()
	families, err := reg.Gather()
	must.OK(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "vcenter" && l.GetValue() == vc {
					return mt.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("metric %s{vcenter=%q} not found", name, vc)
	return 0
}
