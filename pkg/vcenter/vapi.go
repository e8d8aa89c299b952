package vcenter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/vapi/rest"
)

// The vAPI (REST) session apart from the SOAP session.
//
// Only the tag cache uses the vAPI session. A vAPI session that cannot be
// renewed (STS unreachable, a refused certificate or password) therefore
// fails only the vAPI calls: the SOAP session, which holds the
// inventory and answers every lookup, goes on. While renewals fail and
// the vAPI session is still valid the vCenter stays Connected (logged once,
// and exported: Health.VAPIError, Health.VAPIExpires); once the vAPI
// session has expired too, it is Degraded, never Down, and renewals are
// retried with the back-off (a refusal: after the login back-off).

// ErrVAPIUnavailable means the vAPI session expired and could not be
// renewed: tags cannot be read; SOAP calls are unaffected.
var ErrVAPIUnavailable = errors.New("vAPI session unavailable")

// RenewalError is a failed renewal of the vAPI session on a SOAP session
// that is kept.
type RenewalError struct {
	VCenter string
	// Expires is when the current vAPI session's token expires (zero
	// outside certificate mode, or when it has expired).
	Expires time.Time
	// RetryAt is when the renewal is tried again.
	RetryAt time.Time
	// Err is why it failed (a *LoginRejectedError when refused).
	Err error
}

func (e *RenewalError) Error() string {
	state := "the vAPI session has expired: tags cannot be read until a renewal succeeds (SOAP calls go on)"
	if !e.Expires.IsZero() {
		state = "the current vAPI session is valid until " + e.Expires.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("vCenter %q: renewing the vAPI session failed; %s; retrying at %s: %v",
		e.VCenter, state, e.RetryAt.UTC().Format(time.RFC3339), e.Err)
}

// Unwrap returns the cause.
func (e *RenewalError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrVAPIUnavailable) true once the vAPI session
// has expired.
func (e *RenewalError) Is(target error) bool {
	return target == ErrVAPIUnavailable && e.Expires.IsZero()
}

// renewalFailed records a failed renewal of s's vAPI session (err), and
// returns the error for the caller and the loop: the health stays as the
// SOAP session makes it, but for Degraded once the vAPI session has
// expired. retryIn is the back-off before the next attempt.
func (c *Client) renewalFailed(s *Session, err error, retryIn time.Duration) error {
	now := c.opts.Clock.Now()
	var rej *LoginRejectedError
	if errors.As(err, &rej) {
		retryIn = max(retryIn, rej.RetryAt.Sub(now))
	}
	rerr := &RenewalError{VCenter: c.vc.Name, RetryAt: now.Add(retryIn), Err: err}
	if !s.restExpires.IsZero() && now.Before(s.restExpires) {
		rerr.Expires = s.restExpires
	}
	c.mu.Lock()
	first := c.vapiErr == nil
	c.vapiErr = rerr
	if first {
		c.vapiSince = now
	}
	c.showVAPILocked(now)
	c.mu.Unlock()
	if first {
		c.log.Error(rerr, "Renewing the vAPI session is failing; only tags are affected (the SOAP session, the inventory and the lookups go on)")
	} else {
		c.log.V(2).Info("Renewing the vAPI session failed again", "err", rerr)
	}
	return rerr
}

// renewalSucceeded clears a failing renewal.
func (c *Client) renewalSucceeded() {
	now := c.opts.Clock.Now()
	c.mu.Lock()
	was, since := c.vapiErr, c.vapiSince
	c.vapiErr, c.vapiSince = nil, time.Time{}
	c.showVAPILocked(now)
	c.mu.Unlock()
	if was != nil {
		c.log.Info("The vAPI session is renewed again", "failingFor", now.Sub(since).Round(time.Second))
	}
}

// vapiDegradedLocked: renewals fail and the vAPI session has expired (or,
// without a token lifetime, was found expired: that is what a renewal in
// password mode answers).
func (c *Client) vapiDegradedLocked(now time.Time) bool {
	if c.vapiErr == nil || c.sess == nil {
		return false
	}
	return c.sess.restExpires.IsZero() || !now.Before(c.sess.restExpires)
}

// vapiErrLocked returns the last failed renewal as of now: one recorded
// while the vAPI session was still valid says it has expired once its
// expiry has passed (errors.Is(err, ErrVAPIUnavailable) from then on),
// whether or not the next attempt has run yet.
func (c *Client) vapiErrLocked(now time.Time) error {
	var rerr *RenewalError
	if !errors.As(c.vapiErr, &rerr) || rerr.Expires.IsZero() || now.Before(rerr.Expires) {
		return c.vapiErr
	}
	expired := *rerr
	expired.Expires = time.Time{}
	return &expired
}

// showVAPILocked logs and notifies a change of the health the vAPI
// session makes (Connected to Degraded and back).
func (c *Client) showVAPILocked(now time.Time) {
	deg := c.health.State == Connected && c.vapiDegradedLocked(now)
	if deg == c.vapiShown {
		return
	}
	c.vapiShown = deg
	from, to := Connected, Degraded
	if !deg {
		from, to = Degraded, Connected
	}
	c.log.Info("vCenter health changed", "from", from.String(), "to", to.String(), "err", c.vapiErrLocked(now))
	c.changed.Notify()
}

// retire runs done once the calls under way on a replaced session have
// ended (each is bounded by requestTimeout), or after wait: by the
// client's loop, on its clock, or at close. Nothing runs on a timer of its
// own, so nothing is lost at shutdown.
func (c *Client) retire(wait time.Duration, done func(context.Context)) {
	c.mu.Lock()
	c.retired = append(c.retired, retired{do: done, at: c.opts.Clock.Now().Add(wait)})
	c.mu.Unlock()
	c.poke()
}

// retireREST logs a replaced vAPI session out.
func (c *Client) retireREST(rc *rest.Client) {
	c.retire(c.global.RequestTimeout+5*time.Second, func(ctx context.Context) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = rc.Logout(lctx)
	})
}

// retired is what is left to do about a replaced session, and when.
type retired struct {
	do func(context.Context)
	at time.Time
}

// runRetired does what is due by now (everything when all), and returns
// when the next is due (zero: nothing left).
func (c *Client) runRetired(ctx context.Context, all bool) time.Time {
	now := c.opts.Clock.Now()
	c.mu.Lock()
	var due, keep []retired
	for _, r := range c.retired {
		if all || !now.Before(r.at) {
			due = append(due, r)
		} else {
			keep = append(keep, r)
		}
	}
	c.retired = keep
	var next time.Time
	for _, r := range keep {
		if next.IsZero() || r.at.Before(next) {
			next = r.at
		}
	}
	c.mu.Unlock()
	for _, r := range due {
		r.do(ctx)
	}
	return next
}
