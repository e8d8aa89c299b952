package vcsim

import (
	"net/http"
	"strings"
	"sync/atomic"
)

// Counter counts vSphere requests made through the transports it wraps:
// SOAP (/sdk), REST (/rest, /api) and REST logins. Use Wrap as
// vcenter.Options.WrapTransport.
type Counter struct {
	soap, rest, restLogins, soapLogins atomic.Int64
}

// Counts is a snapshot of a Counter.
type Counts struct {
	SOAP, REST, RESTLogins int64
}

// Total is SOAP + REST.
func (c Counts) Total() int64 { return c.SOAP + c.REST }

// Sub returns c - o.
func (c Counts) Sub(o Counts) Counts {
	return Counts{c.SOAP - o.SOAP, c.REST - o.REST, c.RESTLogins - o.RESTLogins}
}

// Snapshot returns the current counts.
func (c *Counter) Snapshot() Counts {
	return Counts{c.soap.Load(), c.rest.Load(), c.restLogins.Load()}
}

// Wrap returns rt counting every request.
func (c *Counter) Wrap(_ string, rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		switch {
		case strings.HasPrefix(req.URL.Path, "/rest") || strings.HasPrefix(req.URL.Path, "/api"):
			c.rest.Add(1)
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/com/vmware/cis/session") && req.URL.RawQuery == "" {
				c.restLogins.Add(1)
			}
		default:
			c.soap.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
