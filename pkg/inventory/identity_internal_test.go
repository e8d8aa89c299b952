package inventory

import (
	"slices"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
)

// TestApplyIdentityChanges: what applyIdentity reports as a change and as
// findable. A VM new to the index is findable, and so is a VM (not a
// template) that gains a BIOS UUID, name or guest host name, or a template
// made a VM (a key lost, or a UUID in the other byte order, is not; a
// template whose config is unset stays a template); a
// new VM is a change only when it shares its BIOS UUID with another VM
// (not a template), and so is a VM joining, leaving or moving out of such
// a UUID. A re-sent identity or
// object (the simulator re-sends a whole view when it changes) is no
// change; a new, renamed or removed object is.
func TestApplyIdentityChanges(t *testing.T) {
	const a, b, c = "42000000-0000-4000-8000-00000000000a", "42000000-0000-4000-8000-00000000000b", "42000000-0000-4000-8000-00000000000c"
	vm := func(kind types.ObjectUpdateKind, r string, changes ...types.PropertyChange) types.ObjectUpdate {
		return types.ObjectUpdate{Kind: kind, Obj: types.ManagedObjectReference{Type: "VirtualMachine", Value: r}, ChangeSet: changes}
	}
	ident := func(name, uuid string, template bool) []types.PropertyChange {
		return []types.PropertyChange{{Name: "name", Val: name}, {Name: "config.uuid", Val: uuid}, {Name: "config.template", Val: template},
			{Name: "runtime.connectionState", Val: types.VirtualMachineConnectionStateConnected}}
	}
	host := func(kind types.ObjectUpdateKind, name string) types.ObjectUpdate {
		u := types.ObjectUpdate{Kind: kind, Obj: types.ManagedObjectReference{Type: "HostSystem", Value: "host-1"}}
		if kind != types.ObjectUpdateKindLeave {
			u.ChangeSet = []types.PropertyChange{{Name: "name", Val: name}, {Name: "parent", Val: types.ManagedObjectReference{Type: "ClusterComputeResource", Value: "domain-c1"}}}
		}
		return u
	}
	enter, modify, leave := types.ObjectUpdateKindEnter, types.ObjectUpdateKindModify, types.ObjectUpdateKindLeave
	steps := []struct {
		name     string
		update   types.ObjectUpdate
		changed  bool
		findable []string
	}{
		{"a new VM", vm(enter, "vm-1", ident("one", a, false)...), false, []string{"vm-1"}},
		{"another new VM", vm(enter, "vm-2", ident("two", b, false)...), false, []string{"vm-2"}},
		{"vm-1 re-sent", vm(enter, "vm-1", ident("one", a, false)...), false, nil},
		{"a clone keeping vm-1's UUID", vm(enter, "vm-3", ident("three", a, false)...), true, []string{"vm-3"}},
		{"the clone renamed", vm(modify, "vm-3", types.PropertyChange{Name: "name", Val: "trois"}), false, []string{"vm-3"}},
		{"the clone renamed, re-sent", vm(modify, "vm-3", types.PropertyChange{Name: "name", Val: "trois"}), false, nil},
		{"the clone given its own UUID", vm(modify, "vm-3", types.PropertyChange{Name: "config.uuid", Val: c}), true, []string{"vm-3"}},
		{"and vm-1's again", vm(modify, "vm-3", types.PropertyChange{Name: "config.uuid", Val: a}), true, []string{"vm-3"}},
		{"the clone made a template", vm(modify, "vm-3", types.PropertyChange{Name: "config.template", Val: true}), true, nil},
		{"the template leaves", vm(leave, "vm-3"), false, nil},
		{"a template with vm-1's UUID", vm(enter, "vm-4", ident("four", a, true)...), false, nil},
		{"vm-1 leaves, its UUID not shared", vm(leave, "vm-1"), false, nil},
		{"the template renamed", vm(modify, "vm-4", types.PropertyChange{Name: "name", Val: "vier"}), false, nil},
		{"the template made a VM", vm(modify, "vm-4", types.PropertyChange{Name: "config.template", Val: false}), false, []string{"vm-4"}},
		{"a VM whose UUID becomes readable", vm(enter, "vm-7", ident("seven", "", false)...), false, []string{"vm-7"}},
		{"its UUID read", vm(modify, "vm-7", types.PropertyChange{Name: "config.uuid", Val: c}), false, []string{"vm-7"}},
		{"its UUID unset (its files unreachable)", vm(modify, "vm-7", types.PropertyChange{Name: "config.uuid"}), false, nil},
		{"and read again", vm(modify, "vm-7", types.PropertyChange{Name: "config.uuid", Val: c}), false, []string{"vm-7"}},
		{"in the other byte order", vm(modify, "vm-7", types.PropertyChange{Name: "config.uuid", Val: SwapUUID(c)}), false, nil},
		{"its guest reports a host name", vm(modify, "vm-7", types.PropertyChange{Name: "guest.hostName", Val: "Seven.example"}), false, []string{"vm-7"}},
		{"in another case", vm(modify, "vm-7", types.PropertyChange{Name: "guest.hostName", Val: "seven.example"}), false, nil},
		{"VMware Tools stops", vm(modify, "vm-7", types.PropertyChange{Name: "guest.hostName", Val: ""}), false, nil},
		{"a template", vm(enter, "vm-8", ident("eight", "", true)...), false, nil},
		{"its config unset", vm(modify, "vm-8", types.PropertyChange{Name: "config.template"}), false, nil},
		{"made a VM", vm(modify, "vm-8", types.PropertyChange{Name: "config.template", Val: false}), false, []string{"vm-8"}},
		{"a twin of vm-2", vm(enter, "vm-5", ident("five", b, false)...), true, []string{"vm-5"}},
		{"the twin leaves", vm(leave, "vm-5"), true, nil},
		{"a twin of vm-2 in the other byte order", vm(enter, "vm-6", ident("six", SwapUUID(b), false)...), true, []string{"vm-6"}},
		{"it leaves", vm(leave, "vm-6"), true, nil},
		{"a new host", host(enter, "esx-1"), true, nil},
		{"the host re-sent", host(enter, "esx-1"), false, nil},
		{"the host renamed", host(modify, "esx-one"), true, nil},
		{"the host removed", host(leave, ""), true, nil},
	}
	d, page := newData(), newData() // page: as a full read's pages are applied
	for _, s := range steps {
		res := applyIdentity(d, s.update)
		changed, findable := res.changed, res.findable
		if changed != s.changed || !slices.Equal(findable, s.findable) {
			t.Errorf("%s: changed %v, findable %q; want %v, %q", s.name, changed, findable, s.changed, s.findable)
		}
		quiet := applied{changesOnly: true}
		page.applyIdentity(&quiet, []types.ObjectUpdate{s.update}, specOptions{})
		if quiet.changed != s.changed || quiet.findable != nil || quiet.left != nil || quiet.uuids != nil {
			t.Errorf("%s, as a page: changed %v, findable %q, left %q, UUIDs %v; want %v and nothing recorded",
				s.name, quiet.changed, quiet.findable, quiet.left, quiet.uuids, s.changed)
		}
	}
}

