package vcenter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"github.com/vmware/govmomi/vim25/xml"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/collectorxml"
)

// pages is the bottom of the SOAP client's chain of round trippers: it
// sends every request as the SOAP client does, and decodes the property
// collector's answers (WaitForUpdatesEx: the inventory's pages and
// updates; RetrievePropertiesEx and ContinueRetrievePropertiesEx: its
// direct reads) with collectorxml when they hold only what it knows, the
// identities and details of VMs, at a fraction of the CPU time of
// govmomi's decoder (BenchmarkDecode). Other answers, and those collectorxml
// declines (a fault, a field it does not read), are decoded by govmomi's
// decoder from the same bytes.
//
// These requests are sent without a SOAP header from the context
// (soap.Client.WithHeader: an action or a security token): no caller
// sends one with them today (only LoginByToken does, with its own
// request). A caller that does would have to be routed around pages.
type pages struct {
	sc      *soap.Client
	dec     *collectorxml.Decoder
	policy  *Decoding
	vcenter string
	obs     Observer
	// fast and slow count the pages decoded by collectorxml and by govmomi.
	fast, slow atomic.Int64
	// corrupt, in tests, alters the fast decoder's result before the
	// shadow compares it.
	corrupt func(any)
}

func newPages(sc *soap.Client, policy *Decoding, vcenter string, obs Observer) *pages {
	return &pages{sc: sc, dec: collectorxml.New(sc.Types), policy: policy, vcenter: vcenter, obs: obs}
}

func (p *pages) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	// decode decodes a body with collectorxml into res, or reports it
	// cannot; fresh is a new response of res's type, and got what decode
	// put in res, for the shadow decode.
	var decode func(body []byte) bool
	var fresh func() soap.HasFault
	var got, shadowGot func(soap.HasFault) any
	var use func(soap.HasFault) // puts a shadow's response in res
	switch out := res.(type) {
	case *methods.WaitForUpdatesExBody:
		decode = func(body []byte) (ok bool) {
			out.Res, ok = p.dec.Decode(body)
			return ok
		}
		fresh = func() soap.HasFault { return &methods.WaitForUpdatesExBody{} }
		got = func(soap.HasFault) any { return out.Res }
		shadowGot = func(r soap.HasFault) any { return r.(*methods.WaitForUpdatesExBody).Res }
		use = func(r soap.HasFault) { out.Res = r.(*methods.WaitForUpdatesExBody).Res }
	case *methods.RetrievePropertiesExBody:
		decode = func(body []byte) (ok bool) {
			out.Res, ok = p.dec.DecodeRetrieve(body)
			return ok
		}
		fresh = func() soap.HasFault { return &methods.RetrievePropertiesExBody{} }
		got = func(soap.HasFault) any { return out.Res }
		shadowGot = func(r soap.HasFault) any { return r.(*methods.RetrievePropertiesExBody).Res }
		use = func(r soap.HasFault) { out.Res = r.(*methods.RetrievePropertiesExBody).Res }
	case *methods.ContinueRetrievePropertiesExBody:
		decode = func(body []byte) (ok bool) {
			out.Res, ok = p.dec.DecodeContinueRetrieve(body)
			return ok
		}
		fresh = func() soap.HasFault { return &methods.ContinueRetrievePropertiesExBody{} }
		got = func(soap.HasFault) any { return out.Res }
		shadowGot = func(r soap.HasFault) any { return r.(*methods.ContinueRetrievePropertiesExBody).Res }
		use = func(r soap.HasFault) { out.Res = r.(*methods.ContinueRetrievePropertiesExBody).Res }
	default:
		return p.sc.RoundTrip(ctx, req, res)
	}
	method := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", res), "*methods."), "Body")
	// The request as soap.Client.RoundTrip builds it.
	env := soap.Envelope{Body: req}
	var h soap.Header
	if id, ok := ctx.Value(types.ID{}).(string); ok {
		h.ID = id
	}
	if p.sc.Cookie != nil {
		h.Cookie = p.sc.Cookie()
	}
	if h.Cookie != nil || h.ID != "" {
		env.Header = &h
	}
	b, err := xml.Marshal(env)
	if err != nil {
		return fmt.Errorf("encode %T: %w", req, err)
	}
	hreq, err := http.NewRequest(http.MethodPost, p.sc.URL().String(),
		io.MultiReader(strings.NewReader(xml.Header), bytes.NewReader(b)))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", `text/xml; charset="utf-8"`)
	hreq.Header.Set("SOAPAction", p.sc.Namespace+"/"+p.sc.Version)

	return p.sc.Do(ctx, hreq, func(hres *http.Response) error {
		switch hres.StatusCode {
		case http.StatusOK, http.StatusInternalServerError: // a fault has a body
		default:
			return &url.Error{Op: hres.Request.Method, URL: hres.Request.URL.Path, Err: statusError{hres.Status, hres.StatusCode}}
		}
		body, err := io.ReadAll(io.LimitReader(hres.Body, MaxAnswerBytes+1))
		if err != nil {
			return err
		}
		if len(body) > MaxAnswerBytes {
			return fmt.Errorf("vCenter %q: a %s answer larger than %d MiB: not read", p.vcenter, method, MaxAnswerBytes>>20)
		}
		if p.policy.Enabled() && decode(body) {
			if p.corrupt != nil {
				p.corrupt(got(res))
			}
			if !p.policy.shadowed() {
				p.fast.Add(1)
				p.obs.Decoded(p.vcenter, "fast")
				return nil
			}
			// The shadow: the same bytes through govmomi's decoder.
			theirs := fresh()
			err := govmomiDecode(body, p.sc.Types, theirs)
			if err == nil && reflect.DeepEqual(got(res), shadowGot(theirs)) {
				p.fast.Add(1)
				p.obs.Decoded(p.vcenter, "fast")
				return nil
			}
			p.obs.DecodeMismatch(p.vcenter)
			p.policy.disagree(p.vcenter, method)
			// govmomi's answer is the one used.
			p.slow.Add(1)
			p.obs.Decoded(p.vcenter, "govmomi")
			if err != nil {
				return err
			}
			use(theirs)
			if f := res.Fault(); f != nil {
				return soap.WrapSoapFault(f)
			}
			return nil
		}
		p.slow.Add(1)
		p.obs.Decoded(p.vcenter, "govmomi")
		if err := govmomiDecode(body, p.sc.Types, res); err != nil {
			return err
		}
		if f := res.Fault(); f != nil {
			return soap.WrapSoapFault(f)
		}
		return nil
	})
}

// statusError is an HTTP status other than 200 and 500, as the SOAP
// client reports it: a 502 is temporary (vim25.IsTemporaryNetworkError).
type statusError struct {
	status string
	code   int
}

func (e statusError) Error() string   { return e.status }
func (e statusError) Temporary() bool { return e.code == http.StatusBadGateway }
