package inventory

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Client is the part of *vcenter.Client the inventory uses.
type Client interface {
	Name() string
	Config() config.VCenter
	Health() vcenter.Health
	HealthChanged() <-chan struct{}
	Do(ctx context.Context, fn func(context.Context, *vcenter.Session) error) error
}

// Index is the inventory of one vCenter.
type Index struct {
	client Client
	log    klog.Logger

	mu        sync.RWMutex
	data      *data
	synced    bool          // a full read has completed once
	resyncing bool          // a full read is under way after a new session or a lost collector
	syncErr   error         // the last update round failed
	syncedAt  time.Time     // last successful update round
	syncedCh  chan struct{} // closed at the next completed full read, then replaced
}

type ref = types.ManagedObjectReference

// data is one consistent copy of a vCenter's inventory.
type data struct {
	vms     map[ref]*VM
	objects map[ref]*Object
	byUUID  map[string][]ref
	byIUUID map[string][]ref
	byName  map[string][]ref
	byHost  map[string][]ref // guest host name, lower case
}

func newData() *data {
	return &data{vms: map[ref]*VM{}, objects: map[ref]*Object{}, byUUID: map[string][]ref{},
		byIUUID: map[string][]ref{}, byName: map[string][]ref{}, byHost: map[string][]ref{}}
}

// NewIndex returns an empty index for one vCenter; Run fills it.
func NewIndex(c Client) *Index {
	return &Index{client: c, data: newData(), log: klog.Background(), syncedCh: make(chan struct{})}
}

// VCenter is the name of the vCenter.
func (ix *Index) VCenter() string { return ix.client.Name() }

// Status says whether the index can be trusted to say "absent": it has
// completed a full read, is not re-reading after a new session, the last
// update round succeeded, and the vCenter is not down. The error explains
// why not.
func (ix *Index) Status() (complete bool, syncedAt time.Time, err error) {
	ix.mu.RLock()
	synced, resyncing, serr, at := ix.synced, ix.resyncing, ix.syncErr, ix.syncedAt
	ix.mu.RUnlock()
	h := ix.client.Health()
	switch {
	case h.State == vcenter.Down:
		vc := ix.client.Config()
		return false, at, &vcenter.UnavailableError{VCenter: vc.Name, Address: vc.Address(), Since: h.Since, Cause: h.LastError}
	case serr != nil:
		return false, at, fmt.Errorf("vCenter %q: inventory not current: %w", ix.VCenter(), serr)
	case !synced:
		return false, at, fmt.Errorf("vCenter %q: inventory not synced yet", ix.VCenter())
	case resyncing:
		return false, at, fmt.Errorf("vCenter %q: inventory being read again after a new session; absence cannot be proven until it completes", ix.VCenter())
	}
	return true, at, nil
}

// answers reports whether a VM found in the index may be returned: the
// index has been read once and the vCenter is not down. (Absence needs
// more: see Status.)
func (ix *Index) answers() bool {
	return ix.HasSynced() && ix.client.Health().State != vcenter.Down
}

// Synced returns a channel closed when the index next becomes current:
// a full read completes, or updates resume after a failure.
func (ix *Index) Synced() <-chan struct{} {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.syncedCh
}

// HasSynced reports whether a full read has completed once.
func (ix *Index) HasSynced() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.synced
}

// WaitSynced waits until the index has completed a full read once, or
// ctx ends.
func (ix *Index) WaitSynced(ctx context.Context) error {
	for {
		ch := ix.Synced()
		if ix.HasSynced() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("inventory of vCenter %q not synced: %w", ix.VCenter(), ctx.Err())
		}
	}
}

// currentLocked records a successful update round; if the index was
// failing, it is current again and Synced fires.
func (ix *Index) currentLocked() {
	failing := ix.syncErr != nil
	ix.syncErr = nil
	ix.syncedAt = time.Now()
	if failing && ix.synced && !ix.resyncing {
		ix.notifyLocked()
	}
}

func (ix *Index) notifyLocked() {
	close(ix.syncedCh)
	ix.syncedCh = make(chan struct{})
}

