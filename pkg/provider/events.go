package provider

import (
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Event reasons, for problems an operator can fix. Messages are the error
// texts, which never contain secrets.
const (
	ReasonVMNotFound         = "VMNotFound"
	ReasonAmbiguousVM        = "AmbiguousVM"
	ReasonTopologyConflict   = "TopologyConflict"
	ReasonTopologyTagMissing = "TopologyTagMissing"
	ReasonVCenterUnreachable = "VCenterUnreachable"
	// ReasonVCenterNotConfigured: a Node's labels name a vCenter or
	// datacenter that is not in the config, so its VM cannot be proven
	// gone.
	ReasonVCenterNotConfigured = "VCenterNotConfigured"
	// ReasonHostGroupZoneInvalid: a hostGroupZones entry cannot give the
	// VM one zone (see topology.GroupError).
	ReasonHostGroupZoneInvalid = "HostGroupZoneInvalid"
	// ReasonTopologyDrift: the zone or region of an initialized Node's VM
	// changed; the labels are kept (labels.onDrift: keep).
	ReasonTopologyDrift = "TopologyDrift"
	// ReasonTopologyRelabelled (Normal): the labels followed the VM
	// (labels.onDrift: relabel).
	ReasonTopologyRelabelled = "TopologyRelabelled"
	// ReasonTopologyNotVisibleToCSI: the zone or region comes from a tag
	// on the VM or its folders, which vSphere CSI does not read.
	ReasonTopologyNotVisibleToCSI = "TopologyNotVisibleToCSI"
)

// eventInterval is how long an identical event for a node is not repeated.
const eventInterval = 10 * time.Minute

// events records de-duplicated Warning events on Nodes.
type events struct {
	metrics *Metrics // counts the events sent, if set

	mu       sync.Mutex
	recorder record.EventRecorder // nil: no events (tools, or before Initialize)
	last     map[string]time.Time // node/reason/message -> when sent
}

func (e *events) setRecorder(r record.EventRecorder) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recorder = r
}

func (e *events) hasRecorder() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recorder != nil
}

// reason classifies an error; "" means no event.
func reason(err error, notFoundIsProblem bool) string {
	var ce *topology.ConflictError
	var ie *topology.InvalidTagError
	var ae *topology.InvalidAttributeError
	var me *topology.MissingTagError
	var cm *topology.CSIMissingError
	var ca *topology.CSIAmbiguousError
	var ge *topology.GroupError
	var nc *NotConfiguredError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &nc):
		return ReasonVCenterNotConfigured
	case errors.As(err, &ge):
		return ReasonHostGroupZoneInvalid
	case errors.Is(err, inventory.ErrAmbiguous):
		return ReasonAmbiguousVM
	case errors.As(err, &ce), errors.As(err, &ie), errors.As(err, &ae), errors.As(err, &ca):
		return ReasonTopologyConflict
	case errors.As(err, &me), errors.As(err, &cm):
		return ReasonTopologyTagMissing
	case errors.Is(err, vcenter.ErrUnavailable):
		return ReasonVCenterUnreachable
	case errors.Is(err, inventory.ErrNotFound) && notFoundIsProblem:
		return ReasonVMNotFound
	}
	return ""
}

func (e *events) warn(node *v1.Node, err error, notFoundIsProblem bool) {
	if r := reason(err, notFoundIsProblem); r != "" {
		e.send(node, v1.EventTypeWarning, r, err.Error())
	}
}

// send records an event unless the same one was sent for the node within
// eventInterval.
func (e *events) send(node *v1.Node, eventType, reason, msg string) {
	if e == nil {
		return
	}
	key := node.Name + "/" + reason + "/" + msg
	now := time.Now()
	e.mu.Lock()
	rec := e.recorder
	if rec == nil {
		e.mu.Unlock()
		return
	}
	if t, ok := e.last[key]; ok && now.Sub(t) < eventInterval {
		e.mu.Unlock()
		return
	}
	if e.last == nil || len(e.last) > 10000 {
		e.last = map[string]time.Time{}
	}
	e.last[key] = now
	e.mu.Unlock()
	rec.Event(node, eventType, reason, msg)
	if e.metrics != nil {
		e.metrics.events.WithLabelValues(eventType, reason).Inc()
	}
}
