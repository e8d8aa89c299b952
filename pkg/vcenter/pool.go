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

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewPool builds a client for every vCenter of cfg. It does no I/O and
// fails only without a credential source: a vCenter whose own settings
// cannot be used (an unreadable caFile, say) is down, reported in its
// Health and retried, and never stops the others.
func NewPool(cfg *config.Config, opts Options) (*Pool, error) {
	if opts.Credentials == nil {
		return nil, errors.New("vcenter: Options.Credentials is required")
	}
	opts.defaults(cfg.Global)
	p := &Pool{}
	for _, vc := range cfg.VCenters {
		p.clients = append(p.clients, newClient(vc, cfg.Global, opts))
	}
	return p, nil
}

// Start starts one background loop per vCenter and returns at once: each
// vCenter connects, degrades and recovers on its own. Calls to a vCenter
// that is not connected yet fail at once with ErrUnavailable.
func (p *Pool) Start(ctx context.Context) {
	log := klog.FromContext(ctx).WithName("vcenter")
	ctx, p.cancel = context.WithCancel(ctx)
	for _, c := range p.clients {
		c.log = log.WithValues("vcenter", c.vc.Name)
		if c.vc.InsecureFlag {
			c.log.Info("WARNING: TLS certificate verification is disabled for this vCenter by insecureFlag; anyone on the network path can impersonate it and read its credentials. Set caFile or thumbprint instead.",
				"address", c.vc.Address())
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			c.run(ctx)
		}()
	}
}

// WaitFirstAttempt waits until every client has made its first attempt to
// connect, or ctx ends. One-shot commands use it; the controller manager
// does not wait.
func (p *Pool) WaitFirstAttempt(ctx context.Context) error {
	for _, c := range p.clients {
		if err := c.WaitFirstAttempt(ctx); err != nil {
			return err
		}
	}
	return nil
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

// Close stops the background loops, waits for them, and logs every
// session out, in parallel.
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
