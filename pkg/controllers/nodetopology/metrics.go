package nodetopology

import (
	"k8s.io/component-base/metrics"
)

// Metrics are the controller's Prometheus metrics, about the decisions it
// makes and the state it keeps. Create them with NewMetrics, register
// Collectors() (the command registers them in the framework's registry)
// and pass them in Options. A nil *Metrics records nothing.
type Metrics struct {
	drifted       *metrics.GaugeVec
	oosTaints     *metrics.CounterVec
	oosNodes      *metrics.Gauge
	oosUnproven   *metrics.Counter
	deletionsHeld *metrics.GaugeVec
	refused       *metrics.CounterVec
	retries       *metrics.CounterVec
	untainted     *metrics.Gauge
	adoptions     *metrics.Counter
	addresses     *metrics.Counter
}

const namespace = "vsphere_ccm"

// oosChanges are the label values of the out-of-service counter, created
// at 0 so that a rule's increase() sees the first taint.
var oosChanges = []string{"added", "removed"}

// NewMetrics creates the metrics (not registered).
func NewMetrics() *Metrics {
	return &Metrics{
		drifted: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "nodes_topology_drifted",
			Help:           "Initialized Nodes whose zone or region label no longer matches their VM (moved, retagged, regrouped), by the VM's vCenter.",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		oosTaints: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "out_of_service_taints_total",
			Help:           "Out-of-service taints (nodes.outOfService) added to Nodes whose VM is proven powered off, and removed when it powers on, by change (added, removed).",
			StabilityLevel: metrics.ALPHA}, []string{"change"}),
		oosNodes: metrics.NewGauge(&metrics.GaugeOpts{Namespace: namespace, Name: "nodes_out_of_service",
			Help: "Nodes that carry the out-of-service taint the CCM added.", StabilityLevel: metrics.ALPHA}),
		oosUnproven: metrics.NewCounter(&metrics.CounterOpts{Namespace: namespace, Name: "out_of_service_unproven_total",
			Help:           "Checks of NotReady Nodes past nodes.outOfService.notReadyFor whose VM's power state could not be proven (vCenter down or not current, host not answering): no taint added.",
			StabilityLevel: metrics.ALPHA}),
		deletionsHeld: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "node_deletions_held_nodes",
			Help:           "Nodes labelled with a vCenter (and datacenter, \"\" for the whole vCenter) that is not configured. While any exists, no Node is deleted for a missing VM: its VM may have moved there.",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter", "datacenter"}),
		refused: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "node_retry_requests_refused_total",
			Help: "Retry annotations of Nodes waiting for initialization that the API server refused for a reason that will not pass by itself, by reason (Forbidden, Invalid): " +
				"counted once per Node and refusal, then backed off (1s to 5m).",
			StabilityLevel: metrics.ALPHA}, []string{"reason"}),
		retries: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "node_initialization_retries_total",
			Help: "Nodes waiting for initialization whose last attempt failed and whose VM can now be looked up, handed back to the framework's node controller, by how: " +
				"informer (queued in this process, no Node write) or annotation (the retry annotation written on the Node: only if the node controller's handler could not be kept). " +
				"Due after a vCenter back, a page of a first read, tags, or a VM the Node's lookup now finds (entering a vCenter's scope, a template made a VM, a rename).",
			StabilityLevel: metrics.ALPHA}, []string{"via"}),
		untainted: metrics.NewGauge(&metrics.GaugeOpts{Namespace: namespace, Name: "nodes_joined_without_taint",
			Help: "Nodes without a providerID that joined without the node.cloudprovider.kubernetes.io/uninitialized taint, and whose VM is found: no CCM initializes them " +
				"(kubelet without --cloud-provider=external, or joined before the CCM); nodes.adoptUntainted taints them (a VM found by the Node's machine UUID).",
			StabilityLevel: metrics.ALPHA}),
		adoptions: metrics.NewCounter(&metrics.CounterOpts{Namespace: namespace, Name: "nodes_adopted_total",
			Help:           "Nodes that joined without the uninitialized taint, tainted once their VM was found (nodes.adoptUntainted) so that the node controller initializes them.",
			StabilityLevel: metrics.ALPHA}),
		addresses: metrics.NewCounter(&metrics.CounterOpts{Namespace: namespace, Name: "node_address_updates_total",
			Help: "Node address updates written as soon as the inventory saw the change (a guest's new address), ahead of the framework's node status pass, " +
				"which then writes nothing new: what that pass would write, only when an address changed, at most once per 30 s per Node.",
			StabilityLevel: metrics.ALPHA}),
	}
}

func (m *Metrics) addressesUpdated() {
	if m != nil {
		m.addresses.Inc()
	}
}

func (m *Metrics) setUntainted(n int) {
	if m != nil {
		m.untainted.Set(float64(n))
	}
}

func (m *Metrics) adopted() {
	if m != nil {
		m.adoptions.Inc()
	}
}

// retryVias are the label values of the retries counter, created at 0.
var retryVias = []string{"informer", "annotation"}

func (m *Metrics) retried(via string) {
	if m != nil {
		m.retries.WithLabelValues(via).Inc()
	}
}

func (m *Metrics) retryRefused(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// Collectors lists every metric, for registration.
func (m *Metrics) Collectors() []metrics.Registerable {
	return []metrics.Registerable{m.drifted, m.oosTaints, m.oosNodes, m.oosUnproven, m.deletionsHeld, m.refused, m.retries, m.untainted, m.adoptions, m.addresses}
}

// initialize creates, at 0, the series alert rules read: per configured
// vCenter for the drift gauge, per change for the taint counter. The
// metrics must be registered first (they are no-ops until then).
func (m *Metrics) initialize(vcenters []string) {
	if m == nil {
		return
	}
	for _, c := range oosChanges {
		m.oosTaints.WithLabelValues(c)
	}
	for _, v := range retryVias {
		m.retries.WithLabelValues(v)
	}
	for _, vc := range vcenters {
		m.drifted.WithLabelValues(vc).Set(0)
	}
	m.oosNodes.Set(0)
}

func (m *Metrics) setDrifted(perVCenter map[string]int, vcenters []string) {
	if m == nil {
		return
	}
	for _, vc := range vcenters {
		m.drifted.WithLabelValues(vc).Set(float64(perVCenter[vc]))
	}
	for vc, n := range perVCenter { // a VM in a vCenter the options do not list
		m.drifted.WithLabelValues(vc).Set(float64(n))
	}
}

func (m *Metrics) outOfService(change string) {
	if m != nil {
		m.oosTaints.WithLabelValues(change).Inc()
	}
}

func (m *Metrics) unproven() {
	if m != nil {
		m.oosUnproven.Inc()
	}
}

func (m *Metrics) setOutOfServiceNodes(n int) {
	if m != nil {
		m.oosNodes.Set(float64(n))
	}
}

// setDeletionsHeld replaces the held-deletion series with held (by
// vCenter and datacenter).
func (m *Metrics) setDeletionsHeld(held map[[2]string]int) {
	if m == nil {
		return
	}
	m.deletionsHeld.Reset()
	for k, n := range held {
		m.deletionsHeld.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}
