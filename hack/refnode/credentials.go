package main

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/cloud-provider-vsphere/pkg/common/credentialmanager"
	"k8s.io/cloud-provider-vsphere/pkg/common/vclib"
)

// CredentialQuery is one Secret's data and a vCenter to log in to with
// the reference's own credential manager (credentialmanager, as its
// connection manager uses it: a Secret lister) and connection code
// (vclib.VSphereConnection.Connect: password, certificate through STS, or
// a session manager's clone ticket).
type CredentialQuery struct {
	ID     string            `json:"id"`
	Server string            `json:"server"`
	Port   string            `json:"port"`
	CAFile string            `json:"caFile"`
	Data   map[string][]byte `json:"data"`
}

// CredentialAnswer is what happened. The test reads the requests the
// simulated vCenter and session manager received for the login calls.
type CredentialAnswer struct {
	ID string `json:"id"`
	// CredentialError is the credential manager's error (no login tried).
	CredentialError string `json:"credentialError,omitempty"`
	// ConnectError is Connect's error.
	ConnectError string `json:"connectError,omitempty"`
	Connected    bool   `json:"connected"`
	// Mode is the login the reference chose for the credentials, by its
	// own rules (vclib's login: a session manager URL, else a PEM
	// username, else a password): sharedSession, certificate, password.
	Mode string `json:"mode,omitempty"`
}

func runCredentials(timeout time.Duration, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var q CredentialQuery
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			return err
		}
		if err := enc.Encode(answerCredentials(q, timeout)); err != nil {
			return err
		}
	}
	return sc.Err()
}

func answerCredentials(q CredentialQuery, timeout time.Duration) CredentialAnswer {
	a := CredentialAnswer{ID: q.ID}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = indexer.Add(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "vsphere-creds", ResourceVersion: "1"}, Data: q.Data})
	cm := credentialmanager.NewCredentialManager("vsphere-creds", "kube-system", "", corelisters.NewSecretLister(indexer))
	c, err := cm.GetCredential(q.Server)
	if err != nil {
		a.CredentialError = err.Error()
		return a
	}
	switch b, _ := pem.Decode([]byte(c.User)); {
	case c.VCSessionManagerURL != "":
		a.Mode = "sharedSession"
	case b != nil:
		a.Mode = "certificate"
	default:
		a.Mode = "password"
	}
	conn := &vclib.VSphereConnection{Hostname: q.Server, Port: q.Port, CACert: q.CAFile, RoundTripperCount: 1}
	conn.UpdateCredentials(c.User, c.Password, c.VCSessionManagerURL, c.VCSessionManagerToken)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := conn.Connect(ctx); err != nil {
		a.ConnectError = err.Error()
		return a
	}
	a.Connected = true
	conn.Logout(ctx)
	return a
}
