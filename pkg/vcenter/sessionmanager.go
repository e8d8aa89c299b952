package vcenter

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// ErrSessionManager means a session manager did not hand out a clone
// ticket: unreachable, an HTTP error, or an answer without a ticket.
var ErrSessionManager = errors.New("session manager gave no ticket")

// sessionManagerTimeout bounds one ticket request, as in the reference.
const sessionManagerTimeout = 5 * time.Second

// maxTicketResponse bounds the session manager's answer.
const maxTicketResponse = 1 << 20

// ticketResponse is the session manager's answer, as the reference reads it.
type ticketResponse struct {
	Token string `json:"token"`
}

// cloneTicket asks a session manager for a clone ticket exactly as the
// reference CCM does (vclib.GetSharedToken): GET the URL with
// "Authorization: Bearer <token>" (the configured token, else the token
// file read now, so that a rotated service-account token is used), and read
// {"token": "<ticket>"}. The server is verified against the system roots,
// plus the vCenter's caFile when it has one; insecureFlag does not apply
// (the bearer token must not go to an unverified server). Errors name the
// URL without its query and never the token or the ticket.
func (c *Client) cloneTicket(ctx context.Context, s secret.SharedSession) (secret.Value, error) {
	where := secret.RedactURL(s.URL)
	token := s.Token
	if !token.IsSet() {
		b, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return secret.Value{}, fmt.Errorf("session manager %s: no token given, and the token file cannot be read: %w", where, err)
		}
		token = secret.New(strings.TrimSpace(string(b)))
		if !token.IsSet() {
			return secret.Value{}, fmt.Errorf("session manager %s: no token given, and the token file %s is empty", where, s.TokenFile)
		}
	}
	roots, err := c.sessionManagerRoots()
	if err != nil {
		return secret.Value{}, err
	}
	t := &http.Transport{
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		ResponseHeaderTimeout: sessionManagerTimeout,
		Proxy:                 http.ProxyFromEnvironment,
	}
	defer t.CloseIdleConnections()
	var rt http.RoundTripper = t
	if c.opts.WrapTransport != nil {
		rt = c.opts.WrapTransport(c.vc.Name, rt)
	}
	rctx, cancel := context.WithTimeout(ctx, sessionManagerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return secret.Value{}, fmt.Errorf("session manager %s: %w", where, ErrSessionManager)
	}
	req.Header.Set("Authorization", "Bearer "+token.Reveal())
	req.Header.Set("User-Agent", c.opts.UserAgent)
	res, err := (&http.Client{Transport: rt, CheckRedirect: noRedirect}).Do(req)
	if err != nil {
		return secret.Value{}, fmt.Errorf("session manager %s not reachable: %w: %v", where, ErrSessionManager, redactURLError(err))
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxTicketResponse))
		return secret.Value{}, fmt.Errorf("session manager %s answered %s: %w", where, res.Status, ErrSessionManager)
	}
	var tr ticketResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, maxTicketResponse)).Decode(&tr); err != nil {
		// json's errors quote at most a character of the input.
		return secret.Value{}, fmt.Errorf("session manager %s: the answer is not {\"token\": \"...\"}: %w", where, ErrSessionManager)
	}
	if tr.Token == "" {
		return secret.Value{}, fmt.Errorf("session manager %s: the answer holds an empty token: %w", where, ErrSessionManager)
	}
	return secret.New(tr.Token), nil
}

// sessionManagerRoots is the system roots plus the vCenter's caFile.
func (c *Client) sessionManagerRoots() (*x509.CertPool, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if c.vc.CAFile == "" {
		return roots, nil
	}
	pem, err := os.ReadFile(c.vc.CAFile)
	if err != nil {
		return nil, fmt.Errorf("vcenter %q: caFile: %w", c.vc.Name, err)
	}
	roots.AppendCertsFromPEM(pem)
	return roots, nil
}

// noRedirect refuses every redirect: net/http would send the bearer token
// again to the same host even from https to http. A redirect is answered
// as the session manager's non-200 status.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// redactURLError names the URL of an *url.Error without its query or
// user information, which may carry tokens.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		c := *ue
		c.URL = secret.RedactURL(ue.URL)
		return &c
	}
	return err
}
