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

	mu     sync.Mutex
	counts map[string]int // requests waiting, by reason: the pending gauge
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

// pendingMoved moves one waiting request from reason from (""  when it
// did not wait) to reason to ("" when it no longer waits): the gauge is
// kept incrementally, whatever the number of requests waiting. A reason
// no request waits for any more has its series deleted.
func (m *Metrics) pendingMoved(from, to string) {
	if m == nil || from == to {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	if to != "" {
		m.counts[to]++
		m.pending.WithLabelValues(to).Set(float64(m.counts[to]))
	}
	if from != "" {
		m.counts[from]--
		if m.counts[from] <= 0 {
			delete(m.counts, from)
			m.pending.DeleteLabelValues(from)
		} else {
			m.pending.WithLabelValues(from).Set(float64(m.counts[from]))
		}
	}
}
