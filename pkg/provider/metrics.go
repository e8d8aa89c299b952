package provider

import (
	"errors"
	"sync"
	"time"

	"k8s.io/component-base/metrics"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Metrics are the provider's Prometheus metrics. Create them with
// NewMetrics, register Collectors() (the command registers them in the
// framework's registry, served on /metrics) and pass them in Options.
// They implement vcenter.Observer. Labels never hold secrets.
type Metrics struct {
	requests     *metrics.CounterVec
	duration     *metrics.HistogramVec
	logins       *metrics.CounterVec
	up           *metrics.GaugeVec
	inventoryVMs *metrics.GaugeVec
	inventoryAge *metrics.GaugeVec
	// fullReads counts the indexes' full reads; readsSeen is what each
	// index had counted at the last refresh (refresh adds the difference).
	fullReads  *metrics.CounterVec
	readsMu    sync.Mutex
	readsSeen  map[string]uint64
	unreadable *metrics.GaugeVec
	missing    *metrics.GaugeVec
	mismatch   *metrics.Counter
	decoded    *metrics.CounterVec
	decodeBad  *metrics.CounterVec
	vapiExpiry *metrics.GaugeVec
	vapiFail   *metrics.GaugeVec
	tagAge     *metrics.GaugeVec
	lookups    *metrics.CounterVec
	calls      *metrics.CounterVec
	verdicts   *metrics.CounterVec
	vcDownFor  *metrics.GaugeVec
	unserved   *metrics.GaugeVec
}

const namespace = "vsphere_ccm"

// MetricRequestsTotal is the full name of the request counter.
const MetricRequestsTotal = namespace + "_vcenter_requests_total"

// The finite label values of the counters alert rules read; each series
// is created at 0 (see initialize) so that a rule's increase() sees the
// first event.
var (
	loginResults    = []string{"success", "rejected", "ticket_refused", "error"}
	lookupResults   = []string{"found", "not_found", "ambiguous", "error"}
	absenceVerdicts = []string{VerdictGone, VerdictKept, VerdictUnproven, VerdictDelayed, VerdictNoPermission, VerdictUnrecorded}
)

// NewMetrics creates the metrics (not registered).
func NewMetrics() *Metrics { return newMetrics() }

// configured reports what the cloud-config asks that this CCM does not do.
func (m *Metrics) configured(cfg *config.Config) {
	gauge := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	m.unserved.WithLabelValues("service").Set(gauge(cfg.NSXT.LoadBalancer))
	m.unserved.WithLabelValues("route").Set(gauge(cfg.NSXT.RouterPath != ""))
}

// initialize creates, at 0, the series of the counters alert rules read,
// for the given vCenters, before any login or lookup: without a 0 sample,
// increase() misses the first event. The metrics must be registered
// (component-base metrics are no-ops until then).
func (m *Metrics) initialize(vcenters []string) {
	for _, r := range lookupResults {
		m.lookups.WithLabelValues(r)
	}
	for _, v := range absenceVerdicts {
		m.verdicts.WithLabelValues(v)
	}
	for _, vc := range vcenters {
		for _, r := range loginResults {
			m.logins.WithLabelValues(vc, r)
		}
	}
}

func newMetrics() *Metrics {
	return &Metrics{
		requests: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "vcenter_requests_total",
			Help: "vSphere requests by vCenter, API (soap, rest), method and outcome (ok, fault, error).", StabilityLevel: metrics.ALPHA},
			[]string{"vcenter", "api", "method", "outcome"}),
		duration: metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: namespace, Name: "vcenter_request_duration_seconds",
			Help: "Duration of vSphere requests by vCenter and API.", Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
			StabilityLevel: metrics.ALPHA}, []string{"vcenter", "api"}),
		logins: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "vcenter_logins_total",
			Help: "Login attempts (SOAP and REST) by vCenter and result (success, rejected, ticket_refused, error).", StabilityLevel: metrics.ALPHA},
			[]string{"vcenter", "result"}),
		up: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "vcenter_up",
			Help: "1 when the vCenter is connected or degraded, 0 when down.", StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		inventoryVMs: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "inventory_vms",
			Help: "VMs in the inventory of each vCenter.", StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		inventoryAge: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "inventory_sync_age_seconds",
			Help: "Seconds since the inventory of each vCenter was last confirmed current, or since the provider started when it never was.", StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		fullReads: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "inventory_full_reads_total",
			Help:           "Full reads of each vCenter's inventory: one at start, then one per new SOAP session or lost property collector (a renewed vAPI session reads nothing again). Each reads every VM in scope again; a steady rise is session churn.",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		readsSeen: map[string]uint64{},
		unreadable: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "inventory_unreadable_vms",
			Help:           "VMs of each vCenter whose identity cannot be read (no BIOS UUID, or connection state inaccessible, orphaned or invalid); while above 0 the vCenter cannot prove any VM absent, so no Node is deleted.",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		missing: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "vcenter_missing_privileges",
			Help:           "Objects of each vCenter (its datacenters in scope, their VM and host folders, the folders of Nodes' VMs) on which the CCM's user lacked System.Read at the last check (every 10 minutes); while above 0 the vCenter cannot prove any VM absent, so no Node is deleted.",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		decoded: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "vcenter_pages_decoded_total",
			Help:           "Property collector answers (the inventory's pages and updates, its direct reads) by vCenter and decoder: fast (this CCM's decoder of VM identities and details) or govmomi (everything else, what the fast decoder declines, and every answer once it is switched off).",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter", "decoder"}),
		decodeBad: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "fast_decoder_mismatches_total",
			Help:           "Answers on which the fast decoder disagreed with govmomi's (one page in 200 is decoded by both and compared); the first switches the fast decoder off for the process.",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		mismatch: metrics.NewCounter(&metrics.CounterOpts{Namespace: namespace, Name: "node_identity_mismatches_total",
			Help:           "Initializations refused with nodes.identity: the Node reported the machine of a VM vCenter does not name like the Node (NodeIdentityMismatch events name them); such a Node is never deleted for it.",
			StabilityLevel: metrics.ALPHA}),
		vapiExpiry: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "vcenter_vapi_token_expiry_timestamp_seconds",
			Help:           "When the token of each vCenter's vAPI session expires (Unix time; certificate mode only): it is renewed at three quarters of its lifetime, and tags cannot be read once it has expired unrenewed.",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		vapiFail: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "vcenter_vapi_renewal_failing_seconds",
			Help:           "Seconds since renewing each vCenter's vAPI session began to fail (STS unreachable, credentials refused); 0 while renewals succeed. Only tags depend on it: the SOAP session, the inventory and the lookups go on.",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		tagAge: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "tag_cache_age_seconds",
			Help: "Seconds since the tag cache of each vCenter was last refreshed, or since the provider started when it never was.", StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		lookups: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "node_lookups_total",
			Help: "Node to VM lookups by result (found, not_found, ambiguous, error).", StabilityLevel: metrics.ALPHA}, []string{"result"}),
		calls: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "instance_calls_total",
			Help:           "Calls of the framework's controllers into the provider, by method (InstanceMetadata: node initialization and status passes; InstanceExists, InstanceShutdown: node lifecycle).",
			StabilityLevel: metrics.ALPHA}, []string{"method"}),
		verdicts: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: namespace, Name: "vm_absence_verdicts_total",
			Help:           "InstanceExists verdicts on VMs not found: gone (the Node is deleted), kept_by_policy (nodes.deletion: never), unproven (kept, error), delayed (proven, kept for nodes.deletionDelay, error), no_permission (vCenter refused to read the VM's recorded reference: kept, error), unrecorded (no record of the VM's reference on the Node: kept, error).",
			StabilityLevel: metrics.ALPHA}, []string{"verdict"}),
		vcDownFor: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "vcenter_unusable_seconds",
			Help:           "Seconds since the vCenter became unusable (down, or its inventory not current); 0 while usable. Alert on it instead of a liveness probe.",
			StabilityLevel: metrics.ALPHA}, []string{"vcenter"}),
		unserved: metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: namespace, Name: "config_unserved_controllers",
			Help:           "1 when the cloud-config asks for a controller of the reference CCM that this CCM does not run: service (an NSX-T load balancer for Services of type LoadBalancer) or route (NSX-T routes for Pod ranges); see migrate preflight.",
			StabilityLevel: metrics.ALPHA}, []string{"controller"}),
	}
}

