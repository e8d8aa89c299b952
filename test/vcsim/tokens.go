package vcsim

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Tokens: the lifetime of STS tokens and of the sessions opened with them.
//
// What vCenter does (docs/security.md, "Token lifetimes", has the sources):
//
//   - STS grants the lifetime a token request asks for, up to the SSO
//     token policy's maximum holder-of-key lifetime (30 days by default);
//     govmomi asks for 5 minutes when its caller names no lifetime.
//   - A vAPI (REST) session opened with a token ends when the token
//     expires: "At the beginning of the session, the session logic uses
//     the SAML token and the system configuration to calculate absolute
//     expiration time" (vSphere Automation API, cis session).
//   - A SOAP session opened with LoginByToken: VMware documents only its
//     idle timeout (30 minutes). TokenPolicy.EndSOAP makes it end with its
//     token too, the strictest reading, so that a client is tested under
//     both.
//
// govmomi's STS simulator answers every request with one fixed assertion
// and a 5 minute lifetime from the real clock, and its LoginByToken and
// vAPI accept any token for ever: the layer below gives every issued token
// an ID and the lifetime granted by Clock, and ends the sessions opened
// with it when Clock passes its expiry.

// TokenPolicy is a vCenter's STS token policy.
type TokenPolicy struct {
	// MaxLifetime is the longest lifetime STS grants; a longer request gets
	// this (default DefaultMaxTokenLifetime).
	MaxLifetime time.Duration
	// EndSOAP ends a SOAP session opened with LoginByToken when its token
	// expires (the REST session always ends then).
	EndSOAP bool
	// Clock is the time tokens expire by (default the real clock).
	Clock clock.PassiveClock
}

// DefaultMaxTokenLifetime is vCenter SSO's default maximum holder-of-key
// token lifetime.
const DefaultMaxTokenLifetime = 30 * 24 * time.Hour

// tokenBook records the tokens STS issued and the sessions opened with
// them.
type tokenBook struct {
	mu     sync.Mutex
	policy TokenPolicy
	tokens map[string]issuedToken // assertion ID -> token
	soap   map[string]string      // SOAP session cookie -> assertion ID
	rest   map[string]string      // vAPI session ID -> assertion ID
	stats  TokenStats
}

type issuedToken struct {
	issued, expires time.Time
}

// TokenStats counts what the token layer saw.
type TokenStats struct {
	// Issued tokens, and the lifetimes granted (the last one).
	Issued        int
	LastRequested time.Duration
	LastGranted   time.Duration
	// SOAPLogins and RESTLogins are logins with a token; ExpiredLogins
	// those refused because their token had expired.
	SOAPLogins, RESTLogins, ExpiredLogins int
	// SOAPEnded and RESTEnded are requests refused because the session's
	// token had expired, logouts not counted.
	SOAPEnded, RESTEnded int
}

func newTokenBook() *tokenBook {
	return &tokenBook{tokens: map[string]issuedToken{}, soap: map[string]string{}, rest: map[string]string{}}
}

// SetTokenPolicy sets the vCenter's token policy, for tokens issued from
// now on and for every session's expiry.
func (v *VCenter) SetTokenPolicy(p TokenPolicy) {
	v.tokens.mu.Lock()
	defer v.tokens.mu.Unlock()
	v.tokens.policy = p
}

// TokenStats returns what the token layer counted so far.
func (v *VCenter) TokenStats() TokenStats {
	v.tokens.mu.Lock()
	defer v.tokens.mu.Unlock()
	return v.tokens.stats
}

func (b *tokenBook) now() time.Time {
	if b.policy.Clock == nil {
		return time.Now()
	}
	return b.policy.Clock.Now()
}

var (
	// lifetime matches a Lifetime element (any namespace prefix): its
	// Created and Expires.
	lifetime    = regexp.MustCompile(`(?s)(<(?:\w+:)?Lifetime[^>]*>\s*<(?:\w+:)?Created[^>]*>)([^<]+)(</(?:\w+:)?Created>\s*<(?:\w+:)?Expires[^>]*>)([^<]+)(</)`)
	assertionID = regexp.MustCompile(`<saml2:Assertion [^>]*?ID="([^"]+)"`)
	tokenTime   = "2006-01-02T15:04:05.000Z"
)

