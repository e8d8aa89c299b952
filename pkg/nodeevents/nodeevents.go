// Package nodeevents records events on Nodes for the whole controller
// manager, de-duplicated: the provider's lookup warnings and the
// node-topology controller's notices go through one Recorder, built by the
// command and handed to both, so that one (node, reason, message) is sent
// at most once per Interval whoever sends it, and every event sent is
// counted in one metric.
//
// Messages are error texts and notices, which never contain secrets.
package nodeevents

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/utils/clock"
)

// Interval is how long an identical event for a Node is not repeated.
const Interval = 10 * time.Minute

// Component is the events' source.
const Component = "vsphere-cloud-controller-manager"

// maxRemembered bounds the memory of sent events; past it, it starts over.
const maxRemembered = 10000

// Recorder sends de-duplicated events on Nodes. The zero value is not
// usable; a nil *Recorder drops every event (tools without a cluster).
type Recorder struct {
	clock clock.PassiveClock
	sent  *metrics.CounterVec

	mu   sync.Mutex
	sink record.EventRecorder // nil: events dropped until SetSink or Start
	last map[string]time.Time // node/reason/message -> when sent
}

// New returns a Recorder without a sink, on clk (the real clock if nil).
func New(clk clock.PassiveClock) *Recorder {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Recorder{clock: clk, last: map[string]time.Time{},
		sent: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: "vsphere_ccm", Name: "node_events_total",
			Help:           "Events recorded on Nodes by type (Warning, Normal) and reason (VMNotFound, TopologyDrift, ...), repeats within 10 minutes not counted.",
			StabilityLevel: metrics.ALPHA}, []string{"type", "reason"})}
}

// Collectors lists the Recorder's metric, for registration.
func (r *Recorder) Collectors() []metrics.Registerable { return []metrics.Registerable{r.sent} }

// SetSink sends the events to s from now on.
func (r *Recorder) SetSink(s record.EventRecorder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sink = s
}

// Start sends the events to the API server through kube, unless a sink is
// set already; the broadcaster stops when ctx ends.
func (r *Recorder) Start(ctx context.Context, kube kubernetes.Interface) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sink != nil {
		return
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	r.sink = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: Component})
}

// Event records an event on node, unless the same one was sent within
// Interval or there is no sink yet.
func (r *Recorder) Event(node *v1.Node, eventType, reason, msg string) {
	if r == nil {
		return
	}
	key := node.Name + "/" + reason + "/" + msg
	now := r.clock.Now()
	r.mu.Lock()
	sink := r.sink
	if sink == nil {
		r.mu.Unlock()
		return
	}
	if t, ok := r.last[key]; ok && now.Sub(t) < Interval {
		r.mu.Unlock()
		return
	}
	if len(r.last) >= maxRemembered {
		r.last = map[string]time.Time{}
	}
	r.last[key] = now
	r.mu.Unlock()
	sink.Event(node, eventType, reason, msg)
	r.sent.WithLabelValues(eventType, reason).Inc()
}
