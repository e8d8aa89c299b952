package clientcsr

import "k8s.io/component-base/metrics"

// Metrics count the decisions. Labels never hold a name or a key.
type Metrics struct {
	decisions *metrics.CounterVec
	pending   *metrics.Gauge
}

// NewMetrics creates the metrics (not registered).
func NewMetrics() *Metrics {
	return &Metrics{
		decisions: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: "vsphere_ccm", Name: "client_csr_decisions_total",
			Help:           "Kubelet client certificate requests made with a bootstrap token (nodes.identity), by decision (approve, deny) and reason (VMBound; NoVMPublishesKey, SeveralVMsPublishKey, NodeNameNotVMName, VMIsTemplate, VMBoundToAnotherNode, NodeIsAnotherVM, NotAKubeletRequest).",
			StabilityLevel: metrics.ALPHA}, []string{"decision", "reason"}),
		pending: metrics.NewGauge(&metrics.GaugeOpts{Namespace: "vsphere_ccm", Name: "client_csr_pending",
			Help:           "Kubelet client certificate requests made with a bootstrap token that wait (their key not published yet, or a vCenter that cannot tell).",
			StabilityLevel: metrics.ALPHA}),
	}
}

// Collectors lists every metric, for registration.
func (m *Metrics) Collectors() []metrics.Registerable {
	return []metrics.Registerable{m.decisions, m.pending}
}

func (m *Metrics) decided(v Verdict) {
	if m != nil {
		m.decisions.WithLabelValues(string(v.Decision), v.Reason).Inc()
	}
}

func (m *Metrics) setPending(n int) {
	if m != nil {
		m.pending.Set(float64(n))
	}
}
