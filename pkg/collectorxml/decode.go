package collectorxml

import (
	"bytes"
	"reflect"
	"sync"

	"github.com/vmware/govmomi/vim25/types"
)

// The namespaces a response names.
const (
	nsEnvelope = "http://schemas.xmlsoap.org/soap/envelope/"
	nsInstance = "http://www.w3.org/2001/XMLSchema-instance"
	nsVIM      = "urn:vim25"
)

// Decoder decodes the property collector's answers: WaitForUpdatesEx,
// RetrievePropertiesEx and ContinueRetrievePropertiesEx responses. It is
// safe for concurrent use.
type Decoder struct {
	types func(string) (reflect.Type, bool)
	plans sync.Map // reflect.Type -> *plan: how its elements are read (complex.go)
}

// New returns a Decoder that knows the vSphere types of typeFunc
// (types.TypeFunc(), or the soap.Client's Types): the enums and the data
// objects among them.
func New(typeFunc func(string) (reflect.Type, bool)) *Decoder {
	return &Decoder{types: typeFunc}
}

// Decode returns the WaitForUpdatesExResponse in body, a SOAP envelope,
// as govmomi's decoder returns it. ok is false when body holds anything
// but what it knows: a fault, a missing set, a value of a type or with a
// field it does not read (complex.go), or XML beyond the plain subset
// vCenter writes. Decode such a body with govmomi's decoder: Decode never
// returns what that decoder would not, and returns nothing when ok is
// false.
func (d *Decoder) Decode(body []byte) (res *types.WaitForUpdatesExResponse, ok bool) {
	p, resp, ok := d.open(body, "WaitForUpdatesExResponse")
	if !ok {
		return nil, false
	}
	res = &types.WaitForUpdatesExResponse{}
	for c := range p.children(resp) {
		if !c.is("returnval") || res.Returnval != nil {
			return nil, false
		}
		if res.Returnval, ok = p.updateSet(c); !ok {
			return nil, false
		}
	}
	if !p.close() {
		return nil, false
	}
	return res, true
}

// DecodeRetrieve returns the RetrievePropertiesExResponse in body, as
// Decode does: ok is false for anything it does not know.
func (d *Decoder) DecodeRetrieve(body []byte) (res *types.RetrievePropertiesExResponse, ok bool) {
	p, resp, ok := d.open(body, "RetrievePropertiesExResponse")
	if !ok {
		return nil, false
	}
	res = &types.RetrievePropertiesExResponse{}
	for c := range p.children(resp) {
		if !c.is("returnval") || res.Returnval != nil {
			return nil, false
		}
		var r types.RetrieveResult
		if r, ok = p.retrieveResult(c); !ok {
			return nil, false
		}
		res.Returnval = &r
	}
	if !p.close() {
		return nil, false
	}
	return res, true
}

// DecodeContinueRetrieve returns the ContinueRetrievePropertiesExResponse
// in body, as Decode does.
func (d *Decoder) DecodeContinueRetrieve(body []byte) (res *types.ContinueRetrievePropertiesExResponse, ok bool) {
	p, resp, ok := d.open(body, "ContinueRetrievePropertiesExResponse")
	if !ok {
		return nil, false
	}
	res = &types.ContinueRetrievePropertiesExResponse{}
	seen := false
	for c := range p.children(resp) {
		if !c.is("returnval") || seen {
			return nil, false
		}
		seen = true
		if res.Returnval, ok = p.retrieveResult(c); !ok {
			return nil, false
		}
	}
	if !p.close() {
		return nil, false
	}
	return res, true
}