// applyIdentity applies updates to d as an increment, recording all.
func applyIdentity(d *data, updates ...types.ObjectUpdate) applied {
	var res applied
	d.applyIdentity(&res, updates, specOptions{})
	return res
}

// TestSharedElsewhere: the UUIDs a VM joined or left in one index are a
// change there when another index has a VM (not a template) with one of
// them, in either byte order; the UUIDs applyIdentity reports are those a
// VM (not a template) joined or left.
func TestSharedElsewhere(t *testing.T) {
	const a, b, c = "42000000-0000-4000-8000-00000000000a", "42000000-0000-4000-8000-00000000000b", "42000000-0000-4000-8000-00000000000c"
	key := func(s string) uuidKey { k, _ := parseUUID(s); return k }
	vm := func(kind types.ObjectUpdateKind, r, uuid string, template bool) types.ObjectUpdate {
		u := types.ObjectUpdate{Kind: kind, Obj: types.ManagedObjectReference{Type: "VirtualMachine", Value: r}}
		if kind != types.ObjectUpdateKindLeave {
			u.ChangeSet = []types.PropertyChange{{Name: "name", Val: r}, {Name: "config.uuid", Val: uuid}, {Name: "config.template", Val: template}}
		}
		return u
	}
	enter, modify, leave := types.ObjectUpdateKindEnter, types.ObjectUpdateKindModify, types.ObjectUpdateKindLeave
	here, there, third := &Index{store: newStore()}, &Index{store: newStore()}, &Index{store: newStore()}
	for _, ix := range []*Index{here, there, third} {
		ix.siblings = []*Index{here, there, third}
	}
	apply := func(ix *Index, u types.ObjectUpdate) (uuids []uuidKey) {
		ix.store.write(func(d *data) bool {
			uuids = applyIdentity(d, u).uuids
			return false
		})
		return uuids
	}
	apply(there, vm(enter, "vm-a", a, false))
	apply(third, vm(enter, "tmpl-b", b, true))

	for _, s := range []struct {
		name   string
		update types.ObjectUpdate
		uuids  []uuidKey
		shared bool
	}{
		{"a VM with its own UUID", vm(enter, "vm-1", c, false), []uuidKey{key(c)}, false},
		{"re-sent", vm(enter, "vm-1", c, false), nil, false},
		{"a copy of there's VM", vm(enter, "vm-2", a, false), []uuidKey{key(a)}, true},
		{"it leaves", vm(leave, "vm-2", "", false), []uuidKey{key(a)}, true},
		{"a copy in the other byte order", vm(enter, "vm-3", SwapUUID(a), false), []uuidKey{key(SwapUUID(a))}, true},
		{"made a template", vm(modify, "vm-3", SwapUUID(a), true), []uuidKey{key(SwapUUID(a))}, true},
		{"the template leaves", vm(leave, "vm-3", "", false), nil, false},
		{"a copy of the third's template", vm(enter, "vm-4", b, false), []uuidKey{key(b)}, false},
		{"vm-1 given there's UUID", vm(modify, "vm-1", a, false), []uuidKey{key(c), key(a)}, true},
	} {
		uuids := apply(here, s.update)
		if !slices.Equal(uuids, s.uuids) {
			t.Errorf("%s: UUIDs %v, want %v", s.name, uuids, s.uuids)
		}
		if got := here.sharedElsewhere(uuids); got != s.shared {
			t.Errorf("%s: shared elsewhere %v, want %v", s.name, got, s.shared)
		}
	}
}
