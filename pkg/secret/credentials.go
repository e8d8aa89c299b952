package secret

import (
	"bytes"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Mode is how a vCenter is logged in to.
type Mode string

// The credential modes. The reference CCM knows the same three.
const (
	// ModePassword: SessionManager.Login with a username and password.
	ModePassword Mode = "password"
	// ModeCertificate: a solution user's certificate; vCenter's STS issues a
	// holder-of-key token signed with its private key, and the session is
	// opened with LoginByToken. The key never leaves this process.
	ModeCertificate Mode = "certificate"
	// ModeSharedSession: a session manager hands out clone tickets of a
	// session it holds (vSphere 8.0U3 or later); the session is opened with
	// SessionManager.CloneSession.
	ModeSharedSession Mode = "sharedSession"
)

// Credentials is one vCenter's credentials, in exactly one mode: a
// Password, a Certificate or a SharedSession (values, not pointers). A
// login switches on the concrete type.
type Credentials interface {
	// Mode names the mode.
	Mode() Mode
	// Identity says who logs in, without anything secret: the user, the
	// certificate's subject, or the session manager's URL without user
	// information or query. Credentials with the same mode and identity are
	// a rotation (the session is kept and the next login uses the new
	// ones); another mode or identity replaces the session at once.
	Identity() string
	// Equal reports whether o holds exactly the same credentials.
	Equal(o Credentials) bool

	credentials()
}

// Equal reports whether a and b hold the same credentials; two nils are
// equal.
func Equal(a, b Credentials) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(b)
}

// SameIdentity reports whether a and b log in as the same principal in the
// same mode (a rotation, not a replacement).
func SameIdentity(a, b Credentials) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Mode() == b.Mode() && a.Identity() == b.Identity()
}

// Password is a username and password.
type Password struct {
	Username string
	Password Value
}

// Mode is ModePassword.
func (Password) Mode() Mode { return ModePassword }

// Identity is the username.
func (p Password) Identity() string { return p.Username }

// Equal compares username and password.
func (p Password) Equal(o Credentials) bool {
	q, ok := o.(Password)
	return ok && p.Username == q.Username && p.Password.Equal(q.Password)
}

func (Password) credentials() {}

// Certificate is a solution user's certificate (PEM, public) and its
// private key (PEM, secret). Build it with NewCertificate, which checks
// that the two belong together.
type Certificate struct {
	// PEM is the certificate, optionally followed by its chain.
	PEM string
	// Key is the PEM private key.
	Key Value

	leaf *x509.Certificate
}

// Mode is ModeCertificate.
func (Certificate) Mode() Mode { return ModeCertificate }

// Identity is the certificate's subject.
func (c Certificate) Identity() string {
	if c.leaf == nil {
		return "certificate (unparsed)"
	}
	return "certificate " + c.leaf.Subject.String()
}

// Equal compares certificate and key.
func (c Certificate) Equal(o Credentials) bool {
	d, ok := o.(Certificate)
	return ok && c.PEM == d.PEM && c.Key.Equal(d.Key)
}

func (Certificate) credentials() {}

// Leaf is the parsed certificate.
func (c Certificate) Leaf() *x509.Certificate { return c.leaf }

// Fingerprint is the SHA-256 fingerprint of the certificate, in hex.
func (c Certificate) Fingerprint() string {
	if c.leaf == nil {
		return ""
	}
	sum := sha256.Sum256(c.leaf.Raw)
	return hex.EncodeToString(sum[:])
}

// KeyPair returns the certificate and its private key, to sign with. Call
// it only where the key is used (the STS token request), never for output.
func (c Certificate) KeyPair() (tls.Certificate, error) {
	kp, err := tls.X509KeyPair([]byte(c.PEM), []byte(c.Key.Reveal()))
	if err != nil {
		return tls.Certificate{}, keyPairError(err)
	}
	return kp, nil
}

