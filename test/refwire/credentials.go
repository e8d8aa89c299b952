package refwire

import (
	"context"
	"fmt"
)

// CredentialQuery is one Secret's data and a vCenter to log in to with the
// reference's credential manager and connection code (refnode
// -credentials).
type CredentialQuery struct {
	ID     string            `json:"id"`
	Server string            `json:"server"`
	Port   string            `json:"port"`
	CAFile string            `json:"caFile"`
	Data   map[string][]byte `json:"data"`
}

// CredentialAnswer is what the reference did.
type CredentialAnswer struct {
	ID              string `json:"id"`
	CredentialError string `json:"credentialError,omitempty"`
	ConnectError    string `json:"connectError,omitempty"`
	Connected       bool   `json:"connected"`
	// Mode is the login the reference chose (sharedSession, certificate,
	// password); "" when its credential manager refused the data.
	Mode string `json:"mode,omitempty"`
}

// StartCredentials runs refnode -credentials with env (KEY=VALUE) added;
// SSL_CERT_FILE there is how the reference, which verifies a session
// manager against the system roots only, is made to trust a test CA.
func StartCredentials(ctx context.Context, bin string, env ...string) (*Proc, error) {
	return start(ctx, bin, []string{"-credentials"}, env)
}

// AskCredentials makes the reference log in with data.
func (p *Proc) AskCredentials(server, port, caFile string, data map[string][]byte) (CredentialAnswer, error) {
	p.n++
	var a CredentialAnswer
	err := p.call(server, CredentialQuery{ID: fmt.Sprint(p.n), Server: server, Port: port, CAFile: caFile, Data: data}, &a)
	return a, err
}
