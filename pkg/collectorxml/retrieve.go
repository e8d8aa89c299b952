package collectorxml

import "github.com/vmware/govmomi/vim25/types"

// retrieveResult reads a RetrievePropertiesEx or
// ContinueRetrievePropertiesEx returnval: a token, and objects with their
// properties. A missing set (a fault) declines.
func (p *parser) retrieveResult(t tag) (types.RetrieveResult, bool) {
	var r types.RetrieveResult
	if len(t.attrs) > 0 {
		return r, false
	}
	var haveToken bool
	for c := range p.children(t) {
		ok := false
		switch {
		case c.is("token") && !haveToken:
			haveToken = true
			r.Token, ok = p.leaf(c, false)
		case c.is("objects"):
			var o types.ObjectContent
			o, ok = p.objectContent(c)
			r.Objects = append(r.Objects, o)
		}
		if !ok {
			return r, false
		}
	}
	return r, !p.failed
}

func (p *parser) objectContent(t tag) (types.ObjectContent, bool) {
	var o types.ObjectContent
	if len(t.attrs) > 0 {
		return o, false
	}
	var haveObj bool
	for c := range p.children(t) {
		ok := false
		switch {
		case c.is("obj") && !haveObj:
			haveObj = true
			o.Obj, ok = p.ref(c, false)
		case c.is("propSet"):
			var d types.DynamicProperty
			d, ok = p.property(c)
			o.PropSet = append(o.PropSet, d)
		}
		if !ok {
			return o, false
		}
	}
	return o, !p.failed
}

func (p *parser) property(t tag) (types.DynamicProperty, bool) {
	var d types.DynamicProperty
	if len(t.attrs) > 0 {
		return d, false
	}
	var haveName, haveVal bool
	for c := range p.children(t) {
		ok := false
		switch {
		case c.is("name") && !haveName:
			haveName = true
			d.Name, ok = p.leaf(c, true)
		case c.is("val") && !haveVal:
			haveVal = true
			d.Val, ok = p.value(c)
		}
		if !ok {
			return d, false
		}
	}
	return d, !p.failed
}
