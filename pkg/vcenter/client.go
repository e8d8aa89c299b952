package vcenter

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/flight"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/notify"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// CredentialSource gives the current credentials of a vCenter (in any
// mode) and signals changes. *credentials.Manager implements it.
type CredentialSource interface {
	Get(vc config.VCenter) (secret.Credentials, string, error)
	Changed() <-chan struct{}
}

// CredentialLoader is implemented by credential sources that read their
// sources in the background (Secrets through informers). A client's first
// attempt waits for that first read (at most credentialWait), so that a
// vCenter is not reported down for "no credentials" while they are being
// read.
type CredentialLoader interface {
	WaitLoaded(ctx context.Context) error
}

// credentialWait bounds how long a first attempt waits for the credential
// sources' first read (an unreachable API server must not stall vCenters
// with inline credentials).
const credentialWait = 30 * time.Second

// Options tunes the clients. Credentials is required.
type Options struct {
	Credentials CredentialSource
	// KeepAlive is how often an idle session is checked (and so kept alive);
	// default 5m, well below vCenter's 30 minute idle timeout.
	KeepAlive time.Duration
	// RetryMin and RetryMax bound the back-off between attempts to reach a
	// vCenter that is down (defaults 1s and 8s). An attempt is a cheap
	// unauthenticated probe bounded by ProbeTimeout; only a vCenter that
	// answers it gets a login, so a short RetryMax costs the vCenter nothing
	// and a returning vCenter is noticed within RetryMax (+10% jitter) +
	// ProbeTimeout: 13.8 s with the defaults.
	RetryMin, RetryMax time.Duration
	// ProbeTimeout bounds the reachability probe (default 5s, at most the
	// connect timeout). A black-holed vCenter costs one probe of this length
	// per attempt; a refused connection fails at once.
	ProbeTimeout time.Duration
	// WrapTransport, if set, wraps the HTTP transport of every SOAP and REST
	// client, for example to count requests.
	WrapTransport func(vcenter string, rt http.RoundTripper) http.RoundTripper
	// Observer is told about every request and login (metrics).
	Observer Observer
	// Decoding is the fast decoder's policy, shared by every client (nil:
	// on, with the default shadow decodes).
	Decoding *Decoding
	// UserAgent is sent with every request.
	UserAgent string
	// Clock is for tests; default the real clock.
	Clock clock.WithTicker
}

