package inventory

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/vmware/govmomi/vim25/types"
)

// The data of an index and the functions that apply the property
// collector's updates to it: no locking, no requests (Index and the sync
// loop hold the lock and make the requests).

type ref = types.ManagedObjectReference

// data is one consistent copy of a vCenter's inventory.
type data struct {
	objects map[ref]*Object
	vms     map[string]*ident // every VM in scope, by reference value
	byUUID  multimap[uuidKey]
	byName  multimap[string]
	byHost  multimap[string]     // guest host name, lower case
	byIP    multimap[netip.Addr] // guest addresses (Options.GuestIPs)
	details map[string]*VM       // VMs of interest, by reference value
	// unreadable holds the VMs whose identity cannot be read (see
	// ident.unreadable), by reference value: while there is one, the
	// vCenter cannot prove any VM absent.
	unreadable map[string]*ident
	// fields names the custom attributes by key (Options.CustomAttributes).
	fields map[int32]string
}

func newData() *data {
	return &data{objects: map[ref]*Object{}, vms: map[string]*ident{}, byUUID: newMultimap[uuidKey](),
		byName: newMultimap[string](), byHost: newMultimap[string](), byIP: newMultimap[netip.Addr](), details: map[string]*VM{},
		unreadable: map[string]*ident{}, fields: map[int32]string{}}
}

// applied is what an update set changed in the data.
type applied struct {
	changed  bool     // details, identities or objects
	findable []string // VMs that became findable (see findKeys)
	left     []string // VMs that left it
	detailed []string // VMs whose details were updated (changed or not)
	// uuids are the BIOS UUIDs that a VM (not a template) joined or left:
	// where another vCenter has a VM with one of them, its lookups became
	// ambiguous or answerable again (see Index.sharedElsewhere).
	uuids []uuidKey
	// changesOnly: only changed is recorded. A full read's pages are
	// applied to data installed as a whole, so which VMs they made
	// findable, removed or moved is not wanted, nor its garbage
	// (BenchmarkApplyIdentity: 0.85 of 4.6 MB per 10,000 VMs).
	changesOnly bool
}

// madeFindable records VM r as findable (see findKeys).
func (a *applied) madeFindable(r string) {
	if !a.changesOnly {
		a.findable = append(a.findable, r)
	}
}

// gone records that VM r left the scope.
func (a *applied) gone(r string) {
	if !a.changesOnly {
		a.left = append(a.left, r)
	}
}

// movedUUID records that a VM (not a template) joined or left BIOS UUID k.
func (a *applied) movedUUID(k uuidKey) {
	if !a.changesOnly && k != (uuidKey{}) {
		a.uuids = append(a.uuids, k)
	}
}

// apply applies an update set: the filter details's updates to the
// details, the others to identities and objects.
func (d *data) apply(set *types.UpdateSet, details ref, o specOptions) applied {
	var res applied
	d.applyTo(&res, set, details, o)
	return res
}

// applyPage applies a page of a full read. Nothing is recorded: the read
// is installed as a whole when its last page arrives (installFullRead).
func (d *data) applyPage(set *types.UpdateSet, details ref, o specOptions) {
	d.applyTo(&applied{changesOnly: true}, set, details, o)
}

// applyTo applies an update set (see apply), recording into res.
func (d *data) applyTo(res *applied, set *types.UpdateSet, details ref, o specOptions) {
	for _, fs := range set.FilterSet {
		if fs.Filter == details {
			for _, u := range fs.ObjectSet {
				res.changed = d.applyDetails(u) || res.changed
				if !res.changesOnly {
					res.detailed = append(res.detailed, u.Obj.Value)
				}
			}
			continue
		}
		d.applyIdentity(res, fs.ObjectSet, o)
	}
}

// dropStrayDetails deletes the details of VMs not in scope.
func (d *data) dropStrayDetails() {
	for r := range d.details {
		if d.vms[r] == nil {
			delete(d.details, r)
		}
	}
}

