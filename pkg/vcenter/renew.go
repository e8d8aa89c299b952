package vcenter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/sts"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// Sessions that outlive their tokens.
//
// A vAPI (REST) session opened with an STS token ends when the token
// expires; vCenter documents no such end for the SOAP session, whose
// property collectors hold the inventory (docs/security.md, "Token
// lifetimes"). So a vAPI session that ends, or whose token reaches three
// quarters of its lifetime, is replaced alone, on the same SOAP session:
// the inventory reads nothing again. Only a vCenter seen ending a SOAP
// session with its token gets whole new sessions, before the token
// expires (the old one serves until the new one is in place); each costs
// the inventory a full read (docs/performance.md).

// token is an STS token and when to renew it.
type token struct {
	signer           *sts.Signer
	renewAt, expires time.Time // on the local clock
}

// renewShare is the part of a token's lifetime after which it is renewed:
// three quarters, so that a renewal that fails is retried several times
// before the token expires.
const renewShare = 0.75

// issueToken asks STS for a holder-of-key token of global.tokenLifetime
// for cert. The granted lifetime (STS caps it at its maximum) is measured
// on STS's own clock and laid on the local one, so a clock skew between
// the two does not move the renewal.
func (c *Client) issueToken(ctx context.Context, vim *vim25.Client, cert secret.Certificate) (token, error) {
	pair, err := cert.KeyPair()
	if err != nil {
		return token{}, err
	}
	tokens, err := sts.NewClient(ctx, vim)
	if err != nil {
		return token{}, fmt.Errorf("STS: %w", err)
	}
	// Its own service client, on vim's TLS transport but not on its
	// wrappers: wrapped and observed like every other request.
	if c.opts.WrapTransport != nil {
		tokens.Client.Client.Transport = c.opts.WrapTransport(c.vc.Name, tokens.Client.Client.Transport)
	}
	tokens.RoundTripper = observedSOAP{next: tokens.RoundTripper, vcenter: c.vc.Name, obs: c.opts.Observer}
	asked := c.global.TokenLifetime
	if asked <= 0 {
		asked = 24 * time.Hour
	}
	now := c.opts.Clock.Now()
	signer, err := tokens.Issue(ctx, sts.TokenRequest{Certificate: &pair, Delegatable: true, Lifetime: asked})
	if err != nil {
		refused := isSTSRefusal(err)
		err = fmt.Errorf("STS issued no token for %s: %w", cert.Identity(), err)
		if refused {
			err = &refusedError{err: err}
		}
		c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
		return token{}, err
	}
	granted := signer.Lifetime.Expires.Sub(signer.Lifetime.Created)
	if granted <= 0 || granted > asked {
		granted = asked // no lifetime in the answer: the one asked for
	}
	if granted < asked {
		c.log.V(1).Info("STS granted a shorter token lifetime than asked (its maximum holder-of-key lifetime is lower); renewing within it",
			"asked", asked, "granted", granted)
	}
	return token{signer: signer, renewAt: now.Add(time.Duration(float64(granted) * renewShare)), expires: now.Add(granted)}, nil
}

// reloginREST makes sure a vAPI session newer than restGen (or a session
// newer than gen) exists, replacing only the vAPI session when the SOAP
// session is kept.
func (c *Client) reloginREST(ctx context.Context, gen, restGen uint64) error {
	return c.once(ctx, loginREST, gen, restGen, c.renewREST)
}

// renewREST opens a new vAPI session on the current SOAP session, with the
// current credentials (a new token in certificate mode). A shared session
// (whose vAPI session is its SOAP session), credentials of another user or
// source, or a vCenter that ends SOAP sessions with their tokens get a
// full login instead. Credentials vCenter refused are not tried again
// before the login back-off (a refusal is a rejected login, as for any
// login). A renewal that fails otherwise while the vAPI session is still
// valid keeps it and leaves the health alone (the loop retries); once it
// has expired, a full login follows.
func (c *Client) renewREST(ctx context.Context) error {
	c.mu.Lock()
	s, had, strict := c.sess, c.sessCreds, c.soapEndsWithToken
	c.mu.Unlock()
	if s == nil || s.mode == secret.ModeSharedSession || (strict && s.mode == secret.ModeCertificate) {
		return c.login(ctx)
	}
	now := c.opts.Clock.Now()
	creds, source, err := c.credentials()
	if err != nil {
		return err
	}
	if creds.Mode() != s.mode || !secret.SameIdentity(creds, had.creds) || source != had.source {
		return c.login(ctx)
	}
	if err := c.deferred(now, creds, source); err != nil {
		return err
	}
	// A SOAP session that ended (a restarted vCenter) is not worth a new
	// vAPI session: one request tells.
	if us, err := session.NewManager(s.VIM).UserSession(ctx); err == nil && us == nil || isNotAuthenticated(err) {
		return c.login(ctx)
	}
	rc, tok, err := c.loginREST(ctx, s.VIM, creds)
	switch {
	case err == nil:
	case isNotAuthenticated(err) && !isRESTStatus(err, http.StatusUnauthorized):
		return c.login(ctx) // the SOAP session is gone too (STS answers through it)
	case isRefused(err):
		// Refused credentials are not tried again before the login
		// back-off (an SSO lockout), but the SOAP session goes on.
		at := c.opts.Clock.Now()
		c.mu.Lock()
		c.rejected = &rejection{creds: creds, at: at}
		c.mu.Unlock()
		return c.renewalFailed(s, &LoginRejectedError{VCenter: c.vc.Name, Address: c.vc.Address(), User: creds.Identity(), Mode: creds.Mode(),
			Source: source, At: at, RetryAt: at.Add(c.global.LoginBackoff)}, c.global.LoginBackoff)
	default:
		return c.renewalFailed(s, err, c.opts.RetryMin)
	}
	// The credentials may have been withdrawn or replaced meanwhile, as
	// for a login.
	if err := c.stillCurrent(creds, source); err != nil {
		c.logoutREST(rc)
		c.poke()
		return fmt.Errorf("renewing the vAPI session: %w", err)
	}
	ns := &Session{VIM: s.VIM, REST: rc, mode: s.mode, restRenewAt: tok.renewAt, restExpires: tok.expires,
		soapRenewAt: s.soapRenewAt, soapExpires: s.soapExpires}
	c.mu.Lock()
	if c.sess != s {
		c.mu.Unlock()
		c.logoutREST(rc) // replaced meanwhile (credentials changed, closed)
		return nil
	}
	c.sess = ns
	c.restGen++
	c.renewals++
	c.rejected = nil
	c.setStateLocked(Connected, nil)
	c.mu.Unlock()
	c.renewalSucceeded()
	c.log.V(1).Info("Renewed the vAPI session; the SOAP session and the inventory are kept", "mode", s.mode)
	// Calls under way on the old vAPI session finish first.
	c.retireREST(s.REST)
	return nil
}

