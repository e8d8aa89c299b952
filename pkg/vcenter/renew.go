package vcenter

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

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

// reloginREST makes sure a session newer than gen exists, replacing only
// the vAPI session when the SOAP session is kept.
func (c *Client) reloginREST(ctx context.Context, gen uint64) error {
	return c.once(ctx, gen, c.renewREST)
}

// renewREST opens a new vAPI session on the current SOAP session, with the
// current credentials (a new token in certificate mode). A shared session
// (whose vAPI session is its SOAP session), credentials of another user or
// source, a vCenter that ends SOAP sessions with their tokens, or a failed
// renewal get a full login instead.
func (c *Client) renewREST(ctx context.Context) error {
	c.mu.Lock()
	s, had, strict := c.sess, c.sessCreds, c.soapEndsWithToken
	c.mu.Unlock()
	if s == nil || s.mode == secret.ModeSharedSession || (strict && s.mode == secret.ModeCertificate) {
		return c.login(ctx)
	}
	creds, source, err := c.credentials()
	if err != nil {
		return err
	}
	if creds.Mode() != s.mode || !secret.SameIdentity(creds, had.creds) || source != had.source {
		return c.login(ctx)
	}
	rc, renewAt, err := c.loginREST(ctx, s.VIM, creds)
	if err != nil {
		c.log.V(1).Info("Renewing the vAPI session failed; logging in again", "err", err)
		return c.login(ctx)
	}
	ns := &Session{VIM: s.VIM, REST: rc, mode: s.mode, restRenewAt: renewAt, soapRenewAt: s.soapRenewAt, soapExpires: s.soapExpires}
	c.mu.Lock()
	if c.sess != s {
		c.mu.Unlock()
		c.logoutREST(rc) // replaced meanwhile (credentials changed, closed)
		return nil
	}
	c.sess = ns
	c.gen++
	c.renewals++
	c.setStateLocked(Connected, nil)
	c.mu.Unlock()
	c.log.V(1).Info("Renewed the vAPI session; the SOAP session and the inventory are kept", "mode", s.mode)
	go c.logoutREST(s.REST)
	return nil
}

// loginREST opens a vAPI session on vim's transport with creds (password
// or certificate), and says when to renew it (zero: only when it ends).
func (c *Client) loginREST(ctx context.Context, vim *vim25.Client, creds secret.Credentials) (*rest.Client, time.Time, error) {
	rc := c.newREST(vim)
	switch cr := creds.(type) {
	case secret.Password:
		err := rc.Login(ctx, url.UserPassword(cr.Username, cr.Password.Reveal()))
		c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
		return rc, time.Time{}, refusal(err)
	case secret.Certificate:
		if err := cr.CheckValidity(c.opts.Clock.Now()); err != nil {
			return nil, time.Time{}, err
		}
		tok, err := c.issueToken(ctx, vim, cr)
		if err != nil {
			return nil, time.Time{}, err
		}
		err = rc.LoginByToken(rc.WithSigner(ctx, tok.signer))
		c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
		return rc, tok.renewAt, refusal(err)
	}
	return nil, time.Time{}, fmt.Errorf("credentials of mode %q have no vAPI login of their own", creds.Mode())
}

// logoutREST ends a vAPI session that is no longer used.
func (c *Client) logoutREST(rc *rest.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = rc.Logout(ctx)
}

// noteSOAPEnded records a SOAP session of a certificate login that ended
// when its token expired (within the last twentieth of its lifetime, for
// the clocks' skew and the request's own time; an administrator ending a
// session earlier teaches nothing): this vCenter ends SOAP sessions with
// their tokens, so from now on sessions are replaced before.
func (c *Client) noteSOAPEnded(s *Session) {
	if s == nil || s.mode != secret.ModeCertificate || s.soapRenewAt.IsZero() {
		return
	}
	if c.opts.Clock.Now().Before(s.soapExpires.Add(-s.soapExpires.Sub(s.soapRenewAt) / 5)) {
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

// renewal returns what the loop must do for a connected session now, and
// how long it may wait at most before the next renewal.
func (c *Client) renewal(s *Session) (due func(context.Context, uint64) error, wait time.Duration) {
	c.mu.Lock()
	strict := c.soapEndsWithToken
	c.mu.Unlock()
	now := c.opts.Clock.Now()
	wait = time.Duration(1<<63 - 1)
	at := func(t time.Time, f func(context.Context, uint64) error) {
		if t.IsZero() {
			return
		}
		if !now.Before(t) {
			if due == nil {
				due = f
			}
			return
		}
		wait = min(wait, t.Sub(now))
	}
	if strict && s.mode == secret.ModeCertificate {
		at(s.soapRenewAt, c.relogin) // a whole new session, before the old one ends
	}
	at(s.restRenewAt, c.reloginREST)
	return due, wait
}

// errRESTExpired is a vAPI session found expired by the keep-alive probe.
var errRESTExpired = errors.New("vAPI session expired")