// Len is the number of VMs known.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.data.vms)
}

// VMs returns every VM (not templates), sorted by name.
func (ix *Index) VMs() []VM {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]VM, 0, len(ix.data.vms))
	for _, vm := range ix.data.vms {
		if !vm.Template {
			out = append(out, ix.data.complete(ix.VCenter(), vm))
		}
	}
	slices.SortFunc(out, func(a, b VM) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// VM returns a known VM by reference.
func (ix *Index) VM(r types.ManagedObjectReference) (VM, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	vm, ok := ix.data.vms[r]
	if !ok || vm.Template {
		return VM{}, false
	}
	return ix.data.complete(ix.VCenter(), vm), true
}

// Object returns a known host, cluster, folder, datacenter or pool.
func (ix *Index) Object(r types.ManagedObjectReference) (Object, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	o, ok := ix.data.objects[r]
	if !ok {
		return Object{}, false
	}
	return *o, true
}

// Objects returns every host, cluster, folder, datacenter and pool.
func (ix *Index) Objects() []Object {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]Object, 0, len(ix.data.objects))
	for _, o := range ix.data.objects {
		out = append(out, *o)
	}
	return out
}

// Refs returns the reference of every object and every VM (not
// templates), unordered: what tags can be attached to.
func (ix *Index) Refs() []types.ManagedObjectReference {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]types.ManagedObjectReference, 0, len(ix.data.objects)+len(ix.data.vms))
	for r := range ix.data.objects {
		out = append(out, r)
	}
	for r, vm := range ix.data.vms {
		if !vm.Template {
			out = append(out, r)
		}
	}
	return out
}

// lookup returns the VMs whose key (in the named map) is one of keys.
func (ix *Index) lookup(which func(*data) map[string][]ref, keys ...string) []VM {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []VM
	seen := map[ref]bool{}
	for _, k := range keys {
		for _, r := range which(ix.data)[k] {
			if vm := ix.data.vms[r]; vm != nil && !vm.Template && !seen[r] {
				seen[r] = true
				out = append(out, ix.data.complete(ix.VCenter(), vm))
			}
		}
	}
	return out
}

// complete copies vm with VCenter and Datacenter filled in.
func (d *data) complete(vc string, vm *VM) VM {
	out := *vm
	out.VCenter = vc
	out.NICs = slices.Clone(vm.NICs)
	if dc, ok := d.datacenterOf(vm.Folder); ok {
		out.Datacenter = dc
	}
	return out
}

func (d *data) datacenterOf(r ref) (string, bool) {
	for range 64 { // bounded: a corrupt parent loop cannot hang us
		o, ok := d.objects[r]
		if !ok {
			return "", false
		}
		if r.Type == "Datacenter" {
			return o.Name, true
		}
		r = o.Parent
	}
	return "", false
}

// Ancestors returns the chain of objects from r (included) up to the root,
// as far as the index knows it.
func (ix *Index) Ancestors(r types.ManagedObjectReference) []Object {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []Object
	for range 64 {
		o, ok := ix.data.objects[r]
		if !ok {
			return out
		}
		out = append(out, *o)
		r = o.Parent
	}
	return out
}

// put adds or replaces a VM, keeping the key maps right.
func (d *data) putVM(r ref, vm *VM) {
	if old := d.vms[r]; old != nil {
		d.unindex(r, old)
	}
	d.vms[r] = vm
	d.index(r, vm)
}

func (d *data) deleteVM(r ref) {
	if old := d.vms[r]; old != nil {
		d.unindex(r, old)
		delete(d.vms, r)
	}
}

func (d *data) index(r ref, vm *VM) {
	add := func(m map[string][]ref, k string) {
		if k != "" {
			m[k] = append(m[k], r)
		}
	}
	add(d.byUUID, vm.UUID)
	add(d.byIUUID, vm.InstanceUUID)
	add(d.byName, vm.Name)
	add(d.byHost, strings.ToLower(vm.GuestHostname))
}

