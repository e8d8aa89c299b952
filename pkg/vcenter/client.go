package vcenter

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
)

// CredentialSource gives the current username and password of a vCenter
// and signals changes. *credentials.Manager implements it.
type CredentialSource interface {
	Get(vc config.VCenter) (credentials.Credentials, string, error)
	Changed() <-chan struct{}
}

// Options tunes the clients. Credentials is required.
type Options struct {
	Credentials CredentialSource
	// KeepAlive is how often an idle session is checked (and so kept alive);
	// default 5m, well below vCenter's 30 minute idle timeout.
	KeepAlive time.Duration
	// RetryMin and RetryMax bound the back-off between attempts to reach an
	// unreachable vCenter (defaults 2s and 2m).
	RetryMin, RetryMax time.Duration
	// WrapTransport, if set, wraps the HTTP transport of every SOAP and REST
	// client, for example to count requests.
	WrapTransport func(vcenter string, rt http.RoundTripper) http.RoundTripper
	// Observer is told about every request and login (metrics).
	Observer Observer
	// UserAgent is sent with every request.
	UserAgent string
	// Clock is for tests; default the real clock.
	Clock clock.WithTicker
}

func (o *Options) defaults() {
	if o.KeepAlive <= 0 {
		o.KeepAlive = 5 * time.Minute
	}
	if o.RetryMin <= 0 {
		o.RetryMin = 2 * time.Second
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(2*time.Minute, o.RetryMin)
	}
	if o.UserAgent == "" {
		o.UserAgent = "vsphere-cloud-controller-manager"
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
}

// Session is a logged-in pair of clients for one vCenter: SOAP (vim25) and
// vAPI REST (tags). Use it only inside Client.Do.
type Session struct {
	VIM  *vim25.Client
	REST *rest.Client
}

// State is the health of a vCenter connection.
type State int

// The states.
const (
	// Down: no usable session; calls fail at once with ErrUnavailable.
	Down State = iota
	// Degraded: a session exists but the last request failed to reach the
	// vCenter; calls are still attempted while it is probed.
	Degraded
	// Connected: the last request or probe succeeded.
	Connected
)

func (s State) String() string {
	switch s {
	case Down:
		return "down"
	case Degraded:
		return "degraded"
	case Connected:
		return "connected"
	}
	return "unknown"
}

// Health is a snapshot of one vCenter's connection.
type Health struct {
	State State
	// Since is when State was entered.
	Since time.Time
	// LastError is the last failure (nil after a success). It never holds a secret.
	LastError error
	// LastSuccess is the time of the last successful request or probe.
	LastSuccess time.Time
	// NextLogin is set while a rejected login is waited out.
	NextLogin time.Time
	// CredentialSource names the source of the credentials of the current
	// (or last attempted) login.
	CredentialSource string
}

var errNotConnected = errors.New("not connected yet")

// Client is the connection to one vCenter. Its lock guards only its own
// fields and is never held during network I/O; clients share nothing.
type Client struct {
	vc     config.VCenter
	global config.Global
	opts   Options
	tls    *tls.Config
	wake   chan struct{}
	first  chan struct{} // closed after the first login attempt
	log    klog.Logger

	mu         sync.Mutex
	sess       *Session
	gen        uint64 // incremented at every new session
	health     Health
	rejected   *rejection
	flight     *flight
	firstDone  bool
	loginCount int // successful logins, for tests and metrics
}

type rejection struct {
	creds credentials.Credentials
	at    time.Time
}

type flight struct {
	done chan struct{}
	err  error
}

func newClient(vc config.VCenter, global config.Global, opts Options) (*Client, error) {
	tc, err := newTLSConfig(vc)
	if err != nil {
		return nil, err
	}
	return &Client{vc: vc, global: global, opts: opts, tls: tc,
		wake: make(chan struct{}, 1), first: make(chan struct{}), log: klog.Background(),
		health: Health{State: Down, Since: opts.Clock.Now(), LastError: errNotConnected}}, nil
}

// Name is the vCenter's name in the config.
func (c *Client) Name() string { return c.vc.Name }

// Config is the vCenter's configuration.
func (c *Client) Config() config.VCenter { return c.vc }

// Health returns the current health.
func (c *Client) Health() Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health
}

