package vcsim

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/sts"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestTokenLifetimes: STS grants the lifetime asked up to the policy's
// maximum; the vAPI session opened with a token ends when it expires, the
// SOAP session only with EndSOAP; an expired token logs nothing in.
func TestTokenLifetimes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx, Spec{Name: "vc-a", Hosts: 1, VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := f.VCenters[0]
	clk := clocktesting.NewFakeClock(time.Now())
	v.SetTokenPolicy(TokenPolicy{MaxLifetime: time.Hour, Clock: clk})
	su, err := NewSolutionUser("ccm", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v.AddSolutionUser(su.Certificate)
	pair, err := tls.X509KeyPair([]byte(su.CertPEM), []byte(su.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	client := func() *vim25.Client {
		sc := soap.NewClient(v.URL(), false)
		if err := sc.SetRootCAs(v.CAFile); err != nil {
			t.Fatal(err)
		}
		c, err := vim25.NewClient(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := client()
	stsc, err := sts.NewClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := stsc.Issue(ctx, sts.TokenRequest{Certificate: &pair, Delegatable: true, Lifetime: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := signer.Lifetime.Expires.Sub(signer.Lifetime.Created); got != time.Hour {
		t.Fatalf("granted %s, want the maximum, 1h", got)
	}
	if st := v.TokenStats(); st.LastRequested != 2*time.Hour || st.LastGranted != time.Hour {
		t.Fatalf("stats %+v", st)
	}
	if err := session.NewManager(c).LoginByToken(c.WithHeader(ctx, soap.Header{Security: signer})); err != nil {
		t.Fatal(err)
	}
	rc := rest.NewClient(c)
	if err := rc.LoginByToken(rc.WithSigner(ctx, signer)); err != nil {
		t.Fatal(err)
	}
	soapCall := func() error { _, err := methods.GetCurrentTime(ctx, c); return err }
	restCall := func() error { _, err := tags.NewManager(rc).ListCategories(ctx); return err }
	if soapCall() != nil || restCall() != nil {
		t.Fatal("calls fail with a valid token")
	}

	clk.Step(time.Hour)
	if err := restCall(); err == nil {
		t.Error("the vAPI session outlived its token")
	}
	if err := soapCall(); err != nil {
		t.Errorf("the SOAP session ended with its token without EndSOAP: %v", err)
	}
	v.SetTokenPolicy(TokenPolicy{MaxLifetime: time.Hour, Clock: clk, EndSOAP: true})
	if err := soapCall(); err == nil {
		t.Error("the SOAP session outlived its token with EndSOAP")
	}
	again := client()
	if err := session.NewManager(again).LoginByToken(again.WithHeader(ctx, soap.Header{Security: signer})); err == nil {
		t.Error("a login with an expired token succeeded")
	}
	st := v.TokenStats()
	if st.SOAPLogins != 1 || st.RESTLogins != 1 || st.SOAPEnded != 1 || st.RESTEnded != 1 || st.ExpiredLogins != 1 {
		t.Errorf("stats %+v, want one of each", st)
	}
}