// open reads the envelope and the body up to the start tag of the
// response element name, in the vim25 namespace.
func (d *Decoder) open(body []byte, name string) (p *parser, resp tag, ok bool) {
	p = &parser{s: scanner{b: body}, d: d, strs: map[string]string{}}
	s := &p.s
	if !s.declaration() {
		return nil, resp, false
	}
	s.skipSpace()
	env, ok := s.startTag()
	if !ok || !bytes.Equal(env.local, []byte("Envelope")) || env.empty || len(env.prefix) == 0 {
		return nil, resp, false
	}
	// The envelope declares the prefixes (and nothing else).
	p.ns = make([]attr, 0, len(env.attrs))
	for _, a := range env.attrs {
		if string(a.prefix) != "xmlns" || reserved(a.local) {
			return nil, resp, false
		}
		p.ns = append(p.ns, a)
	}
	if !p.resolves(env.prefix, nil, nsEnvelope) {
		return nil, resp, false
	}
	p.env = env
	s.skipSpace()
	body0, ok := s.startTag()
	if !ok || !is(body0.prefix, body0.local, string(env.prefix), "Body") || len(body0.attrs) > 0 || body0.empty {
		return nil, resp, false
	}
	p.body = body0
	s.skipSpace()
	resp, ok = s.startTag()
	if !ok || !is(resp.prefix, resp.local, "", name) || len(resp.attrs) != 1 ||
		!is(resp.attrs[0].prefix, resp.attrs[0].local, "", "xmlns") || string(resp.attrs[0].raw) != nsVIM {
		return nil, resp, false
	}
	return p, resp, true
}

// close reads what follows the response element: the end tags of the
// body and the envelope. It reports whether the whole response was read.
func (p *parser) close() bool {
	if p.failed {
		return false
	}
	s := &p.s
	s.skipSpace()
	if !s.endTag(p.body) {
		return false
	}
	s.skipSpace()
	if !s.endTag(p.env) {
		return false
	}
	s.skipSpace()
	return s.eof()
}

// parser reads the elements inside the response.
type parser struct {
	s      scanner
	d      *Decoder
	ns     []attr // the envelope's namespace declarations
	env    tag    // the envelope's and the body's start tags
	body   tag
	strs   map[string]string // strings that repeat (kinds, property names, types), one copy each
	failed bool              // children met what it does not know
	scope  [][]attr          // the declarations of the values being read, outermost first (complex.go)
	depth  int               // the data objects being read, one in another
}

func (t tag) is(local string) bool { return is(t.prefix, t.local, "", local) }

// reserved reports whether prefix is xml or xmlns, which no document may
// declare and which the decoder never looks up.
func reserved(prefix []byte) bool { return string(prefix) == "xml" || string(prefix) == "xmlns" }

// resolves reports whether prefix names the namespace uri, declared by
// the element itself (own, a val's declarations), by a value it is in
// (p.scope, innermost first) or by the envelope.
func (p *parser) resolves(prefix []byte, own []attr, uri string) bool {
	if reserved(prefix) {
		return false // the decoder binds xml itself and never resolves xmlns
	}
	if a, ok := declared(own, prefix); ok {
		return string(a.raw) == uri
	}
	for i := len(p.scope) - 1; i >= 0; i-- {
		if a, ok := declared(p.scope[i], prefix); ok {
			return string(a.raw) == uri
		}
	}
	if a, ok := declared(p.ns, prefix); ok {
		return string(a.raw) == uri
	}
	return false
}

// declared returns the declaration of prefix among attrs.
func declared(attrs []attr, prefix []byte) (attr, bool) {
	for _, a := range attrs {
		if string(a.prefix) == "xmlns" && bytes.Equal(a.local, prefix) {
			return a, true
		}
	}
	return attr{}, false
}

// children yields the child elements of t until its end tag, each
// unprefixed. Anything else, or a yield that stops, sets p.failed.
func (p *parser) children(t tag) func(yield func(tag) bool) {
	return func(yield func(tag) bool) {
		if t.empty || p.failed {
			return
		}
		for {
			p.s.skipSpace()
			if p.s.i+1 < len(p.s.b) && p.s.b[p.s.i] == '<' && p.s.b[p.s.i+1] == '/' {
				p.failed = !p.s.endTag(t)
				return
			}
			c, ok := p.s.startTag()
			if !ok || len(c.prefix) > 0 {
				p.failed = true
				return
			}
			if !yield(c) {
				p.failed = true
				return
			}
		}
	}
}

// str returns raw, escaped, as a string: one copy for all equal strings
// of the response.
func (p *parser) str(raw []byte) string {
	if v, ok := p.strs[string(raw)]; ok {
		return v
	}
	v := p.s.unescape(raw)
	key := v // the same bytes unless raw has entities
	if bytes.IndexByte(raw, '&') >= 0 {
		key = string(raw)
	}
	p.strs[key] = v
	return v
}