// loginREST opens a vAPI session on vim's transport with creds (password
// or certificate), and says when to renew it (zero: only when it ends).
func (c *Client) loginREST(ctx context.Context, vim *vim25.Client, creds secret.Credentials) (*rest.Client, token, error) {
	rc := c.newREST(vim)
	switch cr := creds.(type) {
	case secret.Password:
		err := rc.Login(ctx, url.UserPassword(cr.Username, cr.Password.Reveal()))
		c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
		return rc, token{}, refusal(err)
	case secret.Certificate:
		if err := cr.CheckValidity(c.opts.Clock.Now()); err != nil {
			return nil, token{}, err
		}
		tok, err := c.issueToken(ctx, vim, cr)
		if err != nil {
			return nil, token{}, err
		}
		err = rc.LoginByToken(rc.WithSigner(ctx, tok.signer))
		c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
		return rc, tok, refusal(err)
	}
	return nil, token{}, fmt.Errorf("credentials of mode %q have no vAPI login of their own", creds.Mode())
}

// logoutREST ends a vAPI session that is no longer used.
func (c *Client) logoutREST(rc *rest.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = rc.Logout(ctx)
}

// noteSOAPEnded records a SOAP session of a certificate login that ended
// when its token expired: noticed from the last twentieth of its lifetime
// (the clocks' skew, the request's own time) until a keep-alive period and
// a connect timeout after it (the next request notices). An end outside
// that window (an administrator, a restart, an idle timeout after a
// partition) teaches nothing. Learnt, this vCenter ends SOAP sessions with
// their tokens, so from now on sessions are replaced before.
func (c *Client) noteSOAPEnded(s *Session) {
	if s == nil || s.mode != secret.ModeCertificate || s.soapRenewAt.IsZero() {
		return
	}
	now := c.opts.Clock.Now()
	from := s.soapExpires.Add(-s.soapExpires.Sub(s.soapRenewAt) / 5)
	until := s.soapExpires.Add(c.opts.KeepAlive + c.global.ConnectTimeout)
	if now.Before(from) || now.After(until) {
		return
	}
	c.mu.Lock()
	first := !c.soapEndsWithToken
	c.soapEndsWithToken = true
	c.mu.Unlock()
	if first {
		c.log.Info("vCenter ended a SOAP session when its token expired: sessions are replaced before their token expires from now on, each with a full inventory read",
			"tokenExpired", s.soapExpires)
	}
}

// What a connected session needs now (renewal).
const (
	renewNothing = iota
	renewSession // a whole new session, before the SOAP session ends with its token
	renewREST    // a new vAPI session
)

// renewal returns what a connected session needs now, and how long the
// loop may wait before the next renewal: RetryMin when one is due now (its
// last attempt failed, or a probe ran instead), so that it is not put off
// by a keep-alive period.
func (c *Client) renewal(s *Session) (due int, wait time.Duration) {
	c.mu.Lock()
	strict := c.soapEndsWithToken
	c.mu.Unlock()
	now := c.opts.Clock.Now()
	wait = time.Duration(1<<63 - 1)
	at := func(t time.Time, what int) {
		switch {
		case t.IsZero():
		case !now.Before(t):
			if due == renewNothing {
				due = what
			}
			wait = min(wait, c.opts.RetryMin)
		default:
			wait = min(wait, t.Sub(now))
		}
	}
	if strict && s.mode == secret.ModeCertificate {
		at(s.soapRenewAt, renewSession) // a whole new session, before the old one ends
	}
	at(s.restRenewAt, renewREST)
	return due, wait
}

// errRESTExpired is a vAPI session found expired by the keep-alive probe.
var errRESTExpired = errors.New("vAPI session expired")