// issue rewrites the simulator's answer to a token request: a new
// assertion ID, and the lifetime the policy grants from the requested one.
func (b *tokenBook) issue(req, res []byte) []byte {
	requested := 5 * time.Minute
	if m := lifetime.FindSubmatch(req); m != nil {
		c, err1 := time.Parse(time.RFC3339Nano, string(m[2]))
		e, err2 := time.Parse(time.RFC3339Nano, string(m[4]))
		if err1 == nil && err2 == nil && e.After(c) {
			requested = e.Sub(c)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.policy.MaxLifetime
	if limit <= 0 {
		limit = DefaultMaxTokenLifetime
	}
	granted := min(requested, limit)
	now := b.now().UTC()
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := "_" + hex.EncodeToString(raw[:])
	b.tokens[id] = issuedToken{issued: now, expires: now.Add(granted)}
	b.stats.Issued++
	b.stats.LastRequested, b.stats.LastGranted = requested, granted
	if m := assertionID.FindSubmatch(res); m != nil {
		res = bytes.ReplaceAll(res, m[1], []byte(id)) // its ID and the signature's reference to it
	}
	return lifetime.ReplaceAll(res, []byte("${1}"+now.Format(tokenTime)+"${3}"+now.Add(granted).Format(tokenTime)+"${5}"))
}

// valid reports whether the token with assertion ID id was issued here and
// has not expired.
func (b *tokenBook) validLocked(id string) bool {
	t, ok := b.tokens[id]
	return ok && b.now().Before(t.expires)
}

// soapHandler ends SOAP sessions with their tokens (if the policy says so)
// and refuses a LoginByToken whose token expired.
func (b *tokenBook) soapHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		cookie := ""
		if c, err := r.Cookie("vmware_soap_session"); err == nil {
			cookie = c.Value
		}
		if bytes.Contains(body, []byte("<LoginByToken")) {
			m := assertionID.FindSubmatch(body)
			b.mu.Lock()
			ok := m != nil && b.validLocked(string(m[1]))
			if !ok {
				b.stats.ExpiredLogins++
			}
			b.mu.Unlock()
			if !ok {
				writeFault(w, invalidLoginFault)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			if c := sessionCookie(rec.Result()); c != "" {
				b.mu.Lock()
				b.soap[c] = string(m[1])
				b.stats.SOAPLogins++
				b.mu.Unlock()
			}
			copyResponse(w, rec)
			return
		}
		b.mu.Lock()
		id, bound := b.soap[cookie]
		ended := bound && b.policy.EndSOAP && !b.validLocked(id)
		logout := bytes.Contains(body, []byte("<Logout"))
		if ended && !logout {
			b.stats.SOAPEnded++
		}
		if logout {
			// Gone: what follows is the simulator's to refuse. A logout of
			// an ended session goes on, so that the simulator forgets it
			// too.
			delete(b.soap, cookie)
		}
		b.mu.Unlock()
		if ended && !logout {
			writeFault(w, notAuthenticatedFault)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// restHandler ends vAPI sessions with their tokens and refuses a login
// whose token expired.
func (b *tokenBook) restHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth := r.Header.Get("Authorization"); r.Method == http.MethodPost && strings.HasPrefix(auth, "SIGN ") &&
			strings.HasSuffix(r.URL.Path, "/com/vmware/cis/session") {
			id := signedAssertionID(auth)
			b.mu.Lock()
			ok := id != "" && b.validLocked(id)
			if !ok {
				b.stats.ExpiredLogins++
			}
			b.mu.Unlock()
			if !ok {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var res struct {
				Value string `json:"value"`
			}
			if rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), &res) == nil && res.Value != "" {
				b.mu.Lock()
				b.rest[res.Value] = id
				b.stats.RESTLogins++
				b.mu.Unlock()
			}
			copyResponse(w, rec)
			return
		}
		b.mu.Lock()
		sid := r.Header.Get(restSessionHeader)
		id, bound := b.rest[sid]
		ended := bound && !b.validLocked(id)
		logout := r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/com/vmware/cis/session")
		if ended && !logout {
			b.stats.RESTEnded++
		}
		if logout {
			delete(b.rest, sid)
		}
		b.mu.Unlock()
		if ended && !logout {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// signedAssertionID reads the assertion ID of a vAPI token login's
// Authorization header (SIGN token="<base64 of the gzipped assertion>", ...).
func signedAssertionID(auth string) string {
	_, rest, ok := strings.Cut(auth, `token="`)
	if !ok {
		return ""
	}
	enc, _, _ := strings.Cut(rest, `"`)
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return ""
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return ""
	}
	token, err := io.ReadAll(zr)
	if err != nil {
		return ""
	}
	if m := assertionID.FindSubmatch(token); m != nil {
		return string(m[1])
	}
	return ""
}

func sessionCookie(res *http.Response) string {
	for _, c := range res.Cookies() {
		if c.Name == "vmware_soap_session" {
			return c.Value
		}
	}
	return ""
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func writeFault(w http.ResponseWriter, fault string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = io.WriteString(w, fault)
}

// The faults vCenter answers a login with an expired token, and a request
// on a session that ended, with.
const (
	invalidLoginFault = `<?xml version="1.0" encoding="UTF-8"?>` +
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault>` +
		`<faultcode>ServerFaultCode</faultcode><faultstring>Cannot complete login due to an incorrect user name or password.</faultstring>` +
		`<detail><InvalidLoginFault xmlns="urn:vim25" xsi:type="InvalidLogin"></InvalidLoginFault></detail>` +
		`</soapenv:Fault></soapenv:Body></soapenv:Envelope>`
	notAuthenticatedFault = `<?xml version="1.0" encoding="UTF-8"?>` +
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault>` +
		`<faultcode>ServerFaultCode</faultcode><faultstring>The session is not authenticated.</faultstring>` +
		`<detail><NotAuthenticatedFault xmlns="urn:vim25" xsi:type="NotAuthenticated"><object type="Folder">group-d1</object><privilegeId>System.View</privilegeId></NotAuthenticatedFault></detail>` +
		`</soapenv:Fault></soapenv:Body></soapenv:Envelope>`
)
