package provider

import (
	"errors"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Event reasons of the lookups' Warning events, for problems an operator
// can fix. Messages are the error texts, which never contain secrets.
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
	// ReasonNodeIPNotOnVM: the kubelet's node IP cannot be an address of
	// the Node (see NodeIPError).
	ReasonNodeIPNotOnVM = "NodeIPNotOnVM"
	// ReasonDeletionDelayed: a Node's VM is proven gone, and the Node is
	// kept for nodes.deletionDelay (see DeletionDelayedError).
	ReasonDeletionDelayed = "DeletionDelayed"
	// ReasonVMNotVisible: a Node's VM is found by no view or search, and
	// vCenter refused to read its recorded reference (NoPermission, see
	// inventory.NoPermissionError), or the CCM's user lacks System.Read on
	// a datacenter or folder where VMs may be (inventory.PrivilegeError):
	// the CCM's user may no longer see it.
	ReasonVMNotVisible = "VMNotVisible"
	// ReasonVMReferenceUnrecorded: a Node's VM is found by no view or
	// search, and the Node carries no record of its VM's reference (see
	// UnrecordedError).
	ReasonVMReferenceUnrecorded = "VMReferenceUnrecorded"
	// ReasonNodeIdentityMismatch: with nodes.identity, a Node reports the
	// machine of a VM vCenter does not name like it (see
	// IdentityMismatchError).
	ReasonNodeIdentityMismatch = "NodeIdentityMismatch"
)

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
	var ne *NodeIPError
	var de *DeletionDelayedError
	var np *inventory.NoPermissionError
	var pe *inventory.PrivilegeError
	var ue *UnrecordedError
	var im *IdentityMismatchError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &im):
		return ReasonNodeIdentityMismatch
	case errors.As(err, &np), errors.As(err, &pe):
		return ReasonVMNotVisible
	case errors.As(err, &ue):
		return ReasonVMReferenceUnrecorded
	case errors.As(err, &nc):
		return ReasonVCenterNotConfigured
	case errors.As(err, &ne):
		return ReasonNodeIPNotOnVM
	case errors.As(err, &de):
		return ReasonDeletionDelayed
	case errors.As(err, &ge):
		return ReasonHostGroupZoneInvalid
	case errors.Is(err, inventory.ErrAmbiguous):
		return ReasonAmbiguousVM
	case errors.As(err, &ce), errors.As(err, &ie), errors.As(err, &ae), errors.As(err, &ca):
		return ReasonTopologyConflict
	case errors.As(err, &me), errors.As(err, &cm):
		return ReasonTopologyTagMissing
	case errors.Is(err, vcenter.ErrUnavailable) && !onlyStarting(err):
		return ReasonVCenterUnreachable
	case errors.Is(err, inventory.ErrNotFound) && notFoundIsProblem:
		return ReasonVMNotFound
	}
	return ""
}

// onlyStarting reports whether every vCenter unavailability in err is one
// whose first connection has no outcome yet (vcenter.ErrNotConnectedYet):
// a CCM starting, not a vCenter an operator must look at. Lookups made in
// the first moments would otherwise put a VCenterUnreachable event on
// every Node.
func onlyStarting(err error) bool {
	found, starting := walkUnavailable(err)
	return found && starting
}

// walkUnavailable finds the vcenter.UnavailableErrors in err's tree:
// found, there is one; starting, each of them is ErrNotConnectedYet.
func walkUnavailable(err error) (found, starting bool) {
	var ue *vcenter.UnavailableError
	switch e := err.(type) {
	case nil:
		return false, true
	case interface{ Unwrap() []error }:
		starting = true
		for _, c := range e.Unwrap() {
			f, s := walkUnavailable(c)
			found, starting = found || f, starting && s
		}
		return found, starting
	}
	if errors.As(err, &ue) {
		if !errors.Is(ue.Cause, vcenter.ErrNotConnectedYet) {
			return true, false
		}
		return true, true
	}
	if u, ok := err.(interface{ Unwrap() error }); ok {
		return walkUnavailable(u.Unwrap())
	}
	return false, true
}

// warn records a Warning event on node for a lookup error an operator
// can fix (through the shared, de-duplicating recorder).
func (p *Provider) warn(node *v1.Node, err error, notFoundIsProblem bool) {
	if r := reason(err, notFoundIsProblem); r != "" {
		p.opts.Events.Event(node, v1.EventTypeWarning, r, err.Error())
	}
}
