package servingcsr

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// TestPendingGauge: the gauge follows the waiting requests by reason,
// kept incrementally as each request starts, changes reason or stops
// waiting; a reason no request waits for any more loses its series, the
// others are set in place (never reset: a scrape never misses a series
// that has requests).
func TestPendingGauge(t *testing.T) {
	m := NewMetrics()
	reg := metrics.NewKubeRegistry()
	for _, c := range m.Collectors() {
		reg.MustRegister(c)
	}
	want := func(text string) {
		t.Helper()
		head := "# HELP vsphere_ccm_serving_csrs_pending [ALPHA] Kubelet serving certificate requests waiting for vCenter's answer, by reason.\n# TYPE vsphere_ccm_serving_csrs_pending gauge\n"
		if text == "" {
			head = ""
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(head+text), "vsphere_ccm_serving_csrs_pending"); err != nil {
			t.Error(err)
		}
	}
	m.pendingMoved("", "VMUnknown")
	m.pendingMoved("", "VMUnknown")
	m.pendingMoved("", "VMPoweredOff")
	want("vsphere_ccm_serving_csrs_pending{reason=\"VMPoweredOff\"} 1\nvsphere_ccm_serving_csrs_pending{reason=\"VMUnknown\"} 2\n")
	m.pendingMoved("VMPoweredOff", "")
	m.pendingMoved("VMUnknown", "IPOwnersUnknown")
	want("vsphere_ccm_serving_csrs_pending{reason=\"IPOwnersUnknown\"} 1\nvsphere_ccm_serving_csrs_pending{reason=\"VMUnknown\"} 1\n")
	m.pendingMoved("VMUnknown", "")
	m.pendingMoved("IPOwnersUnknown", "")
	want("")
}