// Logins is the number of successful logins so far.
func (c *Client) Logins() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loginCount
}

// Do runs fn with the current session, bounded by ctx and the configured
// request timeout. If the session expired (NotAuthenticated, HTTP 401) it
// logs in again once and retries fn once. A vCenter that is down fails at
// once with an error wrapping ErrUnavailable, without network I/O.
func (c *Client) Do(ctx context.Context, fn func(context.Context, *Session) error) error {
	s, gen, err := c.session()
	if err != nil {
		return err
	}
	err = c.call(ctx, s, fn)
	if err != nil && isNotAuthenticated(err) {
		c.log.V(2).Info("Session expired; logging in again", "vcenter", c.vc.Name)
		if lerr := c.relogin(ctx, gen); lerr != nil {
			return lerr
		}
		if s, _, err = c.session(); err != nil {
			return err
		}
		err = c.call(ctx, s, fn)
	}
	c.observe(ctx, err)
	return err
}

func (c *Client) call(ctx context.Context, s *Session, fn func(context.Context, *Session) error) error {
	cctx, cancel := context.WithTimeout(ctx, c.global.RequestTimeout)
	defer cancel()
	return fn(cctx, s)
}

func (c *Client) session() (*Session, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil || c.health.State == Down {
		return nil, 0, c.unavailableLocked()
	}
	return c.sess, c.gen, nil
}

func (c *Client) unavailableLocked() error {
	return &UnavailableError{VCenter: c.vc.Name, Address: c.vc.Address(), Since: c.health.Since, Cause: c.health.LastError}
}

// observe updates the health after a call. Only failures to reach the
// vCenter count; a fault such as ManagedObjectNotFound is an answer.
func (c *Client) observe(ctx context.Context, err error) {
	switch {
	case err == nil || (!isTransport(err) && !isNotAuthenticated(err)):
		c.mu.Lock()
		c.health.LastSuccess = c.opts.Clock.Now()
		if c.health.State == Degraded {
			c.setStateLocked(Connected, nil)
		}
		c.mu.Unlock()
	case ctx.Err() != nil:
		// The caller gave up; that says nothing about the vCenter.
	default:
		c.mu.Lock()
		if c.health.State == Connected {
			c.setStateLocked(Degraded, err)
		}
		c.mu.Unlock()
		c.poke()
	}
}

func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Client) setStateLocked(s State, err error) {
	if s != c.health.State {
		c.health.Since = c.opts.Clock.Now()
		c.log.Info("vCenter health changed", "vcenter", c.vc.Name, "from", c.health.State.String(), "to", s.String(), "err", err)
	}
	c.health.State = s
	c.health.LastError = err
	if s == Connected {
		c.health.LastSuccess = c.opts.Clock.Now()
		c.health.NextLogin = time.Time{}
	}
}

