package vcenter

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/vmware/govmomi/vim25/soap"
)

// Observer is told about every request and login, for metrics. It must
// not block. Nothing passed to it contains a secret.
type Observer interface {
	// Request reports one SOAP or REST request: api is "soap" or "rest",
	// method the SOAP method (RetrievePropertiesEx) or the REST resource
	// and action (tagging/tag-association:list-attached-objects-on-tags),
	// outcome "ok", "fault" (the vCenter answered with a fault or an HTTP
	// error status) or "error" (no answer).
	Request(vcenter, api, method, outcome string, d time.Duration)
	// Login reports a login attempt; err wraps ErrLoginRejected when the
	// vCenter refused the credentials.
	Login(vcenter string, err error)
	// Decoded reports a property collector answer decoded by decoder:
	// "fast" (collectorxml) or "govmomi".
	Decoded(vcenter, decoder string)
	// DecodeMismatch reports a shadow decode that disagreed: the fast
	// decoder is then off for the process.
	DecodeMismatch(vcenter string)
}

type nopObserver struct{}

func (nopObserver) Decoded(string, string) {}
func (nopObserver) DecodeMismatch(string)  {}

func (nopObserver) Request(string, string, string, string, time.Duration) {}
func (nopObserver) Login(string, error)                                   {}

// observedSOAP reports every SOAP round trip.
type observedSOAP struct {
	next    soap.RoundTripper
	vcenter string
	obs     Observer
}

func (o observedSOAP) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	start := time.Now()
	err := o.next.RoundTrip(ctx, req, res)
	outcome := "ok"
	switch {
	case soap.IsSoapFault(err) || soap.IsVimFault(err):
		outcome = "fault"
	case err != nil:
		outcome = "error"
	}
	o.obs.Request(o.vcenter, "soap", soapMethod(req), outcome, time.Since(start))
	return err
}

// soapMethod is the method name of a request body (*methods.LoginBody -> Login).
func soapMethod(req soap.HasFault) string {
	t := reflect.TypeOf(req)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return strings.TrimSuffix(t.Name(), "Body")
}

// observedHTTP reports every REST request.
type observedHTTP struct {
	next    http.RoundTripper
	vcenter string
	obs     Observer
}

func (o observedHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	res, err := o.next.RoundTrip(req)
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "error"
	case res.StatusCode >= 400:
		outcome = "fault"
	}
	o.obs.Request(o.vcenter, "rest", restMethod(req), outcome, time.Since(start))
	return res, err
}

// restMethod names a REST call by resource and action, without IDs:
// POST /rest/com/vmware/cis/tagging/tag-association?~action=list-attached-objects-on-tags
// -> tagging/tag-association:list-attached-objects-on-tags.
func restMethod(req *http.Request) string {
	p := strings.TrimPrefix(req.URL.Path, "/rest/com/vmware/cis/")
	parts := strings.Split(p, "/")
	if len(parts) > 2 { // .../tag/id:<urn> -> tagging/tag
		parts = parts[:2]
	}
	m := strings.Join(parts, "/")
	if a := req.URL.Query().Get("~action"); a != "" {
		m += ":" + a
	} else {
		m += ":" + strings.ToLower(req.Method)
	}
	return m
}
