package vcsim

import (
	"context"
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Clone clones the VM src in its folder as name, as an administrator
// would: with a BIOS UUID of its own, or with uuid when it is set (a
// clone that keeps its source's identity, as a restored or imported copy
// may). It returns the clone.
func (v *VCenter) Clone(ctx context.Context, src types.ManagedObjectReference, name, uuid string) (types.ManagedObjectReference, error) {
	vm := object.NewVirtualMachine(v.admin, src)
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, src, []string{"parent"}, &m); err != nil {
		return types.ManagedObjectReference{}, err
	}
	if m.Parent == nil {
		return types.ManagedObjectReference{}, fmt.Errorf("VM %s has no folder", src.Value)
	}
	spec := types.VirtualMachineCloneSpec{}
	if uuid != "" {
		spec.Config = &types.VirtualMachineConfigSpec{Uuid: uuid}
	}
	task, err := vm.Clone(ctx, object.NewFolder(v.admin, *m.Parent), name, spec)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	ref, ok := info.Result.(types.ManagedObjectReference)
	if !ok {
		return types.ManagedObjectReference{}, fmt.Errorf("clone of %s: the task returned %T", src.Value, info.Result)
	}
	return ref, nil
}
