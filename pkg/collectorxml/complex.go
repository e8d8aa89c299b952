package collectorxml

import (
	"encoding"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"github.com/vmware/govmomi/vim25/xml"
)

// A data object (GuestNicInfo, OptionValue, ArrayOfGuestNicInfo...) is
// read field by field, each child element into the field its xml tag
// names, as govmomi's decoder reads it, for the fields whose types are
// plain: strings and enums, booleans, signed integers, managed object
// references, times, data objects of such fields, pointers to and slices
// of them, and AnyType with a type attribute. A field of another type (a
// polymorphic Base interface, an unsigned or floating number, bytes)
// declines when its element appears. A type the decoder reads otherwise
// than by elements (a field for an attribute, character data, inner XML
// or any element, an XMLName, two fields of one name) or that reads its
// own XML declines whenever it appears.

// plan is how the elements of a struct type are read: its fields by
// element name. A nil plan: the type is read by govmomi's decoder only.
type plan struct {
	fields map[string]*field
}

type field struct {
	index []int // reflect.Value.FieldByIndex: through embedded structs
	typ   reflect.Type
	n     int // its number, for the repeat check (a type with more than 64 fields declines from the 65th)
}

var (
	referenceType       = reflect.TypeFor[types.ManagedObjectReference]()
	anyType             = reflect.TypeFor[types.AnyType]()
	timeType            = reflect.TypeFor[time.Time]()
	unmarshalerType     = reflect.TypeFor[xml.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// planFor returns the plan of struct type rt, made once per Decoder.
func (d *Decoder) planFor(rt reflect.Type) *plan {
	if v, ok := d.plans.Load(rt); ok {
		return v.(*plan)
	}
	pl := &plan{fields: map[string]*field{}}
	if !readsItself(rt) && pl.add(rt, nil) {
		d.plans.Store(rt, pl)
		return pl
	}
	d.plans.Store(rt, (*plan)(nil))
	return nil
}

// readsItself reports whether govmomi's decoder lets t (or *t) read its
// own XML.
func readsItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(unmarshalerType) || p.Implements(unmarshalerType) ||
		t.Implements(textUnmarshalerType) || p.Implements(textUnmarshalerType)
}

// add adds the fields of struct type rt, found at index, flattening
// embedded structs as the decoder's type info does. false: a field the
// decoder reads in a way this package does not (an attribute, character
// data, inner XML, any element, a name space or a path, an XMLName), or
// two fields of one name.
func (pl *plan) add(rt reflect.Type, index []int) bool {
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag := f.Tag.Get("xml")
		if (!f.IsExported() && !f.Anonymous) || tag == "-" {
			continue
		}
		at := append(append([]int(nil), index...), i)
		if f.Anonymous && (f.Type.Kind() == reflect.Struct || f.Type.Kind() == reflect.Pointer) {
			// Embedded, whatever its tag: the decoder flattens a struct
			// (and allocates a nil embedded pointer: declined).
			if f.Type.Kind() == reflect.Pointer || !pl.add(f.Type, at) {
				return false
			}
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		for o := range strings.SplitSeq(opts, ",") {
			if o != "" && o != "omitempty" && o != "typeattr" {
				return false
			}
		}
		if f.Name == "XMLName" || strings.ContainsAny(name, " >") || pl.fields[name] != nil {
			return false
		}
		pl.fields[name] = &field{index: at, typ: f.Type, n: len(pl.fields)}
	}
	return true
}

// object reads the child elements of t into v, a struct; t's attributes
// are its caller's to check.
func (p *parser) object(t tag, v reflect.Value) bool {
	pl := p.d.planFor(v.Type())
	if pl == nil {
		return false
	}
	if p.depth >= maxDepth {
		return false // the decoder stops at 10,000; vSphere's data objects are far shallower
	}
	p.depth++
	defer func() { p.depth-- }()
	var seen uint64 // the fields read, slices excepted
	for c := range p.children(t) {
		f := pl.fields[string(c.local)]
		if f == nil {
			return false // the decoder skips it: a newer vCenter's field, perhaps
		}
		if f.typ.Kind() != reflect.Slice {
			if f.n >= 64 || seen&(1<<f.n) != 0 {
				return false // the decoder reads a repeat into the same field
			}
			seen |= 1 << f.n
		}
		if !p.field(c, v.FieldByIndex(f.index)) {
			return false
		}
	}
	return !p.failed
}

// field reads element t into v: a slice gets one more element, a nil
// pointer a new value.
func (p *parser) field(t tag, v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return false // base64 bytes
		}
		e := reflect.New(v.Type().Elem()).Elem()
		if !p.field(t, e) {
			return false
		}
		v.Set(reflect.Append(v, e))
		return true
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		if !p.field(t, e.Elem()) {
			return false
		}
		v.Set(e)
		return true
	case reflect.Interface:
		if v.Type() != anyType {
			return false // a Base interface: the decoder may keep a pointer
		}
		val, ok := p.value(t)
		if ok && val == nil {
			return false
		}
		if ok {
			v.Set(reflect.ValueOf(val))
		}
		return ok
	}
	if len(t.attrs) > 0 && v.Type() != referenceType && !p.typedAsDeclared(t, v.Type()) {
		return false // a type attribute or anything else
	}
	if v.Kind() != reflect.Struct && readsItself(v.Type()) {
		return false
	}
	switch v.Kind() {
	case reflect.String:
		raw, ok := p.s.rawText(t)
		if !ok {
			return false
		}
		if v.Type() == reflect.TypeFor[string]() {
			v.SetString(p.s.unescape(raw))
		} else {
			v.SetString(p.str(raw)) // an enum: one copy per response
		}
		return true
	case reflect.Bool:
		b, ok := p.boolean(t)
		v.SetBool(b)
		return ok
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := p.integer(t, v.Type().Bits())
		v.SetInt(n)
		return ok
	case reflect.Struct:
		switch v.Type() {
		case referenceType:
			r, ok := p.ref(t, false)
			v.Set(reflect.ValueOf(r))
			return ok
		case timeType: // read as the decoder reads it: UnmarshalText
			raw, ok := p.s.rawText(t)
			if !ok {
				return false
			}
			return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(p.s.unescape(raw))) == nil
		}
		return p.object(t, v)
	}
	return false
}