// leaf reads the text of a child element without attributes; intern: as
// one of the response's repeating strings.
func (p *parser) leaf(t tag, intern bool) (string, bool) {
	if len(t.attrs) > 0 {
		return "", false
	}
	raw, ok := p.s.rawText(t)
	switch {
	case !ok:
		return "", false
	case intern:
		return p.str(raw), true
	}
	return p.s.unescape(raw), true
}

// ref reads a managed object reference: type and serverGuid attributes,
// the value as text. A val's (inVal) namespace declarations and type
// attribute are its caller's to check.
func (p *parser) ref(t tag, inVal bool) (types.ManagedObjectReference, bool) {
	var r types.ManagedObjectReference
	for _, a := range t.attrs {
		switch {
		case is(a.prefix, a.local, "", "type"):
			r.Type = p.str(a.raw)
		case is(a.prefix, a.local, "", "serverGuid"):
			r.ServerGUID = p.str(a.raw)
		case inVal && len(a.prefix) > 0:
		default:
			return r, false
		}
	}
	v, ok := p.s.text(t)
	r.Value = v
	return r, ok
}

func (p *parser) updateSet(t tag) (*types.UpdateSet, bool) {
	if len(t.attrs) > 0 {
		return nil, false
	}
	set := &types.UpdateSet{}
	var haveVersion bool
	for c := range p.children(t) {
		ok := false
		switch {
		case c.is("version") && !haveVersion:
			haveVersion = true
			set.Version, ok = p.leaf(c, false)
		case c.is("truncated") && set.Truncated == nil:
			var b bool
			if len(c.attrs) == 0 {
				b, ok = p.boolean(c)
			}
			set.Truncated = &b
		case c.is("filterSet"):
			var f types.PropertyFilterUpdate
			f, ok = p.filterUpdate(c)
			set.FilterSet = append(set.FilterSet, f)
		}
		if !ok {
			return nil, false
		}
	}
	return set, !p.failed
}

func (p *parser) filterUpdate(t tag) (types.PropertyFilterUpdate, bool) {
	var f types.PropertyFilterUpdate
	if len(t.attrs) > 0 {
		return f, false
	}
	var haveFilter bool
	for c := range p.children(t) {
		ok := false
		switch {
		case c.is("filter") && !haveFilter:
			haveFilter = true
			f.Filter, ok = p.ref(c, false)
		case c.is("objectSet"):
			var o types.ObjectUpdate
			o, ok = p.objectUpdate(c)
			f.ObjectSet = append(f.ObjectSet, o)
		}
		// missingSet among others declines: govmomi's decoder reads faults.
		if !ok {
			return f, false
		}
	}
	return f, !p.failed
}

func (p *parser) objectUpdate(t tag) (types.ObjectUpdate, bool) {
	var o types.ObjectUpdate
	if len(t.attrs) > 0 {
		return o, false
	}
	var haveKind, haveObj bool
	for c := range p.children(t) {
		ok := false
		switch {
		case c.is("kind") && !haveKind:
			haveKind = true
			var v string
			v, ok = p.leaf(c, true)
			o.Kind = types.ObjectUpdateKind(v)
		case c.is("obj") && !haveObj:
			haveObj = true
			o.Obj, ok = p.ref(c, false)
		case c.is("changeSet"):
			var ch types.PropertyChange
			ch, ok = p.change(c)
			o.ChangeSet = append(o.ChangeSet, ch)
		}
		if !ok {
			return o, false
		}
	}
	return o, !p.failed
}

func (p *parser) change(t tag) (types.PropertyChange, bool) {
	var ch types.PropertyChange
	if len(t.attrs) > 0 {
		return ch, false
	}
	var haveName, haveOp, haveVal bool
	for c := range p.children(t) {
		ok := false
		switch {
		case c.is("name") && !haveName:
			haveName = true
			ch.Name, ok = p.leaf(c, true)
		case c.is("op") && !haveOp:
			haveOp = true
			var v string
			v, ok = p.leaf(c, true)
			ch.Op = types.PropertyChangeOp(v)
		case c.is("val") && !haveVal:
			haveVal = true
			ch.Val, ok = p.value(c)
		}
		if !ok {
			return ch, false
		}
	}
	return ch, !p.failed
}

