package configwatch

import (
	"k8s.io/component-base/metrics"
)

// Metrics count what the checks of the cloud-config found. Labels never
// hold a path or a value of the config.
type Metrics struct {
	changes *metrics.CounterVec
	refused *metrics.Gauge
	pending *metrics.Gauge
}

// NewMetrics creates the metrics (not registered).
func NewMetrics() *Metrics {
	return &Metrics{
		changes: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: "vsphere_ccm", Name: "config_changes_total",
			Help:           "Changes of the cloud-config (or of a CA bundle it names) seen while running, by result: restart (valid: the process restarts to apply it) or refused (invalid: the process keeps its running config).",
			StabilityLevel: metrics.ALPHA}, []string{"result"}),
		refused: metrics.NewGauge(&metrics.GaugeOpts{Namespace: "vsphere_ccm", Name: "config_refused",
			Help:           "1 while the cloud-config on disk is not valid (the process runs on the config it started with); 0 otherwise.",
			StabilityLevel: metrics.ALPHA}),
		pending: metrics.NewGauge(&metrics.GaugeOpts{Namespace: "vsphere_ccm", Name: "config_change_pending",
			Help:           "1 while a valid change of the cloud-config waits for this replica's turn to restart (the leader waits for a standby running the new config); 0 otherwise.",
			StabilityLevel: metrics.ALPHA}),
	}
}

// Collectors lists every metric, for registration.
func (m *Metrics) Collectors() []metrics.Registerable {
	return []metrics.Registerable{m.changes, m.refused, m.pending}
}

// observe records one check (nil-safe); pending: a valid change waits
// for this replica's turn.
func (m *Metrics) observe(r Result, pending bool) {
	if m == nil {
		return
	}
	switch r.Outcome {
	case Changed:
		if !r.Again {
			m.changes.WithLabelValues("restart").Inc()
		}
		m.refused.Set(0)
	case Refused:
		if !r.Again {
			m.changes.WithLabelValues("refused").Inc()
		}
		m.refused.Set(1)
	case Unchanged:
		// Valid and the same as the running config (a refused file put
		// back, or an edit of comments).
		m.refused.Set(0)
	case Settling:
		return // judged at the next check
	}
	if pending {
		m.pending.Set(1)
	} else {
		m.pending.Set(0)
	}
}
