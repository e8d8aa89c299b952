package collectorxml

import (
	"reflect"
	"slices"
	"testing"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"github.com/vmware/govmomi/vim25/xml"
)

// TestPlansAgreeWithTypeInfo: for every vSphere data type reachable from
// the managed objects' properties, a plan reads the same elements into
// the same fields as govmomi's decoder (its xml.GetTypeInfo), or there is
// no plan and the type is left to that decoder.
func TestPlansAgreeWithTypeInfo(t *testing.T) {
	roots := []any{mo.VirtualMachine{}, mo.HostSystem{}, mo.ClusterComputeResource{}, mo.Datacenter{},
		mo.Folder{}, mo.ResourcePool{}, mo.Datastore{}, mo.Network{}, mo.DistributedVirtualPortgroup{},
		types.ArrayOfGuestNicInfo{}, types.OptionValue{}}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Array {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || seen[rt] {
			return
		}
		seen[rt] = true
		for i := range rt.NumField() {
			walk(rt.Field(i).Type)
		}
	}
	for _, r := range roots {
		walk(reflect.TypeOf(r))
	}
	d := New(types.TypeFunc())
	planned := 0
	for rt := range seen {
		pl := d.planFor(rt)
		if pl == nil {
			continue
		}
		planned++
		ti, err := xml.GetTypeInfo(rt)
		if err != nil {
			t.Errorf("%v: planned, but the decoder cannot read it: %v", rt, err)
			continue
		}
		if ti.XmlName != nil {
			t.Errorf("%v: planned, but it has an XMLName", rt)
		}
		if len(ti.FieldNames) != len(pl.fields) {
			t.Errorf("%v: %d fields planned, the decoder has %d (%v)", rt, len(pl.fields), len(ti.FieldNames), ti.FieldNames)
		}
		for _, key := range ti.FieldNames { // by Go name; the element's is the field info's
			name := ti.Fields[key].Name
			f := pl.fields[name]
			fi := reflect.ValueOf(ti.Fields[key])
			var idx []int
			for i := range fi.FieldByName("idx").Len() {
				idx = append(idx, int(fi.FieldByName("idx").Index(i).Int()))
			}
			const fElement, fMode = 1, 1<<7 - 1 // xml's flags: an element field, the mode bits
			switch {
			case f == nil:
				t.Errorf("%v: the decoder reads <%s>, no plan for it", rt, name)
			case !slices.Equal(f.index, idx):
				t.Errorf("%v: <%s> planned into field %v, the decoder reads it into %v", rt, name, f.index, idx)
			case fi.FieldByName("flags").Int()&fMode != fElement:
				t.Errorf("%v: <%s> is not an element field for the decoder (flags %b)", rt, name, fi.FieldByName("flags").Int())
			}
		}
	}
	if planned*10 < len(seen)*9 {
		t.Errorf("%d of %d types planned; want nine in ten at least", planned, len(seen))
	}
	for _, rt := range []reflect.Type{reflect.TypeFor[types.GuestNicInfo](), reflect.TypeFor[types.NetIpConfigInfoIpAddress](),
		reflect.TypeFor[types.OptionValue](), reflect.TypeFor[types.ArrayOfGuestNicInfo]()} {
		if d.planFor(rt) == nil {
			t.Errorf("%v not planned", rt)
		}
	}
	t.Logf("%d of %d reachable types planned", planned, len(seen))
}