// value reads a val element (or a field of type AnyType): its type
// attribute is resolved as govmomi's decoder resolves it, "xsd:" or "xs:"
// and a basic type name (string, boolean, int, long, short, byte), or a
// vSphere type as it stands: a managed object reference, an enum, or a
// data object whose fields complex.go reads.
func (p *parser) value(t tag) (types.AnyType, bool) {
	var typ []byte
	refAttrs := false
	for _, a := range t.attrs {
		switch {
		case string(a.prefix) == "xmlns" && (reserved(a.local) || string(a.local) == "type" || string(a.local) == "serverGuid"):
			// The decoder gives a reference's type or serverGuid the
			// value of any attribute of that local name, declarations
			// included.
			return nil, false
		case string(a.prefix) == "xmlns":
		case len(a.prefix) == 0 && string(a.local) == "xmlns":
			return nil, false // a default namespace of its own
		case len(a.prefix) > 0 && string(a.local) == "type" && p.resolves(a.prefix, t.attrs, nsInstance):
			if typ != nil {
				return nil, false
			}
			typ = a.raw
		case len(a.prefix) == 0 && (string(a.local) == "type" || string(a.local) == "serverGuid"):
			refAttrs = true // a reference's own, checked with its type
		default:
			return nil, false
		}
	}
	if bytes.IndexByte(typ, '&') >= 0 {
		return nil, false
	}
	basic := typ
	if b, ok := bytes.CutPrefix(typ, []byte("xsd:")); ok {
		basic = b
	} else if b, ok := bytes.CutPrefix(typ, []byte("xs:")); ok {
		basic = b
	}
	switch {
	case len(typ) == 0:
		return nil, false
	case string(typ) == "ManagedObjectReference":
		r, ok := p.ref(t, true)
		if !ok {
			return nil, false
		}
		return r, true
	case refAttrs:
		return nil, false
	case string(basic) == "string":
		return p.s.text(t)
	case string(basic) == "boolean":
		b, ok := p.boolean(t)
		if !ok {
			return nil, false
		}
		return b, true
	}
	if bits := intBits(basic); bits > 0 {
		n, ok := p.integer(t, bits)
		if !ok {
			return nil, false
		}
		switch bits {
		case 8:
			return int8(n), true
		case 16:
			return int16(n), true
		case 32:
			return int32(n), true
		}
		return n, true
	}
	if bytes.IndexByte(typ, ':') >= 0 {
		return nil, false
	}
	if !valueTypes[string(typ)] {
		return nil, false
	}
	rt, known := p.d.types(string(typ))
	if !known {
		return nil, false
	}
	if readsItself(rt) {
		return nil, false
	}
	switch rt.Kind() {
	case reflect.String: // an enum
		raw, ok := p.s.rawText(t)
		if !ok {
			return nil, false
		}
		return reflect.ValueOf(p.str(raw)).Convert(rt).Interface(), true
	case reflect.Struct:
		v := reflect.New(rt).Elem()
		if !p.inScope(t.attrs, func() bool { return p.object(t, v) }) {
			return nil, false
		}
		return v.Interface(), true
	}
	return nil, false
}

// valueTypes are the vSphere types of the values the inventory reads,
// beside the XML Schema ones and references: the fast path is limited to
// them, and declines any other. The enums of runtime.powerState and
// runtime.connectionState; guest.net (its GuestNicInfo items and what they
// hold: NetIpConfigInfo and its addresses, read as fields); a keyed
// config.extraConfig entry; the CustomFieldsManager's field definitions.
var valueTypes = map[string]bool{
	"VirtualMachinePowerState":      true,
	"VirtualMachineConnectionState": true,
	"ArrayOfGuestNicInfo":           true,
	"OptionValue":                   true,
	"ArrayOfCustomFieldDef":         true,
	"ArrayOfCustomFieldValue":       true, // customValue: its items are a Base interface, which declines
}

// intBits returns the bits of the basic integer type name, or 0.
func intBits(name []byte) int {
	switch string(name) {
	case "byte":
		return 8
	case "short":
		return 16
	case "int":
		return 32
	case "long":
		return 64
	}
	return 0
}

// boolean reads the text of t as a boolean, spelled exactly true or false
// (the decoder also reads 1, 0 and surrounding space: declined).
func (p *parser) boolean(t tag) (value, ok bool) {
	raw, ok := p.s.rawText(t)
	switch {
	case !ok:
		return false, false
	case string(raw) == "true":
		return true, true
	case string(raw) == "false":
		return false, true
	}
	return false, false
}
