package provider

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/notify"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Name is the provider name (--cloud-provider).
const Name = "vsphere"

// ProviderIDPrefix starts every providerID, as with the reference CCM.
const ProviderIDPrefix = providerid.Prefix

// Labels added to every node, naming where its VM is.
const (
	LabelVCenter    = "vsphere.vsphere-ccm.io/vcenter"
	LabelDatacenter = "vsphere.vsphere-ccm.io/datacenter"
)

// Options tunes a Provider.
type Options struct {
	// VCenter tunes the vCenter clients; its Credentials field is set by
	// the provider.
	VCenter vcenter.Options
	// InventoryMaxWait bounds each inventory long poll (default 15s, at
	// most a quarter of the request timeout, at least 1s). An index with no
	// completed round for twice this (at least this plus 5s) is stale: it
	// cannot prove a VM absent.
	InventoryMaxWait time.Duration
	// AllVMDetails keeps the details (placement, addresses, hardware) of
	// every VM, for tools that list every VM. The controller manager keeps
	// them only for the VMs of the Nodes it looks up.
	AllVMDetails bool
	// EagerDetailsMax is inventory.Options.EagerDetailsMax: vCenters with
	// at most this many VMs (default 5,000; negative: none) have every
	// VM's details kept.
	EagerDetailsMax int
	// Metrics, if set, receive request, login and lookup counts and are
	// refreshed every 10 seconds.
	Metrics *Metrics
	// Events, if set, receives the Warning events on Nodes about lookups
	// (shared with the node-topology controller); Initialize starts its
	// sink with the framework's client unless it has one.
	Events *nodeevents.Recorder
	// NodeLabels are added to every Node's metadata, so that the framework
	// sets them when it initializes the Node (the reference's
	// --node-labels); labels computed from vSphere take precedence.
	NodeLabels map[string]string
	// Clock is the provider's clock, given to the vCenter clients, the
	// inventory and the tag caches too (nil: VCenter.Clock if set, else
	// the real clock).
	Clock clock.WithTicker
}

// The framework's interfaces the provider serves, checked at compile time.
var (
	_ cloudprovider.Interface   = (*Provider)(nil)
	_ cloudprovider.InstancesV2 = (*Provider)(nil)
)

// Provider is the vSphere cloud provider.
type Provider struct {
	cfg  *config.Config
	opts Options

	pool  *vcenter.Pool
	creds *credentials.Manager
	inv   *inventory.Inventory
	topo  *topology.Resolver

	changes   notify.Notifier // see Changed
	recovered notify.Notifier // see Recovered
	failed    failedInits     // see RetryDue
	// progress counts the inventories' progress (pages of first reads,
	// reads completed, vCenters current again, tags), before Recovered
	// wakes; arrivals counts the times VMs became findable in a vCenter
	// (inventory.Index.Findable), which help only the Nodes whose VM
	// they are (RetryDue).
	progress, arrivals atomic.Uint64
	kube               kubernetes.Interface
	absences           *absences // see nodes.deletionDelay

	startMu   sync.Mutex    // serializes Start and Close
	started   chan struct{} // closed once Start has succeeded: the fields above are set
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the provider's own loops
	startedAt time.Time
}

