package vcenter

import (
	"errors"
	"fmt"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrUnavailable means the vCenter could not be asked: it is down, not
	// connected yet, or waiting out a rejected login. It never means that an
	// object does not exist.
	ErrUnavailable = errors.New("vCenter unavailable")
	// ErrLoginRejected means the vCenter refused the username and password.
	ErrLoginRejected = errors.New("login rejected")
	// ErrTicketRefused means the vCenter refused a session manager's clone
	// ticket (stale, used, for another vCenter). A ticket cannot lock an
	// account: it is retried with the normal back-off, with a new ticket,
	// not held back like a refused password.
	ErrTicketRefused = errors.New("clone ticket refused")
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
	// User names who logged in without anything secret: the user, the
	// certificate's subject or the session manager (Identity).
	User string
	// Mode is the credential mode.
	Mode secret.Mode
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
	what, fix := fmt.Sprintf("login of user %q", e.User), "fix the password"
	switch e.Mode {
	case secret.ModeCertificate:
		what, fix = "certificate login of "+e.User, "register the certificate for its solution user in vCenter SSO, or give another certificate and key"
	case secret.ModeSharedSession:
		what, fix = "clone ticket from "+e.User, "check the session manager (its tickets are for this vCenter and used once)"
	}
	return fmt.Sprintf("vCenter %q (%s): %s (from %s) %s at %s; to avoid an SSO account lockout the same credentials are not tried again before %s; %s in the credential source (a changed Secret is tried at once)",
		e.VCenter, e.Address, what, e.Source, verb, e.At.UTC().Format(time.RFC3339), e.RetryAt.UTC().Format(time.RFC3339), fix)
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
