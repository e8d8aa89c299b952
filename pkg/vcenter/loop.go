package vcenter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// run is the client's one background loop: it connects, keeps the
// session alive, probes a vCenter that is down and follows credential
// changes, until ctx ends. Pool.Start starts it, Pool.Close joins it.
//
// Timing: a healthy session is checked every KeepAlive; a vCenter that is
// down gets a cheap reachability probe after a back-off from RetryMin to
// RetryMax (no login is sent to a vCenter that does not answer); a
// rejected login is not retried with the same credentials before
// loginBackoff.
func (c *Client) run(ctx context.Context) {
	if l, ok := c.opts.Credentials.(CredentialLoader); ok {
		wctx, cancel := context.WithTimeout(ctx, credentialWait)
		_ = l.WaitLoaded(wctx) // after the timeout the attempt names what is missing
		cancel()
	}
	bo := c.backoff()
	changed := c.opts.Credentials.Changed()
	wait := time.Duration(0)
	reported := false // a failure before the first success was logged at error level
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
				if !c.credentialsChanged(ctx) {
					continue // same user and source: the session stays; the next login uses the new password
				}
			}
		}
		err := c.attempt(ctx)
		c.markFirst()
		next := c.runRetired(ctx, false)
		var rej *LoginRejectedError
		var ren *RenewalError
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			bo = c.backoff()
			wait = c.nextCheck()
			reported = true
		case errors.As(err, &ren):
			// Logged by renewalFailed (once at error level); the SOAP
			// session goes on.
			wait = max(ren.RetryAt.Sub(c.opts.Clock.Now()), bo.Step())
			reported = true
		case errors.As(err, &rej):
			wait = max(rej.RetryAt.Sub(c.opts.Clock.Now()), c.opts.RetryMin)
			reported = true // logged at error level by login
		default:
			wait = bo.Step()
			if !reported {
				// Start-up failures (unreachable, a bad caFile, no
				// credentials yet) change no state, so nothing else says
				// them at -v=0: once, then at -v=1 on every retry.
				reported = true
				c.log.Error(err, "vCenter not usable at start; retrying in the background (the other vCenters are not affected)", "retryIn", wait)
				continue
			}
			c.log.V(1).Info("vCenter not usable; will retry", "retryIn", wait, "err", err)
		}
		if !next.IsZero() {
			wait = max(min(wait, next.Sub(c.opts.Clock.Now())), time.Millisecond)
		}
	}
}

// backoff is the wait between attempts to reach a vCenter that is down.
func (c *Client) backoff() *wait.Backoff {
	return Backoff(c.opts.RetryMin, c.opts.RetryMax)
}

// attempt brings the client to Connected if it can: it probes the
// vCenter's reachability first when there is no working session, then
// checks or renews the session.
func (c *Client) attempt(ctx context.Context) error {
	c.mu.Lock()
	s, gen, restGen, state := c.sess, c.gen, c.restGen, c.health.State
	c.mu.Unlock()
	if s == nil {
		if _, _, err := c.credentials(); err != nil {
			return err // nothing to log in with: not worth a probe
		}
	}
	if s == nil || state != Connected {
		if err := c.reach(ctx); err != nil {
			c.fail(err)
			return err
		}
	}
	if s == nil {
		return c.relogin(ctx, gen)
	}
	if due, _ := c.renewal(s); state == Connected {
		switch due {
		case renewSession:
			return c.once(ctx, loginFull, gen, 0, c.replace)
		case renewREST:
			return c.reloginREST(ctx, gen, restGen)
		}
	}
	return c.probe(ctx, s, gen, restGen)
}

// nextCheck is how long a connected client waits before its next check:
// KeepAlive, or less when a session's token is due for renewal sooner.
func (c *Client) nextCheck() time.Duration {
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s == nil {
		return c.opts.KeepAlive
	}
	_, wait := c.renewal(s) // RetryMin when due: never 0 or less
	return min(c.opts.KeepAlive, wait)
}

// reach makes one unauthenticated request (the SDK's version list) bounded
// by ProbeTimeout: any HTTP answer means the vCenter is back. It costs the
// vCenter nothing and never sends credentials.
func (c *Client) reach(ctx context.Context) error {
	t, err := c.newTransport(&http.Transport{})
	if err != nil {
		return err
	}
	defer t.CloseIdleConnections()
	var rt http.RoundTripper = t
	if c.opts.WrapTransport != nil {
		rt = c.opts.WrapTransport(c.vc.Name, rt)
	}
	pctx, cancel := context.WithTimeout(ctx, c.opts.ProbeTimeout)
	defer cancel()
	u := url.URL{Scheme: "https", Host: c.vc.Address(), Path: "/sdk/vimServiceVersions.xml"}
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	res, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		var ce *CertificateError
		if errors.As(err, &ce) {
			return ce
		}
		return fmt.Errorf("vCenter %q (%s) not reachable: %w", c.vc.Name, c.vc.Address(), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	_ = res.Body.Close()
	return nil
}

// probe checks both sessions: it keeps them alive, notices expiry and
// outages. It returns nil when both are valid.
func (c *Client) probe(ctx context.Context, s *Session, gen, restGen uint64) error {
	pctx, cancel := context.WithTimeout(ctx, c.global.ConnectTimeout)
	defer cancel()
	us, err := session.NewManager(s.VIM).UserSession(pctx)
	if err == nil && us != nil {
		var rs *rest.Session
		rs, err = s.REST.Session(pctx)
		if err == nil && rs == nil {
			err = errRESTExpired
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
	case errors.Is(err, errRESTExpired):
		c.log.V(2).Info("vAPI session expired; opening a new one")
		return c.reloginREST(ctx, gen, restGen)
	case errors.Is(err, errExpired) || isNotAuthenticated(err):
		c.noteSOAPEnded(s)
		c.log.V(2).Info("Session expired; logging in again")
		return c.relogin(ctx, gen)
	default:
		c.fail(err)
		return err
	}
}

var errExpired = errors.New("session expired")

// credentialsChanged follows a change of the credential sources. It
// reports whether the client must act now: the credentials were withdrawn
// (the session is logged out at once and the vCenter is down until new
// ones appear) or now come from another user or source (a new login
// replaces the session). A new password for the same user and source
// keeps the session (rotation): it is used at the next login.
func (c *Client) credentialsChanged(ctx context.Context) bool {
	creds, source, err := c.opts.Credentials.Get(c.vc)
	c.mu.Lock()
	s, state, had := c.sess, c.health.State, c.sessCreds
	if err != nil && s != nil {
		c.sess = nil
		c.sessCreds = sessionCreds{}
		c.setStateLocked(Down, err)
	}
	c.mu.Unlock()
	switch {
	case err != nil:
		if s != nil {
			c.log.Info("Credentials withdrawn; logging the session out", "err", err)
			c.logout(s)
		}
		return false
	case s == nil || state != Connected:
		return true // a waiting vCenter tries the new credentials now
	case !secret.SameIdentity(had.creds, creds) || had.source != source:
		c.log.Info("Credentials now come from another user, mode or source; logging in again", "mode", creds.Mode(), "user", creds.Identity(), "credentialSource", source)
		if err := c.relogin(ctx, c.currentGen()); err != nil {
			c.log.Error(err, "Login with the new credentials failed")
		}
		return false
	}
	return false
}

func (c *Client) currentGen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}