// New builds a provider from a validated config. It does no I/O.
func New(cfg *config.Config, opts Options) (*Provider, error) {
	if opts.InventoryMaxWait <= 0 {
		// Short enough that an index older than twice this (the bound
		// after which it may no longer prove absence) is noticed well
		// before the request timeout.
		opts.InventoryMaxWait = min(15*time.Second, max(cfg.Global.RequestTimeout/4, time.Second))
	}
	if opts.Clock == nil {
		opts.Clock = opts.VCenter.Clock
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.VCenter.Clock == nil {
		opts.VCenter.Clock = opts.Clock
	}
	p := &Provider{cfg: cfg, opts: opts, started: make(chan struct{}), absences: newAbsences(opts.Clock)}
	if m := opts.Metrics; m != nil {
		m.configured(cfg) // every replica, the standby too
	}
	return p, nil
}

// Start starts, for every vCenter on its own, the credential watch, the
// connection, the inventory and the tag cache, and returns at once: it
// waits for no vCenter. kube reads Secrets (nil when none is configured)
// and lists Nodes (their vCenter labels, before an absence is proven). It fails only
// when Secrets are configured without a client; it may then be called
// again. Once it has succeeded, it does nothing.
func (p *Provider) Start(ctx context.Context, kube kubernetes.Interface) error {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	if p.ready() {
		return nil
	}
	if err := p.start(ctx, kube); err != nil {
		p.stop()
		p.pool, p.inv, p.topo, p.creds, p.cancel = nil, nil, nil, nil, nil
		return err
	}
	close(p.started)
	return nil
}

func (p *Provider) start(ctx context.Context, kube kubernetes.Interface) error {
	ctx, p.cancel = context.WithCancel(ctx)
	p.startedAt = p.opts.Clock.Now()
	p.kube = kube
	p.creds = credentials.New(p.cfg, credentials.Options{Client: kube})
	// The watches live as long as ctx; nothing waits for them: a vCenter
	// whose Secret is not loaded yet is down until it is.
	if err := p.creds.Start(ctx); err != nil {
		return err
	}
	vopts := p.opts.VCenter
	vopts.Credentials = p.creds
	if p.opts.Metrics != nil && vopts.Observer == nil {
		vopts.Observer = p.opts.Metrics
	}
	pool, err := vcenter.NewPool(p.cfg, vopts)
	if err != nil {
		return err
	}
	p.pool = pool
	if m := p.opts.Metrics; m != nil {
		var names []string
		for _, c := range pool.Clients() {
			names = append(names, c.Name())
		}
		m.initialize(names)
	}
	pool.Start(ctx)
	var ic []inventory.Client
	var tc []topology.Client
	for _, c := range pool.Clients() {
		ic = append(ic, c)
		tc = append(tc, c)
	}
	p.inv = inventory.New(ic, inventory.Options{MaxWait: p.opts.InventoryMaxWait, AllDetails: p.opts.AllVMDetails, EagerDetailsMax: p.opts.EagerDetailsMax,
		GuestHostnames: slices.Contains(p.cfg.Nodes.LookupOrder, config.LookupGuestHostname),
		GuestIPs:       p.cfg.Nodes.ServingCertificates.Approve,
		KubeletKeyProperty: func() string {
			if p.cfg.Nodes.Identity.ApproveClientCertificates {
				return p.cfg.Nodes.Identity.KeyFingerprintKey
			}
			return ""
		}(),
		NodeNameProperty: func() string {
			if p.cfg.Nodes.Identity.ApproveClientCertificates {
				return p.cfg.Nodes.Identity.NodeNameKey
			}
			return ""
		}(),
		ClusterGroups: len(p.cfg.HostGroupZones) > 0 || slices.Contains(p.cfg.Labels.Placement, config.PlacementHostGroup),
		CustomAttributes: p.cfg.Labels.InstanceTypeAttribute != "" ||
			slices.ContainsFunc(p.cfg.Labels.Additional, func(a config.AdditionalLabel) bool { return a.Attribute != "" }), SearchTimeout: min(p.cfg.Global.RequestTimeout, 10*time.Second),
		PageTimeout: p.cfg.Global.RequestTimeout + 30*time.Second, Clock: p.opts.Clock})
	p.inv.Start(ctx)
	p.topo = topology.NewResolver(p.cfg, p.inv, tc, topology.ResolverOptions{Clock: p.opts.Clock})
	p.topo.Start(ctx)
	// One loop per vCenter reacts to its changes: health changes refresh
	// the gauges; an inventory that becomes current refreshes them too and
	// asks for a retry of the Nodes waiting for it.
	for _, c := range pool.Clients() {
		ix := p.inv.Index(c.Name())
		p.wg.Go(func() { p.followVCenter(ctx, c, ix) })
	}
	if m := p.opts.Metrics; m != nil {
		// And every 10 s, for the ages.
		p.wg.Go(func() {
			_ = wait.PollUntilContextCancel(ctx, 10*time.Second, true, func(context.Context) (bool, error) {
				m.Refresh(p)
				return false, nil
			})
		})
	}
	return nil
}

// WaitForSync waits until every inventory and tag cache has been filled
// once, or ctx ends. The controller manager never calls it (lookups need
// no warm-up); one-shot tools, benchmarks and tests do.
func (p *Provider) WaitForSync(ctx context.Context) error {
	if !p.ready() {
		return p.notReady()
	}
	if err := p.inv.WaitForSync(ctx); err != nil {
		return err
	}
	return p.topo.WaitForSync(ctx)
}

// unusableFor is how long the vCenter has been unusable for lookups that
// need it: down, or its inventory not complete; 0 while usable.
func (p *Provider) unusableFor(name string, now time.Time) time.Duration {
	c, err := p.pool.Client(name)
	if err != nil {
		return 0
	}
	if h := c.Health(); h.State == vcenter.Down {
		return now.Sub(h.Since)
	}
	ix := p.inv.Index(name)
	if ix == nil {
		return 0
	}
	complete, at, _ := ix.Status()
	switch {
	case complete:
		return 0
	case at.IsZero():
		return now.Sub(p.startedAt)
	}
	return now.Sub(at)
}

// WaitForUsable waits until every vCenter that is not down has its
// inventory and tags read once, or ctx ends (one-shot commands).
func (p *Provider) WaitForUsable(ctx context.Context) {
	if !p.ready() {
		return
	}
	for _, c := range p.pool.Clients() {
		if c.Health().State == vcenter.Down {
			continue
		}
		if ix := p.inv.Index(c.Name()); ix != nil && ix.WaitSynced(ctx) != nil {
			return
		}
		if tc := p.topo.Cache(c.Name()); tc != nil {
			_ = tc.WaitSynced(ctx)
		}
	}
}

// Close stops the background work, waits for it, and logs out of every
// vCenter.
func (p *Provider) Close() {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	p.stop()
}

func (p *Provider) stop() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	if p.topo != nil {
		p.topo.Wait()
	}
	if p.inv != nil {
		p.inv.Wait()
	}
	if p.pool != nil {
		p.pool.Close()
	}
	if p.creds != nil {
		p.creds.Wait()
	}
}

