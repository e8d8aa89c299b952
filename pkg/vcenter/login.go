package vcenter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// connect builds fresh SOAP and REST clients and logs both in, in the mode
// of creds:
//
//   - Password: SessionManager.Login and a REST login with the same user.
//   - Certificate: vCenter's STS issues a holder-of-key token for the
//     certificate (the request is signed with the private key, which is
//     never sent), of global.tokenLifetime (STS may grant less);
//     SessionManager.LoginByToken and the REST login by token use it. The
//     vAPI session ends with the token: renew.go renews it before.
//   - SharedSession: a clone ticket from the session manager, then
//     SessionManager.CloneSession; the REST client uses the same session,
//     as in the reference CCM.
//
// A refusal by vCenter (a bad password, a certificate STS refuses, a
// ticket CloneSession refuses) is returned wrapped in refusedError.
func (c *Client) connect(ctx context.Context, creds secret.Credentials) (*Session, error) {
	vim, err := c.newVIM(ctx)
	if err != nil {
		return nil, err
	}
	s := &Session{VIM: vim, mode: creds.Mode()}
	switch cr := creds.(type) {
	case secret.Password:
		err = c.loginPassword(ctx, s, cr)
	case secret.Certificate:
		err = c.loginCertificate(ctx, s, cr)
	case secret.SharedSession:
		err = c.loginShared(ctx, s, cr)
	default:
		err = fmt.Errorf("credentials of mode %q are not supported", creds.Mode())
	}
	if err != nil {
		// Its connections (two goroutines each) would stay open until the
		// vCenter closes them; a failing login is retried many times.
		s.VIM.Client.CloseIdleConnections()
		return nil, err
	}
	return s, nil
}

// newVIM returns a SOAP client that verifies the vCenter as configured, is
// observed and retries temporary network errors.
func (c *Client) newVIM(ctx context.Context) (*vim25.Client, error) {
	u := &url.URL{Scheme: "https", Host: c.vc.Address(), Path: "/sdk"}
	sc := soap.NewClient(u, c.vc.InsecureFlag)
	t, err := c.newTransport(sc.DefaultTransport())
	if err != nil {
		return nil, err
	}
	sc.UserAgent = c.opts.UserAgent
	if c.opts.WrapTransport != nil {
		sc.Client.Transport = c.opts.WrapTransport(c.vc.Name, t)
	}
	vim, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, err
	}
	vim.RoundTripper = observedSOAP{next: vim25.Retry(newPages(sc, c.opts.Decoding, c.vc.Name, c.opts.Observer), vim25.RetryTemporaryNetworkError, c.vc.SOAPRoundtripCount),
		vcenter: c.vc.Name, obs: c.opts.Observer}
	return vim, nil
}

// newREST returns the vAPI client of vim, observed. Made after the SOAP
// login, it shares vim's transport.
func (c *Client) newREST(vim *vim25.Client) *rest.Client {
	rc := rest.NewClient(vim)
	var rt http.RoundTripper = rc.DefaultTransport()
	if c.opts.WrapTransport != nil {
		rt = c.opts.WrapTransport(c.vc.Name, rt)
	}
	rc.Client.Client.Transport = observedHTTP{next: rt, vcenter: c.vc.Name, obs: c.opts.Observer}
	return rc
}

func (c *Client) loginPassword(ctx context.Context, s *Session, p secret.Password) error {
	user := url.UserPassword(p.Username, p.Password.Reveal())
	err := session.NewManager(s.VIM).Login(ctx, user)
	c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
	if err != nil {
		return refusal(err)
	}
	s.REST = c.newREST(s.VIM)
	err = s.REST.Login(ctx, user)
	c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
	if err != nil {
		c.logoutSOAP(ctx, s.VIM)
		return refusal(err)
	}
	return nil
}

func (c *Client) loginCertificate(ctx context.Context, s *Session, cert secret.Certificate) error {
	// Checked again here (credentials() checked it before any request):
	// the clock may have passed NotAfter since.
	if err := cert.CheckValidity(c.opts.Clock.Now()); err != nil {
		return err
	}
	tok, err := c.issueToken(ctx, s.VIM, cert)
	if err != nil {
		return err
	}
	header := soap.Header{Security: tok.signer}
	err = session.NewManager(s.VIM).LoginByToken(s.VIM.WithHeader(ctx, header))
	c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
	if err != nil {
		return refusal(err)
	}
	s.soapRenewAt, s.soapExpires = tok.renewAt, tok.expires
	s.REST = c.newREST(s.VIM)
	err = s.REST.LoginByToken(s.REST.WithSigner(ctx, tok.signer))
	c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
	if err != nil {
		c.logoutSOAP(ctx, s.VIM)
		return refusal(err)
	}
	s.restRenewAt, s.restExpires = tok.renewAt, tok.expires
	return nil
}

func (c *Client) loginShared(ctx context.Context, s *Session, sh secret.SharedSession) error {
	ticket, err := c.cloneTicket(ctx, sh)
	if err != nil {
		return err
	}
	err = session.NewManager(s.VIM).CloneSession(ctx, ticket.Reveal())
	if err != nil && isInvalidLogin(err) {
		// Not a refusal of the credentials (the session manager's token
		// was accepted): the usual retry asks for a new ticket.
		c.opts.Observer.Login(c.vc.Name, ErrTicketRefused)
		return fmt.Errorf("vCenter %q: CloneSession refused the ticket of %s (stale, already used, or for another vCenter); asking for a new one with the normal back-off: %w",
			c.vc.Name, sh.Identity(), ErrTicketRefused)
	}
	c.opts.Observer.Login(c.vc.Name, loginOutcome(err))
	if err != nil {
		return err
	}
	cookie := s.VIM.SessionCookie()
	if cookie == nil {
		c.logoutSOAP(ctx, s.VIM)
		return errors.New("CloneSession set no session cookie")
	}
	s.REST = c.newREST(s.VIM)
	s.REST.SessionID(cookie.Value) // the reference's way: vAPI accepts the SOAP session
	return nil
}

// logoutSOAP ends a SOAP session whose REST login failed.
func (c *Client) logoutSOAP(ctx context.Context, vim *vim25.Client) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = session.NewManager(vim).Logout(lctx)
}

// refusedError is a login vCenter refused: a bad password, a certificate
// STS would not issue a token for, a clone ticket CloneSession refused.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// refusal wraps err in refusedError when vCenter refused the credentials.
func refusal(err error) error {
	if err == nil {
		return nil
	}
	if isInvalidLogin(err) {
		return &refusedError{err: err}
	}
	return err
}

// isSTSRefusal reports STS refusing the certificate (WS-Security faults
// FailedAuthentication, InvalidSecurityToken); other faults (a clock skew,
// a malformed request) are failures retried with the usual back-off.
// soap.IsSoapFault does not unwrap: call it on the error as returned.
func isSTSRefusal(err error) bool {
	if !soap.IsSoapFault(err) {
		return false
	}
	code := soap.ToSoapFault(err).Code
	return strings.HasSuffix(code, "FailedAuthentication") || strings.HasSuffix(code, "InvalidSecurityToken")
}

// isRefused reports whether err is a login vCenter refused.
func isRefused(err error) bool {
	var r *refusedError
	return errors.As(err, &r)
}

// loginOutcome marks a refused login with ErrLoginRejected for observers.
func loginOutcome(err error) error {
	if err != nil && (isInvalidLogin(err) || isRefused(err)) {
		return ErrLoginRejected
	}
	return err
}