func (o *Options) defaults(global config.Global) {
	if o.KeepAlive <= 0 {
		o.KeepAlive = 5 * time.Minute
	}
	if o.RetryMin <= 0 {
		o.RetryMin = time.Second
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(8*time.Second, o.RetryMin)
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 5 * time.Second
	}
	if global.ConnectTimeout > 0 {
		o.ProbeTimeout = min(o.ProbeTimeout, global.ConnectTimeout)
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
	if o.Decoding == nil {
		o.Decoding = &Decoding{}
	}
}

// Session is a logged-in pair of clients for one vCenter: SOAP (vim25) and
// vAPI REST (tags). Use it only inside Client.Do.
//
// A vAPI session alone may be replaced (renew.go): a new Session then
// holds the same VIM, whose property collectors and views stay valid.
type Session struct {
	VIM  *vim25.Client
	REST *rest.Client

	mode secret.Mode // how it was opened
	// The token lifetimes of a certificate login (zero in other modes):
	// when the vAPI session's token is renewed, and when the SOAP
	// session's token expires and would be renewed if vCenter ends SOAP
	// sessions with their tokens.
	restRenewAt, restExpires, soapRenewAt, soapExpires time.Time
}

// Client is the connection to one vCenter. Its lock guards only its own
// fields and is never held during network I/O; clients share nothing.
//
// A Client is built without I/O and cannot fail: a problem of its own
// configuration (an unreadable caFile, missing credentials) is its health,
// reported and retried like an outage, so that one vCenter never stops the
// others.
type Client struct {
	vc     config.VCenter
	global config.Global
	opts   Options
	wake   chan struct{}
	first  chan struct{} // closed after the first connection attempt
	log    klog.Logger   // carries vcenter=<name>
	logins *flight.Group // the login in flight; closed by close

	mu         sync.Mutex
	sess       *Session
	sessCreds  sessionCreds // what sess was logged in with
	gen        uint64       // incremented at every new session
	restGen    uint64       // incremented at every new vAPI session (a new session's too)
	flightKind int          // the kind of login the flight makes (loginFull, loginREST)
	health     Health
	changed    notify.Notifier // at the next health change
	rejected   *rejection
	flight     *flight.Flight // the login under way
	firstDone  bool
	loginCount int // successful logins, for tests and metrics
	renewals   int // vAPI sessions renewed on a kept SOAP session
	// soapEndsWithToken: this vCenter ended a SOAP session when its token
	// expired, so certificate sessions are replaced before their token
	// expires (renew.go).
	soapEndsWithToken bool
	// vapiErr is the last failed renewal of the vAPI session while it
	// fails (since vapiSince); vapiShown whether it was last shown as
	// Degraded (vapi.go). retired are replaced vAPI sessions to log out.
	vapiErr   error
	vapiSince time.Time
	vapiShown bool
	retired   []retired
}

func newClient(vc config.VCenter, global config.Global, opts Options) *Client {
	return &Client{vc: vc, global: global, opts: opts,
		wake: make(chan struct{}, 1), first: make(chan struct{}), logins: flight.NewGroup(),
		log:    klog.Background().WithValues("vcenter", vc.Name),
		health: Health{State: Down, Since: opts.Clock.Now(), LastError: ErrNotConnectedYet}}
}

// Name is the vCenter's name in the config.
func (c *Client) Name() string { return c.vc.Name }

// Config is the vCenter's configuration.
func (c *Client) Config() config.VCenter { return c.vc }

// Logins is the number of successful logins so far.
func (c *Client) Logins() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loginCount
}

// Renewals is the number of vAPI sessions renewed on a kept SOAP session
// (a token about to expire, a vAPI session that expired alone).
func (c *Client) Renewals() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.renewals
}

// Do runs fn with the current session, bounded by ctx and the configured
// request timeout. If the session expired (NotAuthenticated, HTTP 401) it
// logs in again once and retries fn once. A vCenter that is down fails at
// once with an error wrapping ErrUnavailable, without network I/O.
func (c *Client) Do(ctx context.Context, fn func(context.Context, *Session) error) error {
	s, gen, restGen, err := c.session()
	if err != nil {
		return err
	}
	err = c.call(ctx, s, fn)
	if err != nil && isNotAuthenticated(err) {
		var lerr error
		if isRESTStatus(err, http.StatusUnauthorized) {
			c.log.V(2).Info("vAPI session expired; opening a new one")
			lerr = c.reloginREST(ctx, gen, restGen)
		} else {
			c.log.V(2).Info("Session expired; logging in again")
			c.noteSOAPEnded(s)
			lerr = c.relogin(ctx, gen)
		}
		if lerr != nil {
			// The loop may be asleep for KeepAlive: it takes over the
			// retries now (after the back-off of a refused login).
			c.poke()
			return lerr
		}
		if s, _, _, err = c.session(); err != nil {
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

// session returns the current session and the generations of the session
// and of its vAPI session.
func (c *Client) session() (*Session, uint64, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil || c.health.State == Down {
		return nil, 0, 0, c.unavailableLocked()
	}
	return c.sess, c.gen, c.restGen, nil
}

// WaitFirstAttempt waits until the client has made its first attempt to
// connect (successful or not), or ctx ends. One-shot commands use it; the
// controller manager never waits.
func (c *Client) WaitFirstAttempt(ctx context.Context) error {
	select {
	case <-c.first:
		return nil
	case <-ctx.Done():
		return ctx.Err()
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
