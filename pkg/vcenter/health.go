package vcenter

import (
	"context"
	"errors"
	"time"
)

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
	// VAPIExpires is when the current vAPI session's token expires
	// (certificate mode; zero otherwise).
	VAPIExpires time.Time
	// VAPIError is the last failed renewal of the vAPI session while
	// renewals fail (since VAPIFailingSince); nil otherwise. State is
	// Degraded once the vAPI session has expired too.
	VAPIError        error
	VAPIFailingSince time.Time
}

// ErrNotConnectedYet is the cause of unavailability before a vCenter's
// first connection attempt has ended: not a failure, only early.
var ErrNotConnectedYet = errors.New("not connected yet")

// Health returns the current health.
func (c *Client) Health() Health {
	now := c.opts.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.health
	if c.sess != nil {
		h.VAPIExpires = c.sess.restExpires
	}
	h.VAPIError, h.VAPIFailingSince = c.vapiErrLocked(now), c.vapiSince
	if h.State == Connected && c.vapiDegradedLocked(now) {
		h.State, h.LastError = Degraded, h.VAPIError
	}
	return h
}

// HealthChanged returns a channel closed at the next change of State.
// Read Health after it fires; then call HealthChanged again.
func (c *Client) HealthChanged() <-chan struct{} { return c.changed.C() }

// Unavailable returns the error calls get while the vCenter is down.
func (c *Client) Unavailable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unavailableLocked()
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

// poke makes the background loop probe the vCenter now.
func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// fail records a failure to connect or log in: the vCenter is down. The
// session object is kept: a probe may find it valid after an outage.
func (c *Client) fail(err error) {
	c.mu.Lock()
	c.setStateLocked(Down, err)
	c.mu.Unlock()
}

func (c *Client) setStateLocked(s State, err error) {
	if s != c.health.State {
		c.health.Since = c.opts.Clock.Now()
		c.log.Info("vCenter health changed", "from", c.health.State.String(), "to", s.String(), "err", err)
		c.changed.Notify()
	}
	c.health.State = s
	c.health.LastError = err
	if s == Connected {
		c.health.LastSuccess = c.opts.Clock.Now()
		c.health.NextLogin = time.Time{}
	}
}
