package vcsim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	stssim "github.com/vmware/govmomi/sts/simulator" // also registers vcsim's STS endpoints
	"github.com/vmware/govmomi/vim25/types"
)

// The ways a vCenter of a Fleet can be logged in to besides a password:
//
//   - Solution users: STS (govmomi's sts/simulator, behind a guard) issues a
//     token only for a certificate registered with AddSolutionUser, and
//     answers any other with a SOAP fault, as vCenter SSO does.
//   - Shared sessions: CloneSession of a ticket from AcquireCloneTicket
//     (vcsim's own), and the vAPI endpoint accepts the SOAP session's id, as
//     vCenter does (vcsim's vAPI does not: bridgeREST adds it).
//
// Every request to /sdk, /sts and /rest is recorded once RecordRequests is
// called, so that tests can assert what was sent.

// stsPaths are where STS is served: the path clients use when the lookup
// service does not answer, and the path in the simulator's settings.
var stsPaths = []string{"/sts/STSService", "/sts/STSService/vsphere.local"}

// Request is one request a vCenter received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// SolutionUser is a certificate and key for certificate logins.
type SolutionUser struct {
	Certificate *x509.Certificate
	// CertPEM and KeyPEM are the PEM certificate and RSA private key.
	CertPEM, KeyPEM string
}

// NewSolutionUser makes a self-signed RSA certificate for a solution user
// named name, valid from notBefore to notAfter.
func NewSolutionUser(name string, notBefore, notAfter time.Time) (SolutionUser, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return SolutionUser{}, err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return SolutionUser{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: name, OrganizationalUnit: []string{"solution users"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return SolutionUser{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return SolutionUser{}, err
	}
	return SolutionUser{
		Certificate: cert,
		CertPEM:     string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		KeyPEM:      string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
	}, nil
}

// AddSolutionUser registers a certificate: STS issues tokens for it.
func (v *VCenter) AddSolutionUser(c *x509.Certificate) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.solutionUsers = append(v.solutionUsers, c.Raw)
}

// RemoveSolutionUser unregisters a certificate.
func (v *VCenter) RemoveSolutionUser(c *x509.Certificate) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.solutionUsers = slices.DeleteFunc(v.solutionUsers, func(der []byte) bool { return bytes.Equal(der, c.Raw) })
}

// SetSTSDown makes STS unreachable (true: every request to it has its
// connection closed without an answer, as behind a partition) or
// reachable again; the SOAP and vAPI endpoints are not affected.
func (v *VCenter) SetSTSDown(down bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stsDown = down
}

// TokensIssued is how many tokens STS issued; TokensRefused how many
// requests it refused.
func (v *VCenter) TokensIssued() (issued, refused int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.tokensIssued, v.tokensRefused
}

// RecordRequests starts recording every request (until the vCenter stops).
func (v *VCenter) RecordRequests() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.recording = true
}

// Requests returns the requests recorded so far.
func (v *VCenter) Requests() []Request {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.requests)
}

// record reads r's body for the log and puts it back.
func (v *VCenter) record(r *http.Request) {
	v.mu.Lock()
	on := v.recording
	v.mu.Unlock()
	if !on {
		return
	}
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	v.mu.Lock()
	v.requests = append(v.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	v.mu.Unlock()
}

// recorded wraps next so that its requests are recorded.
func (v *VCenter) recorded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.record(r)
		next.ServeHTTP(w, r)
	})
}

var binaryToken = regexp.MustCompile(`BinarySecurityToken[^>]*>([^<]+)<`)