// Collectors lists every metric, for registration.
func (m *Metrics) Collectors() []metrics.Registerable {
	return []metrics.Registerable{m.requests, m.duration, m.logins, m.up, m.inventoryVMs, m.inventoryAge, m.fullReads, m.unreadable, m.missing, m.mismatch, m.decoded, m.decodeBad, m.vapiExpiry, m.vapiFail, m.tagAge, m.lookups, m.calls, m.verdicts, m.vcDownFor, m.unserved}
}

// Request implements vcenter.Observer.
func (m *Metrics) Request(vc, api, method, outcome string, d time.Duration) {
	m.requests.WithLabelValues(vc, api, method, outcome).Inc()
	m.duration.WithLabelValues(vc, api).Observe(d.Seconds())
}

// Login implements vcenter.Observer.
func (m *Metrics) Login(vc string, err error) {
	result := "success"
	switch {
	case errors.Is(err, vcenter.ErrLoginRejected):
		result = "rejected"
	case errors.Is(err, vcenter.ErrTicketRefused):
		result = "ticket_refused"
	case err != nil:
		result = "error"
	}
	m.logins.WithLabelValues(vc, result).Inc()
}

// Decoded implements vcenter.Observer.
func (m *Metrics) Decoded(vc, decoder string) { m.decoded.WithLabelValues(vc, decoder).Inc() }

