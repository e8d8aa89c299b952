package vcenter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// sessionCreds is what a session was logged in with: a change of user or
// source means the old credentials were withdrawn, so the session is
// replaced at once; a changed password alone (rotation) keeps it.
type sessionCreds struct {
	creds  secret.Credentials
	source string
}

type rejection struct {
	creds secret.Credentials
	at    time.Time
}

// relogin makes sure a session newer than gen exists. Concurrent callers
// share one login; each waits only as long as its own ctx allows.
func (c *Client) relogin(ctx context.Context, gen uint64) error {
	return c.once(ctx, loginFull, gen, 0, c.login)
}

// The kinds of login a flight makes.
const (
	loginFull = iota // a new SOAP and vAPI session
	loginREST        // a new vAPI session on the SOAP session
)

// once runs login, of kind, unless what it would make exists already: a
// session newer than gen (a full login), or a vAPI session newer than
// restGen (a renewal). Concurrent callers share one run; a caller that
// needs a full login and finds a renewal under way waits for it, then
// logs in itself.
func (c *Client) once(ctx context.Context, kind int, gen, restGen uint64, login func(context.Context) error) error {
	c.mu.Lock()
	for {
		if c.sess != nil && (c.gen != gen || (kind == loginREST && c.restGen != restGen)) {
			c.mu.Unlock()
			return nil // someone else already logged in again
		}
		if c.flight == nil || kind == c.flightKind || c.flightKind == loginFull {
			break
		}
		f := c.flight // a renewal, and a full login is needed
		c.mu.Unlock()
		if err := f.Wait(ctx); err != nil && ctx.Err() != nil {
			return err
		}
		c.mu.Lock()
	}
	if c.flight == nil {
		// The login outlives a caller that gives up, so that the others
		// (and the next call) get its result; it is bounded by
		// ConnectTimeout, and close ends it.
		c.flightKind = kind
		c.flight = c.logins.Go(ctx, c.global.ConnectTimeout, func(ctx context.Context) error {
			err := login(ctx)
			c.mu.Lock()
			c.flight = nil
			c.mu.Unlock()
			return err
		})
	}
	f := c.flight
	c.mu.Unlock()
	return f.Wait(ctx)
}

// errCredentialsChanged: the credentials a login or renewal used were
// replaced while it was in flight.
var errCredentialsChanged = errors.New("the credentials were replaced meanwhile; logging in again with the new ones")

// stillCurrent checks, after a login or a vAPI renewal with creds from
// source, that they are still this vCenter's: the provider's error if
// they were withdrawn, errCredentialsChanged if another user, mode or
// source replaced them. A session opened with stale ones must not be
// used, nor left open.
func (c *Client) stillCurrent(creds secret.Credentials, source string) error {
	now, nowSource, err := c.opts.Credentials.Get(c.vc)
	switch {
	case err != nil:
		return err
	case !secret.SameIdentity(now, creds) || nowSource != source:
		return errCredentialsChanged
	}
	return nil
}

// credentials returns the current credentials; without usable ones, the
// vCenter is down (and its session, if any, is dropped: see revoke). A
// certificate outside its validity period is refused here, before any
// request.
func (c *Client) credentials() (secret.Credentials, string, error) {
	creds, source, err := c.opts.Credentials.Get(c.vc)
	if cert, ok := creds.(secret.Certificate); ok && err == nil {
		if verr := cert.CheckValidity(c.opts.Clock.Now()); verr != nil {
			err = fmt.Errorf("vcenter %q: credentials from %s: %w", c.vc.Name, source, verr)
		}
	}
	if err != nil {
		c.fail(err)
		return creds, source, c.Unavailable()
	}
	c.mu.Lock()
	c.health.CredentialSource = source
	c.mu.Unlock()
	return creds, source, nil
}

// login opens a new session, unless the current credentials were rejected
// less than the login back-off ago.
func (c *Client) login(ctx context.Context) error { return c.open(ctx, false) }

// replace opens a new session in place of one that is still valid (its
// token is about to expire on a vCenter that ends SOAP sessions with
// their token): a failure that is not a refusal leaves the current session
// and the health alone, to be retried.
func (c *Client) replace(ctx context.Context) error { return c.open(ctx, true) }