func (d *data) unindex(r ref, vm *VM) {
	del := func(m map[string][]ref, k string) {
		if k == "" {
			return
		}
		list := slices.DeleteFunc(m[k], func(x ref) bool { return x == r })
		if len(list) == 0 {
			delete(m, k)
		} else {
			m[k] = list
		}
	}
	del(d.byUUID, vm.UUID)
	del(d.byIUUID, vm.InstanceUUID)
	del(d.byName, vm.Name)
	del(d.byHost, strings.ToLower(vm.GuestHostname))
}

// apply applies property collector updates.
func (d *data) apply(updates []types.ObjectUpdate) {
	for _, u := range updates {
		r := u.Obj
		if u.Kind == types.ObjectUpdateKindLeave {
			if r.Type == "VirtualMachine" {
				d.deleteVM(r)
			} else {
				delete(d.objects, r)
			}
			continue
		}
		if r.Type == "VirtualMachine" {
			vm := &VM{Ref: r}
			if old := d.vms[r]; old != nil {
				c := *old
				vm = &c
			}
			for _, c := range u.ChangeSet {
				applyVM(vm, c)
			}
			d.putVM(r, vm)
			continue
		}
		o := d.objects[r]
		if o == nil {
			o = &Object{Ref: r}
			d.objects[r] = o
		}
		for _, c := range u.ChangeSet {
			switch c.Name {
			case "name":
				o.Name, _ = c.Val.(string)
			case "parent":
				o.Parent, _ = c.Val.(types.ManagedObjectReference)
			}
		}
	}
}

func applyVM(vm *VM, c types.PropertyChange) {
	switch c.Name {
	case "name":
		vm.Name, _ = c.Val.(string)
	case "parent":
		vm.Folder, _ = c.Val.(types.ManagedObjectReference)
	case "resourcePool":
		vm.ResourcePool, _ = c.Val.(types.ManagedObjectReference)
	case "config.uuid":
		s, _ := c.Val.(string)
		vm.UUID = strings.ToLower(s)
	case "config.instanceUuid":
		s, _ := c.Val.(string)
		vm.InstanceUUID = strings.ToLower(s)
	case "config.guestId":
		vm.GuestID, _ = c.Val.(string)
	case "config.template":
		vm.Template, _ = c.Val.(bool)
	case "config.hardware.numCPU":
		vm.NumCPU, _ = c.Val.(int32)
	case "config.hardware.memoryMB":
		vm.MemoryMB, _ = c.Val.(int32)
	case "guest.hostName":
		vm.GuestHostname, _ = c.Val.(string)
	case "guest.net":
		vm.NICs = nil
		if a, ok := c.Val.(types.ArrayOfGuestNicInfo); ok {
			vm.NICs = nicsOf(a.GuestNicInfo)
		}
	case "runtime.powerState":
		vm.PowerState, _ = c.Val.(types.VirtualMachinePowerState)
	case "runtime.host":
		vm.Host, _ = c.Val.(types.ManagedObjectReference)
	}
}

func nicsOf(in []types.GuestNicInfo) []NIC {
	out := make([]NIC, 0, len(in))
	for _, n := range in {
		nic := NIC{Network: n.Network, DeviceConfigID: n.DeviceConfigId, MAC: n.MacAddress}
		for _, s := range n.IpAddress {
			if a, err := netip.ParseAddr(s); err == nil {
				nic.IPs = append(nic.IPs, a.Unmap())
			}
		}
		out = append(out, nic)
	}
	return out
}

// vmProperties are the VM properties the index follows.
var vmProperties = []string{
	"name", "parent", "resourcePool", "config.uuid", "config.instanceUuid", "config.guestId",
	"config.template", "config.hardware.numCPU", "config.hardware.memoryMB",
	"guest.hostName", "guest.net", "runtime.powerState", "runtime.host",
}

// objectKinds are the container types whose name and parent are followed.
var objectKinds = []string{"HostSystem", "ClusterComputeResource", "ComputeResource", "Folder", "Datacenter", "ResourcePool"}