func (d *data) complete(vc string, vm *VM) VM {
	out := *vm
	out.VCenter = vc
	out.NICs = slices.Clone(vm.NICs)
	if dc, ok := d.datacenterOf(vm.Folder); ok {
		out.Datacenter = dc
	}
	out.Attributes = nil
	for k, v := range vm.attrs {
		if name, ok := d.fields[k]; ok {
			if out.Attributes == nil {
				out.Attributes = map[string]string{}
			}
			out.Attributes[name] = v
		}
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

func (d *data) index(id *ident) {
	if id.unreadable() != "" {
		d.unreadable[id.ref] = id
	}
	if id.uuid != (uuidKey{}) {
		d.byUUID.add(id.uuid, id)
	}
	if id.name != "" {
		d.byName.add(id.name, id)
	}
	if id.host != "" {
		d.byHost.add(id.host, id)
	}
	for _, ip := range id.ips {
		d.byIP.add(ip, id)
	}
}

// sharedUUID reports whether id is a VM (not a template) whose BIOS UUID
// another VM in the index has: lookups of that UUID are ambiguous. A VM
// that joins or leaves such a UUID is a change of the index, though it is
// not followed: a clone that keeps its source's UUID must reach the Node
// of the source at once, not at the next resync.
func (d *data) sharedUUID(id *ident) bool {
	return !id.template && d.vmsWithUUID(id.uuid) >= 2
}

// vmsWithUUID counts the VMs (not templates) that a lookup of BIOS UUID k
// finds (either byte order), up to 2.
func (d *data) vmsWithUUID(k uuidKey) int {
	if k == (uuidKey{}) {
		return 0
	}
	n := 0
	for id := range k.lookup().each(d) {
		if !id.template {
			if n++; n == 2 {
				break
			}
		}
	}
	return n
}

func (d *data) unindex(id *ident) {
	delete(d.unreadable, id.ref)
	if id.uuid != (uuidKey{}) {
		d.byUUID.remove(id.uuid, id)
	}
	if id.name != "" {
		d.byName.remove(id.name, id)
	}
	if id.host != "" {
		d.byHost.remove(id.host, id)
	}
	for _, ip := range id.ips {
		d.byIP.remove(ip, id)
	}
}

// applyIdentity applies updates of the filter over every VM and object:
// identities, names and parents; with o.allDetails, the VMs' details too.
// It reports whether details, other objects (hosts, clusters and their
// groups, folders), a BIOS UUID that two VMs share (one entered, left, or
// took or gave up the UUID: the lookups of that UUID become ambiguous or
// answerable again) or, with o.guestIPs, a VM's guest addresses changed,
// the VMs that became findable (see findKeys), the VMs that left and the
// UUIDs VMs joined or left, into res (not its detailed). Guest
// addresses are kept with the identity only with o.guestIPs (with
// o.allDetails, guest.net arrives here too).
func (d *data) applyIdentity(res *applied, updates []types.ObjectUpdate, o specOptions) {
	changed := res.changed
	for _, u := range updates {
		r := u.Obj
		if r.Type == "VirtualMachine" {
			if u.Kind == types.ObjectUpdateKindLeave {
				res.gone(r.Value)
				if id := d.vms[r.Value]; id != nil {
					changed = changed || d.sharedUUID(id) // its twins are answerable again
					if !id.template {
						res.movedUUID(id.uuid)
					}
					d.unindex(id)
					delete(d.vms, r.Value)
				}
				if _, ok := d.details[r.Value]; ok {
					delete(d.details, r.Value)
					changed = true
				}
				continue
			}
			id := d.vms[r.Value]
			isNew := id == nil
			var was findKeys // before the update
			if isNew {
				id = &ident{ref: r.Value}
				d.vms[r.Value] = id
			} else {
				was = id.keys()
				d.unindex(id)
			}
			ips := id.ips
			for _, c := range u.ChangeSet {
				if c.Name == "guest.net" && !o.guestIPs {
					continue
				}
				if o.kubeletKey != "" && c.Name == o.kubeletKey {
					key := strings.TrimSpace(optionString(c.Val))
					changed = changed || key != id.kubeletKey // a request waiting for it is retried
					id.kubeletKey = key
					continue
				}
				if o.nodeName != "" && c.Name == o.nodeName {
					name := strings.TrimSpace(optionString(c.Val))
					changed = changed || name != id.nodeName
					id.nodeName = name
					continue
				}
				applyIdent(id, c)
			}
			// Who reports an address changed: a request waiting for it
			// (serving certificates) is retried.
			changed = changed || (o.guestIPs && !slices.Equal(ips, id.ips))
			d.index(id)
			now := id.keys()
			// The other byte order is the same UUID to lookups.
			movedUUID := now.uuid != was.uuid && now.uuid != was.uuid.swap()
			if isNew || movedUUID || now.template != was.template {
				// The VM joined a UUID's VMs, or moved from one UUID's to
				// another's: a change where either is shared. A re-sent
				// identity (the simulator re-sends a whole view when it
				// changes) changes nothing.
				changed = changed || d.sharedUUID(id) || (!isNew && !was.template && d.vmsWithUUID(was.uuid) >= 1)
				for _, k := range []findKeys{was, now} {
					if !k.template {
						res.movedUUID(k.uuid)
					}
				}
			}
			if now.gained(was) {
				res.madeFindable(r.Value)
			}
			if o.allDetails {
				changed = d.applyDetails(u) || changed
			}
			continue
		}
		if r.Type == "CustomFieldsManager" {
			changed = true
			for _, c := range u.ChangeSet {
				if c.Name == "field" {
					d.fields = fieldsOf(c.Val)
				}
			}
			continue
		}
		if u.Kind == types.ObjectUpdateKindLeave {
			delete(d.objects, r)
			changed = true
			continue
		}
		o := d.objects[r]
		var was Object
		if o == nil {
			o = &Object{Ref: r}
			d.objects[r] = o
			changed = true
		} else {
			was = *o
		}
		for _, c := range u.ChangeSet {
			switch c.Name {
			case "name":
				o.Name, _ = c.Val.(string)
			case "parent":
				o.Parent, _ = c.Val.(types.ManagedObjectReference)
			case "configurationEx":
				o.Groups = clusterGroupsOf(c.Val)
			}
		}
		// A re-sent object (the simulator re-sends a whole view when it
		// changes) changes nothing.
		changed = changed || o.Name != was.Name || o.Parent != was.Parent || !reflect.DeepEqual(o.Groups, was.Groups)
	}
	res.changed = changed
}

// keepRead keeps the details of VM r read directly (props), unless the
// data has its details already (the collector's are as new or newer) or
// no longer holds the VM; it reports whether it kept them. They stay
// until the collector's first update of the VM replaces them.
func (d *data) keepRead(r string, props []types.DynamicProperty) bool {
	if _, ok := d.details[r]; ok || d.vms[r] == nil {
		return false
	}
	d.applyDetails(types.ObjectUpdate{Kind: types.ObjectUpdateKindEnter,
		Obj: types.ManagedObjectReference{Type: "VirtualMachine", Value: r}, ChangeSet: assignments(props)})
	return true
}

// applyDetails applies one update of a VM's details (the list view's
// filter, or the single filter with allDetails) and reports whether they
// changed. The list view's enter of a VM whose details a direct read kept
// moments before (a Node's lookup, a read ahead) usually changes nothing:
// it is no change, so that the controllers that re-observe every Node on
// a change (nodetopology) do not pass over thousands of Nodes for each
// list view growth.
func (d *data) applyDetails(u types.ObjectUpdate) bool {
	r := u.Obj
	old, had := d.details[r.Value]
	if u.Kind == types.ObjectUpdateKindLeave {
		delete(d.details, r.Value)
		return had
	}
	var before VM
	if had {
		// A shallow copy is a snapshot: applyVM replaces slices and
		// maps, never writes into them.
		before = *old
	}
	vm := old
	if !had || u.Kind == types.ObjectUpdateKindEnter {
		// All of its properties: nothing of an earlier copy (a direct
		// read) may outlive a property now unset.
		vm = &VM{Ref: r}
		d.details[r.Value] = vm
	}
	for _, c := range u.ChangeSet {
		applyVM(vm, c)
	}
	return !had || !reflect.DeepEqual(&before, vm)
}

func applyIdent(id *ident, c types.PropertyChange) {
	switch c.Name {
	case "name":
		id.name, _ = c.Val.(string)
	case "config.uuid":
		s, _ := c.Val.(string)
		id.uuid, _ = parseUUID(s)
	case "config.template":
		// Unset with the rest of config when the VM's files cannot be
		// reached: a template stays one.
		if b, ok := c.Val.(bool); ok {
			id.template = b
		}
	case "guest.hostName":
		s, _ := c.Val.(string)
		id.host = strings.ToLower(s)
	case "guest.net":
		id.ips = guestIPs(c.Val)
	case "runtime.connectionState":
		st, _ := c.Val.(types.VirtualMachineConnectionState)
		id.lost = st == types.VirtualMachineConnectionStateInaccessible ||
			st == types.VirtualMachineConnectionStateOrphaned || st == types.VirtualMachineConnectionStateInvalid
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
		if b, ok := c.Val.(bool); ok { // unset: kept, as for the identity
			vm.Template = b
		}
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
	case propMetadata:
		vm.Metadata = optionString(c.Val)
	case propMetadataEncoding:
		vm.MetadataEncoding = optionString(c.Val)
	case "runtime.powerState":
		vm.PowerState, _ = c.Val.(types.VirtualMachinePowerState)
	case "runtime.connectionState":
		vm.ConnectionState, _ = c.Val.(types.VirtualMachineConnectionState)
	case "runtime.host":
		vm.Host, _ = c.Val.(types.ManagedObjectReference)
	case "customValue":
		vm.attrs = nil
		if a, ok := c.Val.(types.ArrayOfCustomFieldValue); ok {
			for _, v := range a.CustomFieldValue {
				if s, ok := v.(*types.CustomFieldStringValue); ok {
					if vm.attrs == nil {
						vm.attrs = map[int32]string{}
					}
					vm.attrs[s.Key] = s.Value
				}
			}
		}
	}
}

// optionString is the string value of an extraConfig entry read by key
// (the property is the OptionValue; unset keys have none).
func optionString(val any) string {
	if o := asPointer[types.OptionValue](val); o != nil {
		s, _ := o.Value.(string)
		return s
	}
	return ""
}

// asPointer returns a property value as *T, whether the property
// collector gave the value or a pointer to it; nil for anything else.
func asPointer[T any](v any) *T {
	switch x := v.(type) {
	case T:
		return &x
	case *T:
		return x
	}
	return nil
}

// fieldsOf reads the custom attribute definitions of the
// CustomFieldsManager (its field property), by key.
func fieldsOf(val any) map[int32]string {
	out := map[int32]string{}
	if a, ok := val.(types.ArrayOfCustomFieldDef); ok {
		for _, f := range a.CustomFieldDef {
			out[f.Key] = f.Name
		}
	}
	return out
}

// guestIPs are the distinct addresses of a guest.net value on the VM's
// virtual adapters, unmapped and without zone, sorted; nil for none.
// Guest-only adapters (deviceConfigId -1: kube-ipvs0 with every Service
// IP, docker0, cni bridges) are left out, as are loopback, link-local,
// multicast and unspecified addresses: no Node address is ever chosen
// from them, and on a Node they hold addresses every Node shares, which
// would cost memory per Node and per Service and make each such address
// a list of every Node's VM.
func guestIPs(val any) []netip.Addr {
	a, ok := val.(types.ArrayOfGuestNicInfo)
	if !ok {
		return nil
	}
	var out []netip.Addr
	for _, n := range a.GuestNicInfo {
		if n.DeviceConfigId == -1 {
			continue
		}
		for _, text := range n.IpAddress {
			ip, err := netip.ParseAddr(text)
			if err != nil {
				continue
			}
			ip = ip.Unmap().WithZone("")
			if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
				continue
			}
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Clip(slices.Compact(out))
}

func nicsOf(in []types.GuestNicInfo) []NIC {
	out := make([]NIC, 0, len(in))
	for _, n := range in {
		nic := NIC{Network: n.Network, DeviceConfigID: n.DeviceConfigId, MAC: n.MacAddress}
		nic.IPs = slices.Clone(n.IpAddress)
		out = append(out, nic)
	}
	return out
}
