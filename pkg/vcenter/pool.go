package vcenter

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// Pool holds one Client per configured vCenter.
type Pool struct {
	clients []*Client // in config order (sorted by name)
	cfg     config.Global

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewPool builds a client for every vCenter of cfg. It does no network I/O;
// errors are configuration problems (for example an unreadable caFile).
func NewPool(cfg *config.Config, opts Options) (*Pool, error) {
	if opts.Credentials == nil {
		return nil, errors.New("vcenter: Options.Credentials is required")
	}
	opts.defaults()
	p := &Pool{cfg: cfg.Global}
	var errs []error
	for _, vc := range cfg.VCenters {
		c, err := newClient(vc, cfg.Global, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.clients = append(p.clients, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Start connects to every vCenter in parallel and returns when each has
// made its first attempt or the connect timeout has passed, whichever is
// first. vCenters that are down do not fail Start: they are retried in the
// background with back-off until ctx ends or Close is called.
func (p *Pool) Start(ctx context.Context) {
	log := klog.FromContext(ctx).WithName("vcenter")
	ctx, p.cancel = context.WithCancel(ctx)
	for _, c := range p.clients {
		c.log = log
		if c.vc.InsecureFlag {
			log.Info("WARNING: TLS certificate verification is disabled for this vCenter by insecureFlag; anyone on the network path can impersonate it and read its credentials. Set caFile or thumbprint instead.",
				"vcenter", c.vc.Name, "address", c.vc.Address())
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			c.run(ctx)
		}()
	}
	timer := p.clients[0].opts.Clock.NewTimer(p.cfg.ConnectTimeout)
	defer timer.Stop()
	for _, c := range p.clients {
		select {
		case <-c.first:
		case <-timer.C():
		case <-ctx.Done():
		}
	}
	for _, c := range p.clients {
		h := c.Health()
		if h.State == Connected {
			log.V(1).Info("vCenter connected", "vcenter", c.vc.Name)
		} else {
			log.Info("vCenter not connected at start; retrying in the background", "vcenter", c.vc.Name, "err", h.LastError)
		}
	}
}

// Clients returns every client, sorted by vCenter name.
func (p *Pool) Clients() []*Client { return p.clients }

// Client returns the client of the named vCenter.
func (p *Pool) Client(name string) (*Client, error) {
	for _, c := range p.clients {
		if c.vc.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("vcenter %q is not configured", name)
}

// Close stops the background work and logs every session out, in parallel.
func (p *Pool) Close() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	var wg sync.WaitGroup
	for _, c := range p.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.close()
		}()
	}
	wg.Wait()
}