// relogin makes sure a session newer than gen exists. Concurrent callers
// share one login; each waits only as long as its own ctx allows.
func (c *Client) relogin(ctx context.Context, gen uint64) error {
	c.mu.Lock()
	if c.sess != nil && c.gen != gen {
		c.mu.Unlock()
		return nil // someone else already logged in again
	}
	f := c.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.flight = f
		// The login outlives a caller that gives up, so that the others
		// (and the next call) get its result; it is bounded by ConnectTimeout.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.global.ConnectTimeout)
		go func() {
			defer cancel()
			err := c.login(lctx)
			c.mu.Lock()
			c.flight = nil
			f.err = err
			c.mu.Unlock()
			close(f.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// login opens a new session, unless the current credentials were rejected
// less than the login back-off ago.
func (c *Client) login(ctx context.Context) error {
	now := c.opts.Clock.Now()
	creds, source, err := c.opts.Credentials.Get(c.vc)
	if err != nil {
		c.fail(err)
		return c.Unavailable()
	}
	c.mu.Lock()
	c.health.CredentialSource = source
	rej := c.rejected
	c.mu.Unlock()
	if rej != nil && rej.creds.Equal(creds) && now.Before(rej.at.Add(c.global.LoginBackoff)) {
		return &LoginRejectedError{VCenter: c.vc.Name, Address: c.vc.Address(), User: creds.Username, Source: source,
			At: rej.at, RetryAt: rej.at.Add(c.global.LoginBackoff), Deferred: true}
	}

	s, err := c.connect(ctx, creds)
	if err != nil {
		if isInvalidLogin(err) {
			at := c.opts.Clock.Now()
			rerr := &LoginRejectedError{VCenter: c.vc.Name, Address: c.vc.Address(), User: creds.Username, Source: source,
				At: at, RetryAt: at.Add(c.global.LoginBackoff)}
			c.mu.Lock()
			c.rejected = &rejection{creds: creds, at: at}
			c.health.NextLogin = rerr.RetryAt
			c.setStateLocked(Down, rerr)
			c.mu.Unlock()
			c.log.Error(rerr, "Login rejected", "vcenter", c.vc.Name)
			return rerr
		}
		c.fail(err)
		return c.Unavailable()
	}
	c.mu.Lock()
	old := c.sess
	c.sess = s
	c.gen++
	c.loginCount++
	c.rejected = nil
	c.setStateLocked(Connected, nil)
	c.mu.Unlock()
	c.log.Info("Logged in to vCenter", "vcenter", c.vc.Name, "address", c.vc.Address(), "user", creds.Username, "credentialSource", source)
	if old != nil {
		go c.logout(old) // the old session may still be valid on the server (for example only REST expired)
	}
	return nil
}

// fail records a failure to connect or log in: the vCenter is down.
func (c *Client) fail(err error) {
	c.mu.Lock()
	c.setStateLocked(Down, err) // the session object is kept: a probe may find it valid after an outage
	c.mu.Unlock()
}

// Unavailable returns the error calls get while the vCenter is down.
func (c *Client) Unavailable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unavailableLocked()
}

// connect builds fresh SOAP and REST clients and logs both in.
func (c *Client) connect(ctx context.Context, creds credentials.Credentials) (*Session, error) {
	u := &url.URL{Scheme: "https", Host: c.vc.Address(), Path: "/sdk"}
	sc := soap.NewClient(u, c.vc.InsecureFlag)
	t := sc.DefaultTransport()
	t.TLSClientConfig = c.tls
	t.DialTLSContext = dialer{tls: c.tls, timeout: c.global.ConnectTimeout}.DialTLSContext
	t.ResponseHeaderTimeout = c.global.RequestTimeout
	sc.UserAgent = c.opts.UserAgent
	if c.opts.WrapTransport != nil {
		sc.Client.Transport = c.opts.WrapTransport(c.vc.Name, t)
	}
	vim, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, err
	}
	vim.RoundTripper = observedSOAP{next: vim25.Retry(sc, vim25.RetryTemporaryNetworkError, c.vc.SOAPRoundtripCount),
		vcenter: c.vc.Name, obs: c.opts.Observer}
	user := url.UserPassword(creds.Username, creds.Password.Reveal())
	err = session.NewManager(vim).Login(ctx, user)
	c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
	if err != nil {
		return nil, err
	}
	rc := rest.NewClient(vim)
	var rt http.RoundTripper = rc.DefaultTransport()
	if c.opts.WrapTransport != nil {
		rt = c.opts.WrapTransport(c.vc.Name, rt)
	}
	rc.Client.Client.Transport = observedHTTP{next: rt, vcenter: c.vc.Name, obs: c.opts.Observer}
	err = rc.Login(ctx, user)
	c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
	if err != nil {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = session.NewManager(vim).Logout(lctx)
		cancel()
		return nil, err
	}
	return &Session{VIM: vim, REST: rc}, nil
}

// probe checks both sessions: it keeps them alive, notices expiry and
// outages. It returns nil when both are valid.
func (c *Client) probe(ctx context.Context) error {
	c.mu.Lock()
	s, gen := c.sess, c.gen
	c.mu.Unlock()
	if s == nil {
		return c.relogin(ctx, gen)
	}
	pctx, cancel := context.WithTimeout(ctx, c.global.ConnectTimeout)
	defer cancel()
	us, err := session.NewManager(s.VIM).UserSession(pctx)
	if err == nil && us != nil {
		var rs *rest.Session
		rs, err = s.REST.Session(pctx)
		if err == nil && rs == nil {
			err = errExpired
		}
	} else if err == nil {
		err = errExpired
	}
	switch {
	case err == nil:
		c.mu.Lock()
		c.setStateLocked(Connected, nil)
		c.mu.Unlock()
		return nil
	case errors.Is(err, errExpired) || isNotAuthenticated(err):
		c.log.V(2).Info("Session expired; logging in again", "vcenter", c.vc.Name)
		return c.relogin(ctx, gen)
	default:
		c.fail(err)
		return err
	}
}

var errExpired = errors.New("session expired")

// loginOutcome marks a refused login with ErrLoginRejected for observers.
func loginOutcome(err error) error {
	if err != nil && isInvalidLogin(err) {
		return ErrLoginRejected
	}
	return err
}

func (c *Client) logout(s *Session) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.REST.Logout(ctx)
	_ = session.NewManager(s.VIM).Logout(ctx)
}

