package vcenter

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrUnavailable means the vCenter could not be asked: it is down, not
	// connected yet, or waiting out a rejected login. It never means that an
	// object does not exist.
	ErrUnavailable = errors.New("vCenter unavailable")
	// ErrLoginRejected means the vCenter refused the username and password.
	ErrLoginRejected = errors.New("login rejected")
)

// UnavailableError is returned, without any network I/O, by calls to a
// vCenter that is not connected.
type UnavailableError struct {
	VCenter string
	Address string
	Since   time.Time
	// Cause is the last error seen (connection, TLS, login, ...).
	Cause error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("vCenter %q (%s) unavailable since %s: %v", e.VCenter, e.Address,
		e.Since.UTC().Format(time.RFC3339), e.Cause)
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Cause }

// LoginRejectedError is a login refused by the vCenter, or one not attempted
// because the same credentials were refused less than the login back-off ago
// (vCenter SSO locks an account after a few failures).
type LoginRejectedError struct {
	VCenter string
	Address string
	User    string
	// Source names where the credentials came from.
	Source string
	// At is when the vCenter refused them.
	At time.Time
	// RetryAt is the earliest time the same credentials are tried again.
	RetryAt time.Time
	// Deferred is true when this attempt was not sent to the vCenter.
	Deferred bool
}

func (e *LoginRejectedError) Error() string {
	verb := "rejected"
	if e.Deferred {
		verb = "not retried: rejected"
	}
	return fmt.Sprintf("vCenter %q (%s): login of user %q (from %s) %s at %s; to avoid an SSO account lockout the same credentials are not tried again before %s; fix the password in the credential source (a changed Secret is tried at once)",
		e.VCenter, e.Address, e.User, e.Source, verb, e.At.UTC().Format(time.RFC3339), e.RetryAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrLoginRejected) true.
func (e *LoginRejectedError) Is(target error) bool { return target == ErrLoginRejected }

// CertificateError is a TLS verification failure. It names the presented
// certificate so that an operator can decide to trust it.
type CertificateError struct {
	VCenter string
	Address string
	// Fingerprint is the SHA-256 fingerprint of the presented certificate.
	Fingerprint string
	Subject     string
	Issuer      string
	// Reason is why it was refused (a verification error or a thumbprint mismatch).
	Reason string
}

func (e *CertificateError) Error() string {
	return fmt.Sprintf("vCenter %q (%s): TLS certificate not trusted: %s; the server presented a certificate with SHA-256 fingerprint %s (subject %q, issuer %q); if this is the right server, set caFile to the CA bundle that issued it, or thumbprint to this fingerprint",
		e.VCenter, e.Address, e.Reason, e.Fingerprint, e.Subject, e.Issuer)
}