// Pool returns the vCenter clients (nil before Start).
func (p *Provider) Pool() *vcenter.Pool { return p.pool }

// Inventory returns the VM inventory (nil before Start).
func (p *Provider) Inventory() *inventory.Inventory { return p.inv }

// Topology returns the tag resolver (nil before Start).
func (p *Provider) Topology() *topology.Resolver { return p.topo }

// Config returns the config the provider was built from.
func (p *Provider) Config() *config.Config { return p.cfg }

// ready reports whether Start has succeeded; from then on pool, inv, topo
// and creds are set and never change.
func (p *Provider) ready() bool {
	select {
	case <-p.started:
		return true
	default:
		return false
	}
}

func (p *Provider) notReady() error {
	return errors.New("the vSphere provider is not started yet (vCenter connections being set up)")
}

func (p *Provider) providerID(vm inventory.VM) string { return providerid.For(vm.UUID) }

// startRetry paces new attempts of a failed start: 1s doubling to 1m.
func startRetry() wait.Backoff {
	return *vcenter.Backoff(time.Second, time.Minute)
}

// Initialize is called by the framework before the controllers start. It
// starts the provider; if that fails (no Kubernetes client yet), it logs
// the error and retries in the background until stop, lookups failing
// with "not started" meanwhile.
func (p *Provider) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	// The framework passes no ctx: the root of this provider's loggers is
	// klog's, named once here; every loop below takes it from ctx.
	log := klog.Background().WithName("vsphere")
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), log))
	go func() {
		<-stop
		cancel()
	}()
	attempt := func(ctx context.Context) (bool, error) {
		kube, err := clientBuilder.Client("vsphere-cloud-controller-manager")
		if err != nil {
			log.Error(err, "No Kubernetes client for the vSphere provider; retrying")
			return false, nil
		}
		if p.opts.Events != nil {
			p.opts.Events.Start(ctx, kube)
		}
		if err := p.Start(ctx, kube); err != nil {
			log.Error(err, "vSphere provider failed to start; retrying")
			return false, nil
		}
		return true, nil
	}
	if ok, _ := attempt(ctx); ok {
		return
	}
	go func() { _ = wait.ExponentialBackoffWithContext(ctx, startRetry(), attempt) }()
}

// ProviderName returns "vsphere".
func (p *Provider) ProviderName() string { return Name }

// HasClusterID is true: the provider does not need a cluster ID.
func (p *Provider) HasClusterID() bool { return true }

// InstancesV2 is the supported instances interface.
func (p *Provider) InstancesV2() (cloudprovider.InstancesV2, bool) { return p, true }

// Instances is not supported (InstancesV2 is).
func (p *Provider) Instances() (cloudprovider.Instances, bool) { return nil, false }

// LoadBalancer is not supported.
func (p *Provider) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// Zones is not supported (InstancesV2 reports zones).
func (p *Provider) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not supported.
func (p *Provider) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is not supported.
func (p *Provider) Routes() (cloudprovider.Routes, bool) { return nil, false }
