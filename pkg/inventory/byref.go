package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// ErrGone means vCenter answered a read of a VM's managed object
// reference with ManagedObjectNotFound for that very reference: the
// object does not exist. It is vCenter's word about the object, unlike a
// view or a search that leaves it out (which may only mean the user may
// not see it).
var ErrGone = errors.New("vCenter says the VM does not exist (ManagedObjectNotFound)")

// NoPermissionError: vCenter refused to read an object for want of a
// privilege (NoPermission). The object may exist: nothing is proven.
type NoPermissionError struct {
	VCenter string
	// Object is the reference vCenter names in the fault (the object
	// read, or the parent whose privilege is missing).
	Object types.ManagedObjectReference
	// Privilege is the privilege vCenter says is missing (System.Read for
	// an object the user cannot see).
	Privilege string
}

func (e *NoPermissionError) Error() string {
	return fmt.Sprintf("vCenter %q refused to read %s: the CCM's user lacks the privilege %s on it (grant the CCM's role, propagated, on the VM's folder or datacenter)",
		e.VCenter, e.Object, e.Privilege)
}

// ExistsByRefError: a read of a VM's reference found the VM, though no
// view and no search by BIOS UUID shows it.
type ExistsByRefError struct {
	VCenter string
	Ref     types.ManagedObjectReference
	Name    string
}

func (e *ExistsByRefError) Error() string {
	return fmt.Sprintf("vCenter %q still has VM %s (%s), read by its reference, though no view or search by BIOS UUID shows it (its BIOS UUID may have changed, or the CCM's user may not see it): check the VM's BIOS UUID and the CCM's permissions on it, or delete the Node yourself if it no longer runs on that VM",
		e.VCenter, e.Ref.Value, e.Name)
}

// ReadByRef reads the VM with reference ref (its value, as "vm-123") in
// vcenter directly, within SearchTimeout: the one proof that a VM no
// views or searches show is gone. It returns an error wrapping ErrGone
// when vCenter answers ManagedObjectNotFound for ref, an
// *ExistsByRefError when the VM is there, a *NoPermissionError when
// vCenter refuses the read, and any other error (a vCenter down or
// silent, a fault about another object) as it is: each of those proves
// nothing.
func (inv *Inventory) ReadByRef(ctx context.Context, vcenterName, ref string) error {
	ix := inv.Index(vcenterName)
	if ix == nil {
		return fmt.Errorf("vCenter %q is not configured", vcenterName)
	}
	mor := types.ManagedObjectReference{Type: "VirtualMachine", Value: ref}
	ctx, cancel := context.WithTimeout(ctx, inv.opts.SearchTimeout)
	defer cancel()
	var m mo.VirtualMachine
	err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		return property.DefaultCollector(s.VIM).RetrieveOne(ctx, mor, []string{"name"}, &m)
	})
	if err == nil {
		return &ExistsByRefError{VCenter: vcenterName, Ref: mor, Name: m.Name}
	}
	var nf *types.ManagedObjectNotFound
	if _, ok := fault.As(err, &nf); ok && nf.Obj.Type == mor.Type && nf.Obj.Value == mor.Value { // about this very object (ServerGUID aside)
		return fmt.Errorf("vCenter %q: read of VM %s: %w", vcenterName, ref, ErrGone)
	}
	var np *types.NoPermission
	if _, ok := fault.As(err, &np); ok {
		e := &NoPermissionError{VCenter: vcenterName, Object: mor, Privilege: np.PrivilegeId}
		if np.Object != nil {
			e.Object = *np.Object
		}
		return e
	}
	return fmt.Errorf("vCenter %q: read of VM %s by its reference: %w", vcenterName, ref, err)
}