// open logs in anew; keep says a failure (other than a refusal) keeps the
// current session in use.
func (c *Client) open(ctx context.Context, keep bool) error {
	now := c.opts.Clock.Now()
	creds, source, err := c.credentials()
	if err != nil {
		return err
	}
	if err := c.deferred(now, creds, source); err != nil {
		return err
	}

	s, err := c.connect(ctx, creds)
	if err != nil {
		if isRefused(err) {
			return c.reject(creds, source)
		}
		if keep {
			return fmt.Errorf("vCenter %q: replacing the session before its token expires: %w", c.vc.Name, err)
		}
		c.fail(err)
		return c.Unavailable()
	}
	// The credentials may have been withdrawn or replaced while the login
	// was in flight: such a session must not be used, nor left open.
	if err := c.stillCurrent(creds, source); err != nil {
		c.logout(s)
		if errors.Is(err, errCredentialsChanged) {
			c.poke()
		}
		c.fail(err)
		c.log.Info("Credentials withdrawn or replaced during the login; the new session was logged out", "err", err)
		return c.Unavailable()
	}
	c.mu.Lock()
	old := c.sess
	c.sess = s
	c.sessCreds = sessionCreds{creds: creds, source: source}
	c.gen++
	c.restGen++
	c.loginCount++
	c.rejected = nil
	c.setStateLocked(Connected, nil)
	c.mu.Unlock()
	c.log.Info("Logged in to vCenter", "address", c.vc.Address(), "mode", creds.Mode(), "user", creds.Identity(), "credentialSource", source)
	c.renewalSucceeded() // a new vAPI session too
	if old != nil {
		// The old session may still be valid on the server (for example
		// only REST expired): logged out by the loop at once. Requests
		// still under way on it (a long poll, a collector's cleanup)
		// return their connections to its pool after the logout closed
		// it: they are closed again once every such request has ended.
		c.retire(0, func(context.Context) { c.logout(old) })
		c.retire(c.global.RequestTimeout+5*time.Second, func(context.Context) { old.VIM.Client.CloseIdleConnections() })
	}
	return nil
}

// deferred returns a LoginRejectedError when creds were rejected less than
// the login back-off ago: no login is tried with them before.
func (c *Client) deferred(now time.Time, creds secret.Credentials, source string) error {
	c.mu.Lock()
	rej := c.rejected
	c.mu.Unlock()
	if rej != nil && secret.Equal(rej.creds, creds) && now.Before(rej.at.Add(c.global.LoginBackoff)) {
		return &LoginRejectedError{VCenter: c.vc.Name, Address: c.vc.Address(), User: creds.Identity(), Mode: creds.Mode(), Source: source,
			At: rej.at, RetryAt: rej.at.Add(c.global.LoginBackoff), Deferred: true}
	}
	return nil
}

// reject records that vCenter refused creds: the vCenter is down, and
// they are not tried again before the login back-off.
func (c *Client) reject(creds secret.Credentials, source string) error {
	at := c.opts.Clock.Now()
	rerr := &LoginRejectedError{VCenter: c.vc.Name, Address: c.vc.Address(), User: creds.Identity(), Mode: creds.Mode(), Source: source,
		At: at, RetryAt: at.Add(c.global.LoginBackoff)}
	c.mu.Lock()
	c.rejected = &rejection{creds: creds, at: at}
	c.health.NextLogin = rerr.RetryAt
	c.setStateLocked(Down, rerr)
	c.mu.Unlock()
	c.log.Error(rerr, "Login rejected")
	return rerr
}

// newTransport returns an HTTP transport that verifies the vCenter as
// configured. The TLS settings are built at every use, so that a fixed
// caFile is picked up by the next attempt without a restart.
func (c *Client) newTransport(base *http.Transport) (*http.Transport, error) {
	tc, err := newTLSConfig(c.vc)
	if err != nil {
		return nil, err
	}
	base.TLSClientConfig = tc
	base.DialTLSContext = dialer{tls: tc, timeout: c.global.ConnectTimeout}.DialTLSContext
	base.ResponseHeaderTimeout = c.global.RequestTimeout
	return base, nil
}

func (c *Client) logout(s *Session) {
	if s.REST != nil && s.mode != secret.ModeSharedSession {
		// A shared session's REST client uses the SOAP session: the SOAP
		// logout ends both.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.REST.Logout(ctx)
		cancel()
	}
	// A time of its own: a slow REST logout must not leave the SOAP
	// session open on the vCenter (it counts against its session limit).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = session.NewManager(s.VIM).Logout(ctx)
	// Each session has its own transport (SOAP and REST share it): its
	// idle connections, two goroutines each, would stay open until the
	// vCenter closes them.
	s.VIM.Client.CloseIdleConnections()
}

// close ends a login in flight and waits for it, then logs the session
// out.
func (c *Client) close() {
	c.logins.Close()
	c.mu.Lock()
	s := c.sess
	c.sess = nil
	c.setStateLocked(Down, errors.New("client closed"))
	c.mu.Unlock()
	c.runRetired(context.Background(), true)
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
