package vcenter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"github.com/vmware/govmomi/vim25/xml"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/updateset"
)

// pages is the bottom of the SOAP client's chain of round trippers: it
// sends every request as the SOAP client does, and decodes the answers
// to WaitForUpdatesEx, the inventory's pages, with updateset when they
// hold only simple values (the identities of a vCenter's VMs: about a
// ninth of the CPU time of govmomi's decoder and of the bytes it
// allocates, BenchmarkDecode). Other answers, and those updateset declines (a fault, a
// VM's guest.net), are decoded by govmomi's decoder from the same bytes.
//
// WaitForUpdatesEx is sent without a SOAP header from the context
// (soap.Client.WithHeader): only the inventory sends it, with none.
type pages struct {
	sc  *soap.Client
	dec *updateset.Decoder
	// fast and slow count the pages decoded by updateset and by govmomi.
	fast, slow atomic.Int64
}

func newPages(sc *soap.Client) *pages {
	return &pages{sc: sc, dec: updateset.New(sc.Types)}
}

func (p *pages) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	out, ok := res.(*methods.WaitForUpdatesExBody)
	if !ok {
		return p.sc.RoundTrip(ctx, req, res)
	}
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
		body, err := io.ReadAll(hres.Body)
		if err != nil {
			return err
		}
		if r, ok := p.dec.Decode(body); ok {
			p.fast.Add(1)
			out.Res = r
			return nil
		}
		p.slow.Add(1)
		dec := xml.NewDecoder(bytes.NewReader(body))
		dec.TypeFunc = p.sc.Types
		if err := dec.Decode(&soap.Envelope{Body: res}); err != nil {
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
