package vcsim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
)

// The session manager's own login: not the system under test's (not
// counted by Logins), and its own session is not counted by CountSessions.
const (
	sessionManagerUser     = "session-manager@vsphere.local"
	sessionManagerPassword = "session-manager-password"
)

// soapTimeout bounds the helper's own logout.
const soapTimeout = 5 * time.Second

// SessionManagerOptions tunes StartSessionManager.
type SessionManagerOptions struct {
	// Tokens are the bearer tokens accepted (none: any non-empty token).
	Tokens []string
	// Plain serves http instead of https.
	Plain bool
}

// SessionManager is a shared-session service as the reference CCM expects
// one (its docs/book/vc_shared_sessions.md and vclib.GetSharedToken): a GET
// with "Authorization: Bearer <token>" answers {"token": "<clone ticket>"},
// a ticket of a session it holds on its vCenter (AcquireCloneTicket).
type SessionManager struct {
	// URL is where to GET tickets.
	URL string

	server *httptest.Server
	client *vim25.Client
	key    string // its own session

	mu       sync.Mutex
	tokens   []string
	refuse   int // HTTP status to answer with instead of a ticket
	bogus    bool
	requests []SessionManagerRequest
}

// SessionManagerRequest is one request the session manager received.
type SessionManagerRequest struct {
	Method string
	// Authorization is the header as received.
	Authorization string
	// Ticket is the ticket handed out ("" when none).
	Ticket string
}

// StartSessionManager logs a session manager in to v and serves it on
// 127.0.0.1, over https with a certificate of the fleet's CA (v.CAFile)
// unless opts.Plain. Call Close when done.
func (v *VCenter) StartSessionManager(ctx context.Context, opts SessionManagerOptions) (*SessionManager, error) {
	u := *v.server.URL
	u.User = nil
	sc := soap.NewClient(&u, false)
	if err := sc.SetRootCAs(v.CAFile); err != nil {
		return nil, err
	}
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, err
	}
	m := session.NewManager(c)
	if err := m.Login(ctx, url.UserPassword(sessionManagerUser, sessionManagerPassword)); err != nil {
		return nil, err
	}
	us, err := m.UserSession(ctx)
	if err != nil {
		return nil, err
	}
	sm := &SessionManager{client: c, key: us.Key, tokens: opts.Tokens}
	v.mu.Lock()
	v.sessionManagerKeys = append(v.sessionManagerKeys, us.Key)
	v.mu.Unlock()
	sm.server = httptest.NewUnstartedServer(http.HandlerFunc(sm.serve))
	if !opts.Plain {
		cert, _, err := v.ca.issue("127.0.0.1", "localhost")
		if err != nil {
			return nil, err
		}
		sm.server.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		sm.server.StartTLS()
	} else {
		sm.server.Start()
	}
	sm.URL = sm.server.URL + "/session"
	return sm, nil
}

func (sm *SessionManager) serve(w http.ResponseWriter, r *http.Request) {
	req := SessionManagerRequest{Method: r.Method, Authorization: r.Header.Get("Authorization")}
	defer func() {
		sm.mu.Lock()
		sm.requests = append(sm.requests, req)
		sm.mu.Unlock()
	}()
	sm.mu.Lock()
	tokens, refuse, bogus := sm.tokens, sm.refuse, sm.bogus
	sm.mu.Unlock()
	token, ok := strings.CutPrefix(req.Authorization, "Bearer ")
	switch {
	case r.Method != http.MethodGet || r.URL.Path != "/session":
		w.WriteHeader(http.StatusNotFound)
		return
	case !ok || token == "" || (len(tokens) > 0 && !slices.Contains(tokens, token)):
		w.WriteHeader(http.StatusUnauthorized)
		return
	case refuse != 0:
		w.WriteHeader(refuse)
		return
	}
	ticket := "cst-VCT-bogus-ticket"
	if !bogus {
		var err error
		if ticket, err = session.NewManager(sm.client).AcquireCloneTicket(r.Context()); err != nil {
			w.WriteHeader(http.StatusForbidden)
			return
		}
	}
	req.Ticket = ticket
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"token": ticket})
}

// SetTokens replaces the accepted bearer tokens.
func (sm *SessionManager) SetTokens(tokens ...string) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.tokens = tokens
}

// Refuse makes it answer every request with status (0: hand out tickets).
func (sm *SessionManager) Refuse(status int) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.refuse = status
}

// HandOutBogusTickets makes it answer with tickets vCenter refuses.
func (sm *SessionManager) HandOutBogusTickets(on bool) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.bogus = on
}

// Requests returns the requests received so far.
func (sm *SessionManager) Requests() []SessionManagerRequest {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return slices.Clone(sm.requests)
}

// Close stops serving and logs its session out.
func (sm *SessionManager) Close() {
	sm.server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), soapTimeout)
	defer cancel()
	_ = session.NewManager(sm.client).Logout(ctx)
}
