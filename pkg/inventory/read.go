package inventory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// The requests a lookup makes itself, outside the collector: searches of
// vCenters whose index is not current, and reads of the details of VMs
// the collector does not follow yet.

// searchUUID asks the vCenter for VMs with one of the BIOS UUIDs.
func (ix *Index) searchUUID(ctx context.Context, uuids []string) ([]VM, error) {
	return ix.search(ctx, func(ctx context.Context, si *object.SearchIndex) ([]object.Reference, error) {
		var refs []object.Reference
		for _, u := range uuids {
			r, err := si.FindByUuid(ctx, nil, u, true, types.NewBool(false))
			if err != nil {
				return nil, err
			}
			if r != nil {
				refs = append(refs, r)
			}
		}
		return refs, nil
	})
}

// searchDNSName asks the vCenter for VMs whose guest host name is name.
func (ix *Index) searchDNSName(ctx context.Context, name string) ([]VM, error) {
	return ix.search(ctx, func(ctx context.Context, si *object.SearchIndex) ([]object.Reference, error) {
		return si.FindAllByDnsName(ctx, nil, name, true)
	})
}

// search runs a SearchIndex query and reads the VMs it finds (in scope)
// with the batch reader, so that lookups searching together share their
// reads.
func (ix *Index) search(ctx context.Context, find func(context.Context, *object.SearchIndex) ([]object.Reference, error)) ([]VM, error) {
	var refs []object.Reference
	err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		var err error
		refs, err = find(ctx, object.NewSearchIndex(s.VIM))
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []VM
	for _, r := range refs {
		vm, ok, err := ix.fetch(ctx, r.Reference())
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, vm)
		}
	}
	return out, nil
}

// fetch reads one VM found by a search; ok is false for templates, VMs
// outside the configured datacenters and VMs gone since. Its datacenter
// comes from the objects the index knows, or, for a VM in a folder newer
// than those, from its ancestry (one more request).
func (ix *Index) fetch(ctx context.Context, r types.ManagedObjectReference) (VM, bool, error) {
	props, err := ix.reader.get(ctx, r.Value)
	if err != nil {
		return VM{}, false, fmt.Errorf("read the details of VM %s: %w", r.Value, err)
	}
	if props == nil {
		return VM{}, false, nil // gone since the search
	}
	vm := VM{Ref: r, VCenter: ix.VCenter()}
	for _, c := range assignments(props) {
		applyVM(&vm, c)
	}
	if vm.Template {
		return VM{}, false, nil
	}
	var (
		dc    string
		known bool
	)
	ix.store.read(func(d *data) {
		dc, known = d.datacenterOf(vm.Folder)
		vm = d.complete(ix.VCenter(), &vm) // custom attribute names
	})
	if !known {
		if dc, err = ix.datacenterOf(ctx, r); err != nil {
			return VM{}, false, fmt.Errorf("read the ancestry of VM %s: %w", r.Value, err)
		}
	}
	vm.Datacenter = dc
	if dcs := ix.DatacenterNames(); len(dcs) > 0 && !slices.Contains(dcs, dc) {
		return VM{}, false, nil
	}
	return vm, true, nil
}

// datacenterOf asks the vCenter for the name of the datacenter above r.
func (ix *Index) datacenterOf(ctx context.Context, r types.ManagedObjectReference) (string, error) {
	var dc string
	err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		chain, err := mo.Ancestors(ctx, s.VIM, s.VIM.ServiceContent.PropertyCollector, r)
		if err != nil {
			return err
		}
		for _, e := range chain {
			if e.Self.Type == "Datacenter" {
				dc = e.Name
			}
		}
		return nil
	})
	return dc, err
}

// retrieveVMs reads the detail properties of VMs in one request, by
// reference value (a VM that returns nothing is left out).
func retrieveVMs(ctx context.Context, s *vcenter.Session, refs []types.ManagedObjectReference, o specOptions) (map[string][]types.DynamicProperty, error) {
	res, err := property.DefaultCollector(s.VIM).RetrieveProperties(ctx, types.RetrieveProperties{
		This: s.VIM.ServiceContent.PropertyCollector, SpecSet: []types.PropertyFilterSpec{vmsSpec(refs, o)}})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]types.DynamicProperty, len(res.Returnval))
	for _, oc := range res.Returnval {
		out[oc.Obj.Value] = oc.PropSet
	}
	return out, nil
}

