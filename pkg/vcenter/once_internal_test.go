package vcenter

import (
	"context"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// TestFullLoginAfterRenewal: a caller that needs a new session (its SOAP
// session ended) and finds a vAPI renewal under way waits for it, then
// logs in itself; a caller that needs a vAPI session joins a full login.
func TestFullLoginAfterRenewal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := Options{Credentials: nil}
	opts.defaults(config.Global{ConnectTimeout: 5 * time.Second})
	c := newClient(config.VCenter{Name: "vc-a"}, config.Global{ConnectTimeout: 5 * time.Second}, opts)
	defer c.logins.Close()
	c.sess = &Session{}

	renewing, release := make(chan struct{}), make(chan struct{})
	renew := func(context.Context) error {
		close(renewing)
		<-release
		c.mu.Lock()
		c.restGen++
		c.mu.Unlock()
		return nil
	}
	full := make(chan struct{}, 2)
	login := func(context.Context) error {
		full <- struct{}{}
		c.mu.Lock()
		c.gen++
		c.restGen++
		c.mu.Unlock()
		return nil
	}
	renewed := make(chan error, 1)
	go func() { renewed <- c.once(ctx, loginREST, 0, 0, renew) }()
	<-renewing
	logged := make(chan error, 1)
	go func() { logged <- c.once(ctx, loginFull, 0, 0, login) }()
	close(release)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	if err := <-logged; err != nil {
		t.Fatal(err)
	}
	if len(full) != 1 {
		t.Fatalf("%d full logins, want 1 after the renewal", len(full))
	}
	// A renewal asked for against the old generations is satisfied by the
	// full login.
	if err := c.once(ctx, loginREST, 0, 0, func(context.Context) error { t.Error("a renewal after a full login"); return nil }); err != nil {
		t.Fatal(err)
	}
}
