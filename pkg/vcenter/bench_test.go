package vcenter_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// BenchmarkConnect connects 5 vCenters with 5 ms per SOAP call (a WAN-like
// link): all at once through one Pool, and one after the other. The
// parallel figure should be close to one serial connect, not the sum.
func BenchmarkConnect(b *testing.B) {
	ctx := quiet(b)
	var specs []vcsim.Spec
	for i := range 5 {
		specs = append(specs, vcsim.Spec{Name: fmt.Sprintf("vc-%d", i), Hosts: 1, VMs: 1, Latency: 5 * time.Millisecond})
	}
	f, err := vcsim.Start(ctx, specs...)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cfg := parseConfig(b, f, nil, nil)
	connect := func(cfg *config.Config) {
		p, err := vcenter.NewPool(cfg, vcenter.Options{Credentials: inline{make(chan struct{})}})
		if err != nil {
			b.Fatal(err)
		}
		p.Start(ctx)
		if err := p.WaitFirstAttempt(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		for _, c := range p.Clients() {
			if c.Health().State != vcenter.Connected {
				b.Fatalf("%s: %v", c.Name(), c.Health().LastError)
			}
		}
		p.Close()
		b.StartTimer()
	}
	b.Run("parallel-5", func(b *testing.B) {
		for b.Loop() {
			connect(cfg)
		}
	})
	b.Run("serial-5", func(b *testing.B) {
		for b.Loop() {
			for _, vc := range cfg.VCenters {
				one := *cfg
				one.VCenters = []config.VCenter{vc}
				connect(&one)
			}
		}
	})
}

// BenchmarkRecoveryAfterExpiry measures a call that finds its session
// terminated on the server: NotAuthenticated, a new login, the retry.
func BenchmarkRecoveryAfterExpiry(b *testing.B) {
	f := startFleet(b)
	ctx := quiet(b)
	p := startPool(b, ctx, parseConfig(b, f, nil, nil), vcenter.Options{KeepAlive: time.Hour})
	cl, _ := p.Client("vc-a")
	b.Run("steady", func(b *testing.B) {
		for b.Loop() {
			if err := cl.Do(ctx, soapOnly); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("after-expiry", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			if _, err := f.VCenters[0].TerminateSessions(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := cl.Do(ctx, soapOnly); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkIsolation measures a SOAP+REST call to a healthy vCenter, with
// all vCenters healthy and with another one black-holed (every connection
// hangs) while goroutines keep calling it. The two figures should match.
func BenchmarkIsolation(b *testing.B) {
	f := startFleet(b)
	ctx := quiet(b)
	cfg := parseConfig(b, f, nil, nil)
	p := startPool(b, ctx, cfg, vcenter.Options{KeepAlive: time.Hour})
	ca, _ := p.Client("vc-a")
	cb, _ := p.Client("vc-b")
	b.Run("all-healthy", func(b *testing.B) {
		for b.Loop() {
			if err := cb.Do(ctx, soapAndREST); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-black-holed", func(b *testing.B) {
		if err := f.VCenters[0].SetMode(vcsim.Hung); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = f.VCenters[0].SetMode(vcsim.Up) }()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						if ca.Do(ctx, soapAndREST) != nil { // hangs until the request timeout, then fails fast
							time.Sleep(time.Millisecond)
						}
					}
				}
			}()
		}
		for b.Loop() {
			if err := cb.Do(ctx, soapAndREST); err != nil {
				b.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
	})
}