// run keeps the client connected until ctx ends.
func (c *Client) run(ctx context.Context) {
	backoff := c.opts.RetryMin
	wait := time.Duration(0)
	changed := c.opts.Credentials.Changed()
	for {
		if wait > 0 {
			t := c.opts.Clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			case <-c.wake:
				t.Stop()
			case <-changed:
				t.Stop()
				changed = c.opts.Credentials.Changed()
				if c.Health().State == Connected {
					wait = c.opts.KeepAlive
					continue // sessions stay valid; new credentials are used at the next login
				}
			}
		}
		c.mu.Lock()
		hasSession := c.sess != nil
		c.mu.Unlock()
		var err error
		if hasSession {
			err = c.probe(ctx)
		} else {
			err = c.relogin(ctx, 0)
		}
		c.markFirst()
		var rej *LoginRejectedError
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			backoff = c.opts.RetryMin
			wait = c.opts.KeepAlive
		case errors.As(err, &rej):
			wait = max(rej.RetryAt.Sub(c.opts.Clock.Now()), c.opts.RetryMin)
		default:
			c.log.V(1).Info("vCenter not reachable; will retry", "vcenter", c.vc.Name, "retryIn", backoff, "err", err)
			wait = backoff
			backoff = min(2*backoff, c.opts.RetryMax)
		}
	}
}

func (c *Client) markFirst() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.firstDone {
		c.firstDone = true
		close(c.first)
	}
}

// close waits for a login in flight (bounded), then logs the session out.
func (c *Client) close() {
	c.mu.Lock()
	f := c.flight
	c.mu.Unlock()
	if f != nil {
		select {
		case <-f.done:
		case <-time.After(5 * time.Second):
		}
	}
	c.mu.Lock()
	s := c.sess
	c.sess = nil
	c.setStateLocked(Down, errors.New("client closed"))
	c.mu.Unlock()
	if s != nil {
		c.logout(s)
	}
}

func isNotAuthenticated(err error) bool {
	return fault.Is(err, &types.NotAuthenticated{}) || isRESTStatus(err, http.StatusUnauthorized)
}

func isInvalidLogin(err error) bool {
	return fault.Is(err, &types.InvalidLogin{}) || isRESTStatus(err, http.StatusUnauthorized)
}

func isRESTStatus(err error, code int) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if rest.IsStatusError(e, code) {
			return true
		}
	}
	return false
}

// isTransport reports whether err means the vCenter was not reached or did
// not answer (as opposed to answering with a fault).
func isTransport(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return true
	}
	var ce *CertificateError
	return errors.As(err, &ce)
}
