package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// LabelVM records on a Node the managed object reference of its VM (as
// "vm-123") in the vCenter its LabelVCenter names: set at initialization
// and kept current by the node-topology controller (a VM registered
// again or moved to another vCenter gets a new reference), on Nodes a
// previous CCM initialized too, the first time their VM is found. It
// survives restarts and leader changes: a VM no view or search shows is
// proven gone only when vCenter answers a read of this reference with
// ManagedObjectNotFound (docs/reliability.md).
const LabelVM = "vsphere.vsphere-ccm.io/vm"

// recordOf is the value of LabelVM for vm: its reference's value, or ""
// when that is not a valid label value as it is (never seen on a real
// vCenter: then nothing is recorded, and the VM's Node is never proven
// gone).
func recordOf(vm inventory.VM) string {
	if r := vm.Ref.Value; r != "" && LabelValue(r) == r {
		return r
	}
	return ""
}

// recordWanted is the record of vm a Node carries: LabelVM and the
// LabelVCenter that says where the reference is (none when the reference
// cannot be a label value).
func recordWanted(vm inventory.VM) map[string]string {
	r, vc := recordOf(vm), LabelValue(vm.VCenter)
	if r == "" || vc == "" {
		return nil
	}
	return map[string]string{LabelVM: r, LabelVCenter: vc}
}

// UnrecordedError: a Node's VM is found by no view or search, but the
// Node carries no record of its VM's reference (LabelVM with
// LabelVCenter), so vCenter cannot be asked about that very VM: the VM was
// never found by any process of this CCM (a switch from another CCM after
// the VM was deleted, or the record was removed). The Node is kept until
// an operator deletes it.
type UnrecordedError struct {
	Node string
}

func (e *UnrecordedError) Error() string {
	return fmt.Sprintf("node %s carries no record of its VM's reference (labels %s and %s): no view or search finds its VM, but only vCenter's answer about that VM's own reference proves it gone (a VM the CCM's user may not see is left out of views and searches too); the Node is kept: delete it yourself once its VM is gone",
		e.Node, LabelVCenter, LabelVM)
}

// proveGoneByRef asks vCenter about node's VM by the reference recorded
// on the Node: nil only when every configured vCenter the Node's
// LabelVCenter may name answers ManagedObjectNotFound for it. A read that
// finds the VM, is refused (*inventory.NoPermissionError) or gets no
// answer is returned as it is; a Node without a record is an
// *UnrecordedError.
func (p *Provider) proveGoneByRef(ctx context.Context, node *v1.Node) error {
	ref, label := node.Labels[LabelVM], node.Labels[LabelVCenter]
	if ref == "" || label == "" {
		return &UnrecordedError{Node: node.Name}
	}
	// The vCenter the label names exactly; failing that, every one whose
	// name the label is made of (two names may give the same value).
	exact := slices.ContainsFunc(p.cfg.VCenters, func(vc config.VCenter) bool { return vc.Name == label })
	var errs []error
	asked := 0
	for _, vc := range p.cfg.VCenters {
		if exact && vc.Name != label || !labelNames(label, vc.Name) {
			continue
		}
		asked++
		if err := p.inv.ReadByRef(ctx, vc.Name, ref); !errors.Is(err, inventory.ErrGone) {
			errs = append(errs, err)
		}
	}
	if asked == 0 { // InScope has checked it; a config reloaded since may not have it
		return &NotConfiguredError{Node: node.Name, VCenter: label}
	}
	return errors.Join(errs...)
}

// absenceVerdict names what an unproven absence counts as in
// vsphere_ccm_vm_absence_verdicts_total.
func absenceVerdict(perr error) string {
	var np *inventory.NoPermissionError
	var pe *inventory.PrivilegeError
	var ue *UnrecordedError
	switch {
	case errors.As(perr, &np), errors.As(perr, &pe):
		return VerdictNoPermission
	case errors.As(perr, &ue):
		return VerdictUnrecorded
	}
	return VerdictUnproven
}