// typedAsDeclared reports whether t's only attribute is an xsi:type that
// names the field's own data object type, as vCenter writes on the items
// of an array (<GuestNicInfo xsi:type="GuestNicInfo">; the simulator
// writes none): the decoder reads such an element into that type as it
// reads it without the attribute. Any other type (a subtype, a prefixed
// name, a declaration beside it) declines.
func (p *parser) typedAsDeclared(t tag, rt reflect.Type) bool {
	if rt.Kind() != reflect.Struct || rt == timeType || len(t.attrs) != 1 {
		return false
	}
	a := t.attrs[0]
	return len(a.prefix) > 0 && string(a.local) == "type" && p.resolves(a.prefix, nil, nsInstance) && string(a.raw) == rt.Name()
}

// maxDepth bounds the data objects read one in another.
const maxDepth = 32

// inScope runs read with the namespace declarations among attrs (a
// value's own) in scope for the elements inside it, as the decoder
// resolves prefixes: the simulator declares its xsi prefix on each value
// only, and uses it on the values inside (OptionValue's).
func (p *parser) inScope(attrs []attr, read func() bool) bool {
	var decls []attr
	for _, a := range attrs {
		if string(a.prefix) == "xmlns" {
			decls = append(decls, a) // a copy: the scanner reuses attrs
		}
	}
	if len(decls) == 0 {
		return read()
	}
	p.scope = append(p.scope, decls)
	ok := read()
	p.scope = p.scope[:len(p.scope)-1]
	return ok
}

// integer reads the text of t as a decimal integer of bits, spelled
// plainly: an optional minus and digits (the decoder also reads space
// around it, a plus, and an empty element as 0: declined).
func (p *parser) integer(t tag, bits int) (int64, bool) {
	raw, ok := p.s.rawText(t)
	if !ok || len(raw) == 0 {
		return 0, false
	}
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, bits)
	return n, err == nil
}