// DecodeMismatch implements vcenter.Observer.
func (m *Metrics) DecodeMismatch(vc string) { m.decodeBad.WithLabelValues(vc).Inc() }

// call counts a call of the framework into the provider (nil-safe).
func (m *Metrics) call(method string) {
	if m != nil {
		m.calls.WithLabelValues(method).Inc()
	}
}

func (m *Metrics) lookup(err error) {
	result := "found"
	switch {
	case err == nil:
	case errors.Is(err, inventory.ErrNotFound):
		result = "not_found"
	case errors.Is(err, inventory.ErrAmbiguous):
		result = "ambiguous"
	default:
		result = "error"
	}
	m.lookups.WithLabelValues(result).Inc()
}

// Refresh updates the gauges from the provider's state. The provider does
// it every 10 seconds; tests call it to read current values.
func (m *Metrics) Refresh(p *Provider) {
	now := p.opts.Clock.Now()
	// Never loaded counts from the start: a cache that never loads must
	// trip the same stale alert as one that stopped.
	age := func(t time.Time) float64 {
		if t.IsZero() {
			t = p.startedAt
		}
		// A round may complete after now was taken: never a negative age.
		return max(0, now.Sub(t).Seconds())
	}
	for _, c := range p.pool.Clients() {
		up := 0.0
		if c.Health().State != vcenter.Down {
			up = 1
		}
		m.up.WithLabelValues(c.Name()).Set(up)
		m.refreshVAPI(c.Name(), c.Health(), now)
		m.vcDownFor.WithLabelValues(c.Name()).Set(p.unusableFor(c.Name(), now).Seconds())
		if ix := p.inv.Index(c.Name()); ix != nil {
			_, at, _ := ix.Status()
			m.inventoryVMs.WithLabelValues(c.Name()).Set(float64(ix.Len()))
			m.inventoryAge.WithLabelValues(c.Name()).Set(age(at))
			m.unreadable.WithLabelValues(c.Name()).Set(float64(len(ix.Unreadable())))
			m.missing.WithLabelValues(c.Name()).Set(float64(len(ix.Privileges().Missing)))
			m.addReads(c.Name(), ix.FullReads())
		}
		if tc := p.topo.Cache(c.Name()); tc != nil {
			_, at, _ := tc.Status()
			m.tagAge.WithLabelValues(c.Name()).Set(age(at))
		}
	}
}

// identityMismatch counts a refused initialization (nil-safe).
func (m *Metrics) identityMismatch() {
	if m != nil {
		m.mismatch.Inc()
	}
}

// refreshVAPI sets the vAPI session's gauges of vc from its health.
func (m *Metrics) refreshVAPI(vc string, h vcenter.Health, now time.Time) {
	if h.VAPIExpires.IsZero() {
		m.vapiExpiry.DeleteLabelValues(vc)
	} else {
		m.vapiExpiry.WithLabelValues(vc).Set(float64(h.VAPIExpires.Unix()))
	}
	failing := 0.0
	if h.VAPIError != nil {
		failing = max(0, now.Sub(h.VAPIFailingSince).Seconds())
	}
	m.vapiFail.WithLabelValues(vc).Set(failing)
}

// addReads adds the full reads vc's index counted since the last refresh.
func (m *Metrics) addReads(vc string, n uint64) {
	m.readsMu.Lock()
	defer m.readsMu.Unlock()
	if n > m.readsSeen[vc] {
		m.fullReads.WithLabelValues(vc).Add(float64(n - m.readsSeen[vc]))
		m.readsSeen[vc] = n
	}
}