// CheckValidity returns an error naming the dates when now is outside the
// certificate's validity period.
func (c Certificate) CheckValidity(now time.Time) error {
	if c.leaf == nil {
		return ErrCertificate
	}
	switch {
	case now.After(c.leaf.NotAfter):
		return fmt.Errorf("%w: certificate %q expired at %s; issue a new one for the solution user",
			ErrCertificate, c.leaf.Subject.String(), c.leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.leaf.NotBefore):
		return fmt.Errorf("%w: certificate %q is not valid before %s; check this machine's clock",
			ErrCertificate, c.leaf.Subject.String(), c.leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// SharedSession is a session manager that hands out clone tickets: its URL
// and the bearer token sent to it (the token, or else the content of
// TokenFile read at every login).
type SharedSession struct {
	URL       string
	Token     Value
	TokenFile string
}

// Mode is ModeSharedSession.
func (SharedSession) Mode() Mode { return ModeSharedSession }

// Identity is the session manager's URL without user information or query.
func (s SharedSession) Identity() string { return "session manager " + RedactURL(s.URL) }

// Equal compares URL, token and token file.
func (s SharedSession) Equal(o Credentials) bool {
	t, ok := o.(SharedSession)
	return ok && s.URL == t.URL && s.Token.Equal(t.Token) && s.TokenFile == t.TokenFile
}

func (SharedSession) credentials() {}

// Insecure reports whether the URL is plain http: the bearer token and the
// clone ticket then travel in clear.
func (s SharedSession) Insecure() bool {
	u, err := url.Parse(s.URL)
	return err == nil && strings.EqualFold(u.Scheme, "http")
}

// Sentinel errors; test with errors.Is.
var (
	// ErrPrivateKeyAsPassword: a PEM private key is given as the password of
	// a username that is not a PEM certificate. No login is tried, so the
	// key is never sent anywhere.
	ErrPrivateKeyAsPassword = errors.New("a PEM private key is given as a password")
	// ErrCertificate: a certificate login cannot be made with what is
	// given (unparsable certificate, missing or mismatched key, expired).
	ErrCertificate = errors.New("certificate credentials not usable")
	// ErrPrivateKey marks the ErrCertificate errors that are the private
	// key's (missing, not a key, not the certificate's, not RSA), so that a
	// caller can point at the field that holds it.
	ErrPrivateKey = errors.New("the private key is not usable with the certificate")
	// ErrSessionManagerURL: the session manager URL is not an http(s) URL.
	ErrSessionManagerURL = errors.New("invalid session manager URL")
)

// FromUserPassword reads a username and password the way the reference CCM
// does: a username that is PEM (a certificate) makes the pair a solution
// user's certificate and private key; anything else is a password login.
// A password that is a PEM private key with a username that is not a
// certificate is refused (ErrPrivateKeyAsPassword): sent as a password it
// would reach vCenter in clear text. Errors never contain the values.
func FromUserPassword(user string, password Value) (Credentials, error) {
	if b, _ := pem.Decode([]byte(user)); b != nil {
		c, err := NewCertificate(user, password)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	if strings.Contains(user, "-----BEGIN") || IsPrivateKeyPEM(user) {
		// PEM armour that does not decode (lost line breaks): never a
		// user name, and it must not be logged or sent as one.
		return nil, fmt.Errorf("%w: the username holds PEM text that is not a certificate (damaged line breaks, or a key in place of the certificate)", ErrCertificate)
	}
	if IsPrivateKeyPEM(password.Reveal()) {
		return nil, fmt.Errorf("%w for a username that is not a PEM certificate; for a solution user, give its PEM certificate as the username; otherwise give the password", ErrPrivateKeyAsPassword)
	}
	return Password{Username: user, Password: password}, nil
}

// NewCertificate checks that certPEM holds a certificate and key its
// private key, and that they belong together.
func NewCertificate(certPEM string, key Value) (Certificate, error) {
	if IsPrivateKeyPEM(certPEM) {
		// Kept, it would be a plain string that prints (the certificate is
		// public); the key belongs in its own field, a Value.
		return Certificate{}, fmt.Errorf("%w: the certificate holds a private key block; give only the certificate (its CERTIFICATE blocks) there, and its key as the private key (privateKey, or the password)", ErrCertificate)
	}
	var leaf *x509.Certificate
	rest := []byte(certPEM)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return Certificate{}, fmt.Errorf("%w: the PEM certificate does not parse: %v", ErrCertificate, err)
		}
		leaf = c
		break
	}
	if leaf == nil {
		return Certificate{}, fmt.Errorf("%w: the username is PEM but holds no CERTIFICATE block", ErrCertificate)
	}
	if !key.IsSet() {
		return Certificate{}, keyError{fmt.Errorf("%w: certificate %q has no private key; give its PEM private key as the password", ErrCertificate, leaf.Subject.String())}
	}
	if !IsPrivateKeyPEM(key.Reveal()) {
		return Certificate{}, keyError{fmt.Errorf("%w: the username is the PEM certificate %q, so the password must be its PEM private key, and it is not one", ErrCertificate, leaf.Subject.String())}
	}
	c := Certificate{PEM: certPEM, Key: key, leaf: leaf}
	kp, err := c.KeyPair()
	if err != nil {
		return Certificate{}, keyError{fmt.Errorf("certificate %q: %w", leaf.Subject.String(), err)}
	}
	if _, ok := kp.PrivateKey.(*rsa.PrivateKey); !ok {
		return Certificate{}, keyError{fmt.Errorf("%w: certificate %q has a %T key; vCenter's STS signs with RSA keys only", ErrCertificate, leaf.Subject.String(), kp.PrivateKey)}
	}
	return c, nil
}

// keyError is an error of the private key (errors.Is ErrPrivateKey).
type keyError struct{ error }

func (e keyError) Unwrap() error        { return e.error }
func (e keyError) Is(target error) bool { return target == ErrPrivateKey }

// keyPairError turns an error of tls.X509KeyPair into one that says what to
// do. The standard library's messages name no key material; they are kept.
func keyPairError(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "does not match") {
		return fmt.Errorf("%w: the private key does not match the certificate; give the key the certificate was issued for", ErrCertificate)
	}
	return fmt.Errorf("%w: %s", ErrCertificate, strings.TrimPrefix(msg, "tls: "))
}

// IsPrivateKeyPEM reports whether s contains a PEM block of a private key
// ("PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE
// KEY", ...).
func IsPrivateKeyPEM(s string) bool {
	rest := []byte(s)
	for len(rest) > 0 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			return true
		}
	}
	// A key whose PEM armour is damaged (a lost line break) is still a key.
	return bytes.Contains([]byte(s), []byte("PRIVATE KEY-----"))
}

// NewSharedSession checks the session manager URL: absolute http or https
// with a host. The token may be empty (TokenFile is read at every login).
func NewSharedSession(rawURL string, token Value, tokenFile string) (SharedSession, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return SharedSession{}, fmt.Errorf("%w %q: it does not parse", ErrSessionManagerURL, RedactURL(rawURL))
	}
	if s := strings.ToLower(u.Scheme); (s != "https" && s != "http") || u.Host == "" {
		return SharedSession{}, fmt.Errorf("%w %q: want https://host[:port]/path", ErrSessionManagerURL, RedactURL(rawURL))
	}
	return SharedSession{URL: rawURL, Token: token, TokenFile: tokenFile}, nil
}

// RedactURL returns scheme://host/path of a URL: no user information,
// query or fragment, which may carry tokens. A URL without a host (whose
// opaque part may hold anything) becomes "[invalid URL]".
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return "[invalid URL]"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}
