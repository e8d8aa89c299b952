package servingcsr

import (
	"sync"

	"k8s.io/component-base/metrics"
)

// Metrics are the controller's Prometheus metrics. Create them with
// NewMetrics, register Collectors() and pass them in Options. A nil
// *Metrics records nothing.
type Metrics struct {
	decisions *metrics.CounterVec
	pending   *metrics.GaugeVec

	mu    sync.Mutex
	shown map[string]bool // the reasons the pending gauge has a series for
}

const namespace = "vsphere_ccm"

// NewMetrics creates the metrics (not registered).
func NewMetrics() *Metrics {
	return &Metrics{
		decisions: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "serving_csr_decisions_total",
			Help: "Kubelet serving certificate requests decided, by decision (approve, deny, pending) and reason (Proven, SharedIP, IPNotNodes, VMUnknown, ...). " +
				"A pending request is counted when it starts waiting and when its reason changes, not at every retry.",
			StabilityLevel: metrics.ALPHA}, []string{"decision", "reason"}),
		pending: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "serving_csrs_pending",
			Help:           "Kubelet serving certificate requests waiting for vCenter's answer, by reason.",
			StabilityLevel: metrics.ALPHA}, []string{"reason"}),
	}
}

// Collectors lists every metric, for registration.
func (m *Metrics) Collectors() []metrics.Registerable {
	return []metrics.Registerable{m.decisions, m.pending}
}

// initialize creates the approval series at 0, so that a rule's
// increase() sees the first (denials and waits have many reasons: their
// series appear with their first).
func (m *Metrics) initialize() {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(string(Approve), "Proven")
}

func (m *Metrics) decided(v *Verdict) {
	if m != nil {
		m.decisions.WithLabelValues(string(v.Decision), v.Reason).Inc()
	}
}

// setPending sets the gauge from the requests waiting.
func (m *Metrics) setPending(pending map[string]waiting) {
	if m == nil {
		return
	}
	by := map[string]int{}
	for _, w := range pending {
		by[w.reason]++
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Set, then delete only the reasons no request waits for any more: a
	// scrape never sees a series missing that has requests (no Reset).
	for r, n := range by {
		m.pending.WithLabelValues(r).Set(float64(n))
	}
	for r := range m.shown {
		if by[r] == 0 {
			m.pending.DeleteLabelValues(r)
		}
	}
	m.shown = map[string]bool{}
	for r := range by {
		m.shown[r] = true
	}
}