// stsGuard serves STS: a token request whose certificate is not registered
// gets the fault vCenter SSO answers with; others go to govmomi's STS
// simulator.
func (v *VCenter) stsGuard(listen *url.URL) http.Handler {
	_, sim := stssim.New(listen, []types.BaseOptionValue{&types.OptionValue{
		Key: "config.vpxd.sso.sts.uri", Value: "https://" + listen.Host + stsPaths[1]}})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.mu.Lock()
		down := v.stsDown
		v.mu.Unlock()
		if down {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.HasSuffix(strings.Trim(r.Header.Get("SOAPAction"), `"`), "/Issue") {
			if !v.registered(body) {
				v.mu.Lock()
				v.tokensRefused++
				v.mu.Unlock()
				w.Header().Set("Content-Type", "text/xml; charset=utf-8")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, stsFault)
				return
			}
			v.mu.Lock()
			v.tokensIssued++
			v.mu.Unlock()
			rec := httptest.NewRecorder()
			sim.ServeHTTP(rec, r)
			rec.Body = bytes.NewBuffer(v.tokens.issue(body, rec.Body.Bytes()))
			copyResponse(w, rec)
			return
		}
		sim.ServeHTTP(w, r)
	})
}

// registered reports whether the token request's certificate is a
// registered solution user's, and valid now (as vCenter SSO checks).
func (v *VCenter) registered(body []byte) bool {
	m := binaryToken.FindSubmatch(body)
	if m == nil {
		return false
	}
	der, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(m[1])))
	if err != nil {
		return false
	}
	if c, err := x509.ParseCertificate(der); err != nil || time.Now().After(c.NotAfter) || time.Now().Before(c.NotBefore) {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.ContainsFunc(v.solutionUsers, func(c []byte) bool { return bytes.Equal(c, der) })
}

// stsFault is what vCenter SSO answers a token request it refuses with.
const stsFault = `<?xml version="1.0" encoding="UTF-8"?>` +
	`<S:Envelope xmlns:S="http://schemas.xmlsoap.org/soap/envelope/"><S:Body><S:Fault>` +
	`<faultcode xmlns:ns0="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd">ns0:FailedAuthentication</faultcode>` +
	`<faultstring>Authentication failed: the certificate is not registered for a solution user</faultstring>` +
	`</S:Fault></S:Body></S:Envelope>`

// bridgeREST lets the vAPI endpoint accept a SOAP session, as vCenter
// does: a request whose vmware-api-session-id is the id of a live SOAP
// session (the reference CCM's REST client for a cloned session sends
// exactly that) is served with a short-lived vAPI session of its own.
func (v *VCenter) bridgeREST(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.record(r)
		id := r.Header.Get(restSessionHeader)
		cookie, err := r.Cookie("vmware_soap_session")
		if id == "" || err != nil || cookie.Value != id || !v.isSOAPSession(r.Context(), id) {
			next.ServeHTTP(w, r)
			return
		}
		rid, ok := v.restSession(next)
		if !ok {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		defer v.endRESTSession(next, rid)
		r.Header.Set(restSessionHeader, rid)
		next.ServeHTTP(w, r)
	})
}

const restSessionHeader = "vmware-api-session-id"

// isSOAPSession reports whether id is a live SOAP session's key.
func (v *VCenter) isSOAPSession(ctx context.Context, id string) bool {
	if v.admin == nil {
		return false
	}
	keys, err := v.allSessionKeys(ctx)
	return err == nil && slices.Contains(keys, id)
}

// restSession opens a vAPI session as the helper's administrator.
func (v *VCenter) restSession(next http.Handler) (string, bool) {
	req := httptest.NewRequest(http.MethodPost, "/rest/com/vmware/cis/session", nil)
	req.SetBasicAuth(adminUser, adminPassword)
	req.Header.Set("vmware-use-header-authn", "true")
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, req)
	var id string
	if rec.Code != http.StatusOK {
		return "", false
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(rec.Body.String()), `{"value":%q}`, &id); err != nil || id == "" {
		return "", false
	}
	return id, true
}

func (v *VCenter) endRESTSession(next http.Handler, id string) {
	req := httptest.NewRequest(http.MethodDelete, "/rest/com/vmware/cis/session", nil)
	req.Header.Set(restSessionHeader, id)
	next.ServeHTTP(httptest.NewRecorder(), req)
}

// lateHandler is a handler known only once the server is built.
type lateHandler struct{ next http.Handler }

func (h *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.next.ServeHTTP(w, r) }