// readDetails reads the details of VMs in one request; a VM that no
// longer exists is left out. When one of several is gone (the vCenter
// then fails the whole request), each is read on its own.
func (ix *Index) readDetails(ctx context.Context, refs []string) (map[string][]types.DynamicProperty, error) {
	vms := make([]types.ManagedObjectReference, len(refs))
	for i, r := range refs {
		vms[i] = types.ManagedObjectReference{Type: "VirtualMachine", Value: r}
	}
	var out map[string][]types.DynamicProperty
	err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		var err error
		out, err = retrieveVMs(ctx, s, vms, ix.specOptions())
		switch {
		case err == nil:
			return nil
		case !fault.Is(err, &types.ManagedObjectNotFound{}):
			return err
		case len(vms) == 1:
			out = nil // gone
			return nil
		}
		out = map[string][]types.DynamicProperty{}
		for _, vm := range vms { // one of them is gone: read each
			one, err := retrieveVMs(ctx, s, []types.ManagedObjectReference{vm}, ix.specOptions())
			if err != nil && !fault.Is(err, &types.ManagedObjectNotFound{}) {
				return err
			}
			maps.Copy(out, one)
		}
		return nil
	})
	return out, err
}

// readAndKeep reads the details of VMs in one request (readDetails) and
// keeps those of the VMs of interest the index holds without details,
// until the collector's first update of each replaces them: a lookup, or
// a read ahead nobody waits for, then finds them in the data.
func (ix *Index) readAndKeep(ctx context.Context, refs []string) (map[string][]types.DynamicProperty, error) {
	out, err := ix.readDetails(ctx, refs)
	if err != nil || len(out) == 0 {
		return out, err
	}
	keep := ix.interest.of(slices.Collect(maps.Keys(out)))
	if len(keep) == 0 {
		return out, nil
	}
	var kept []string
	ix.store.write(func(d *data) bool {
		for _, r := range keep {
			if d.keepRead(r, out[r]) {
				kept = append(kept, r)
			}
		}
		return false
	})
	// Followed from now on, also a VM that left and came back since
	// interest.of: details kept must never go stale.
	ix.interest.want(kept...)
	return out, nil
}

// assignments turns retrieved properties into the changes of an update.
func assignments(props []types.DynamicProperty) []types.PropertyChange {
	out := make([]types.PropertyChange, len(props))
	for i, p := range props {
		out[i] = types.PropertyChange{Name: p.Name, Val: p.Val, Op: types.PropertyChangeOpAssign}
	}
	return out
}

// LivePower is a VM's power and connection state and BIOS UUID as its
// vCenter reports them now.
type LivePower struct {
	PowerState      types.VirtualMachinePowerState
	ConnectionState types.VirtualMachineConnectionState
	UUID            string // lower case
}

// ReadPower asks vm's vCenter directly (one request, within SearchTimeout)
// for its power state, connection state and BIOS UUID: the live check
// before an action the index alone must not decide (the out-of-service
// taint). A VM that no longer exists is an error.
func (inv *Inventory) ReadPower(ctx context.Context, vm VM) (LivePower, error) {
	ix := inv.Index(vm.VCenter)
	if ix == nil {
		return LivePower{}, fmt.Errorf("vCenter %q is not configured", vm.VCenter)
	}
	ctx, cancel := context.WithTimeout(ctx, inv.opts.SearchTimeout)
	defer cancel()
	var out LivePower
	err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		var m mo.VirtualMachine
		if err := property.DefaultCollector(s.VIM).RetrieveOne(ctx, vm.Ref,
			[]string{"runtime.powerState", "runtime.connectionState", "config.uuid"}, &m); err != nil {
			return err
		}
		out = LivePower{PowerState: m.Runtime.PowerState, ConnectionState: m.Runtime.ConnectionState}
		if m.Config != nil {
			out.UUID = strings.ToLower(m.Config.Uuid)
		}
		return nil
	})
	if err != nil {
		return LivePower{}, fmt.Errorf("vCenter %q: live read of VM %s: %w", vm.VCenter, vm.Location(), err)
	}
	return out, nil
}
