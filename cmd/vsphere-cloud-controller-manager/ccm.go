package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudconfig "k8s.io/cloud-provider/app/config"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/configrollout"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/configwatch"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/clientcsr"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/noderetry"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/servingcsr"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// controllers are the framework's controllers this provider serves: node
// initialization and node lifecycle. Ours, node-topology and serving-csr,
// are added beside them. The framework's service and route controllers
// are not run (the reference ran them only with its NSX-T sections, which
// this CCM reads and reports: docs/migration.md); their names stay known
// (notRun) so that a --controllers list of the reference, such as
// *,-route, still starts.
var controllers = []string{names.CloudNodeController, names.CloudNodeLifecycleController}

// notRun registers a framework controller this CCM does not run: named in
// --controllers, it starts nothing.
func notRun(name string) app.ControllerInitFuncConstructor {
	return app.ControllerInitFuncConstructor{
		Constructor: func(app.ControllerInitContext, *cloudconfig.CompletedConfig, cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				klog.FromContext(ctx).V(2).Info("Not run by this CCM (the reference ran it only with its NSX-T sections; see docs/migration.md)", "controller", name)
				return nil, false, nil
			}
		},
	}
}

// nodeController registers the framework's cloud node controller as the
// framework does (k8s.io/cloud-provider/app's startCloudNodeController,
// same client, flags and start), but on a noderetry.Tee's informer, which
// it stores in tee: the node-topology controller can then hand it a Node
// to retry at once without writing the Node.
func nodeController(tee *atomic.Pointer[noderetry.Tee]) app.ControllerInitFuncConstructor {
	return app.ControllerInitFuncConstructor{
		InitContext: app.DefaultInitFuncConstructors[names.CloudNodeController].InitContext,
		Constructor: func(ic app.ControllerInitContext, cc *cloudconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, cctx genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				t := noderetry.New(cc.SharedInformers.Core().V1().Nodes())
				nc, err := nodecontroller.NewCloudNodeController(t.Informer(), cc.ClientBuilder.ClientOrDie(ic.ClientName), cloud,
					cc.ComponentConfig.NodeStatusUpdateFrequency.Duration,
					cc.ComponentConfig.NodeController.ConcurrentNodeSyncs,
					cc.ComponentConfig.NodeController.ConcurrentNodeStatusUpdates)
				if err != nil {
					// As the framework: reported, and the controller not started.
					klog.FromContext(ctx).Error(err, "Could not start the cloud node controller", "controller", names.CloudNodeController)
					return nil, false, nil
				}
				tee.Store(t)
				go nc.RunWithContext(ctx, cctx.ControllerManagerMetrics)
				return nil, true, nil
			}
		},
	}
}

// nodeTopologyController registers the node-topology controller with the
// controller manager like the framework's own: its name in --controllers,
// on by default, started under leader election with the rest, on the
// shared Node informer. Nodes waiting for initialization are handed back
// to the node controller through tee when it runs in this process.
func nodeTopologyController(ev *nodeevents.Recorder, m *nodetopology.Metrics, tee *atomic.Pointer[noderetry.Tee]) app.ControllerInitFuncConstructor {
	return app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: nodetopology.ClientName},
		Constructor: func(ic app.ControllerInitContext, cc *cloudconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				p, ok := cloud.(*provider.Provider)
				if !ok || p == nil {
					return nil, false, fmt.Errorf("%s: the cloud provider is not vSphere's", nodetopology.Name)
				}
				cfg := p.Config()
				var vcenters []string
				for _, vc := range cfg.VCenters {
					vcenters = append(vcenters, vc.Name)
				}
				c, err := nodetopology.New(cc.ClientBuilder.ClientOrDie(ic.ClientName), cc.SharedInformers.Core().V1().Nodes(), p,
					nodetopology.Options{OutOfService: cfg.Nodes.OutOfService, Events: ev, Metrics: m, VCenters: vcenters, AdoptUntainted: cfg.Nodes.AdoptUntainted,
						Retry: func(n *v1.Node) bool {
							t := tee.Load()
							return t != nil && t.Retry(n)
						}})
				if err != nil {
					return nil, false, err
				}
				// Like the framework's controllers: it runs until ctx ends.
				go c.Run(ctx, 1)
				return nil, true, nil
			}
		},
	}
}

// servingCSRController registers the serving-csr controller like
// node-topology: in --controllers, on by default, started under leader
// election; it does nothing unless nodes.servingCertificates.approve is
// set (opt-in: approving certificates is a trust decision).
func servingCSRController(ev *nodeevents.Recorder, m *servingcsr.Metrics) app.ControllerInitFuncConstructor {
	return app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: servingcsr.ClientName},
		Constructor: func(ic app.ControllerInitContext, cc *cloudconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				p, ok := cloud.(*provider.Provider)
				if !ok || p == nil {
					return nil, false, fmt.Errorf("%s: the cloud provider is not vSphere's", servingcsr.Name)
				}
				if !p.Config().Nodes.ServingCertificates.Approve {
					klog.FromContext(ctx).Info("Kubelet serving certificate requests are left to other approvers (nodes.servingCertificates.approve is off)", "controller", servingcsr.Name)
					return nil, false, nil
				}
				kube := cc.ClientBuilder.ClientOrDie(ic.ClientName)
				sc := p.Config().Nodes.ServingCertificates
				cluster, err := newServingCluster(kube, cc.SharedInformers.Core().V1().Nodes(), sc)
				if err != nil {
					return nil, false, err
				}
				c, err := servingcsr.New(kube,
					cc.SharedInformers.Certificates().V1().CertificateSigningRequests(), cc.SharedInformers.Core().V1().Nodes(),
					cluster, servingcsr.NewProviderFacts(p), p,
					servingcsr.Options{Events: ev, Metrics: m, Bounds: servingcsr.Bounds{IPRanges: sc.AllowedIPRanges, DNSDomains: sc.AllowedDNSDomains}})
				if err != nil {
					return nil, false, err
				}
				go c.Run(ctx, servingcsr.Workers)
				return nil, true, nil
			}
		},
	}
}

// clientCSRController registers the kubelet-client-csr controller like
// serving-csr: in --controllers, on by default, started under leader
// election; it does nothing unless nodes.identity.approveClientCertificates
// is set.
func clientCSRController(m *clientcsr.Metrics) app.ControllerInitFuncConstructor {
	return app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: clientcsr.ClientName},
		Constructor: func(ic app.ControllerInitContext, cc *cloudconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				p, ok := cloud.(*provider.Provider)
				if !ok || p == nil {
					return nil, false, fmt.Errorf("%s: the cloud provider is not vSphere's", clientcsr.Name)
				}
				if !p.Config().Nodes.Identity.ApproveClientCertificates {
					klog.FromContext(ctx).V(2).Info("Kubelet client certificate requests are left to other approvers (nodes.identity.approveClientCertificates is off)", "controller", clientcsr.Name)
					return nil, false, nil
				}
				grace := p.Config().Nodes.Identity.KeyPublishTimeout
				if grace == 0 {
					grace = -1 // configured: no wait
				}
				c, err := clientcsr.New(cc.ClientBuilder.ClientOrDie(ic.ClientName),
					cc.SharedInformers.Certificates().V1().CertificateSigningRequests(), cc.SharedInformers.Core().V1().Nodes(),
					p, clientcsr.Options{Metrics: m, Changed: p.Changed, Grace: grace, NodeNameKey: p.Config().Nodes.Identity.NodeNameKey})
				if err != nil {
					return nil, false, err
				}
				go c.Run(ctx, 1)
				return nil, true, nil
			}
		},
	}
}

// newServingCluster is the serving-csr controller's view of the cluster:
// its own informers (Services, Namespaces, the API server's
// EndpointSlices, ServiceCIDRs where the API server serves them) and
// indexes on the shared Node informer, from nodes.servingCertificates.
func newServingCluster(kube kubernetes.Interface, nodes coreinformers.NodeInformer, sc config.ServingCertificates) (*servingcsr.ClusterIndex, error) {
	return servingcsr.NewClusterIndex(kube, nodes, servingcsr.ClusterOptions{ServiceCIDRs: sc.ServiceCIDRs, PodCIDRs: sc.PodCIDRs,
		ControlPlaneEndpoints: sc.ControlPlaneEndpoints, ClusterDomain: sc.ClusterDomain, DiscoverServiceCIDRAPI: true})
}

// newCCMCommand is k8s.io/cloud-provider's controller manager command (its
// flags, leader election, health and metrics endpoints) with the vSphere
// provider built explicitly from --cloud-config before anything starts.
// It runs until stop is closed; restart, called when the cloud-config
// changes to a valid one, must close it. The returned function stops
// following the cloud-config, closes the provider (logs out of the
// vCenters) and then releases the leader lease if this process holds it.
func newCCMCommand(env []string, stderr io.Writer, stop <-chan struct{}, restart func()) (*cobra.Command, func(), error) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, nil, err
	}
	opts.KubeCloudShared.CloudProvider.Name = provider.Name
	// Profiling brings /debug/flags/v, which sets the log verbosity at run
	// time past the cap (see maxVerbosity): off here, and refused below.
	opts.Generic.Debugging.EnableProfiling = false
	ctrls := map[string]app.ControllerInitFuncConstructor{}
	for _, n := range controllers {
		ctrls[n] = app.DefaultInitFuncConstructors[n]
	}
	// The node controller's informer, kept for node-topology's retries.
	var tee atomic.Pointer[noderetry.Tee]
	ctrls[names.CloudNodeController] = nodeController(&tee)
	for _, n := range []string{names.ServiceLBController, names.NodeRouteController} {
		ctrls[n] = notRun(n)
	}
	// One event recorder for the provider and the controller: an event is
	// de-duplicated whoever sends it. Its sink starts with the framework's
	// client (provider.Initialize).
	events := nodeevents.New(clock.RealClock{})
	topologyMetrics := nodetopology.NewMetrics()
	ctrls[nodetopology.Name] = nodeTopologyController(events, topologyMetrics, &tee)
	csrMetrics := servingcsr.NewMetrics()
	ctrls[servingcsr.Name] = servingCSRController(events, csrMetrics)
	clientMetrics := clientcsr.NewMetrics()
	ctrls[clientcsr.Name] = clientCSRController(clientMetrics)
	lead := &leadership{}
	lead.wrap(ctrls)
	reloadMetrics := configwatch.NewMetrics()
	var reload *configReload
	var kube kubernetes.Interface
	var prov *provider.Provider
	var nodeLabels map[string]string
	extra := cliflag.NamedFlagSets{}
	vfs := extra.FlagSet("vsphere")
	vfs.StringToStringVar(&nodeLabels, nodeLabelsFlag, nil, nodeLabelsUsage)
	minUptime, jitter := configrollout.DefaultMinUptime, configrollout.DefaultJitter
	vfs.DurationVar(&minUptime, "config-restart-min-uptime", minUptime, "A change of the cloud-config restarts no replica sooner than this after it started, so that a file that flaps cannot drive the replicas into the kubelet's crash back-off.")
	vfs.DurationVar(&jitter, "config-restart-jitter", jitter, "A replica waits a random delay of up to this long before it restarts for a change of the cloud-config, so that the replicas do not restart together.")
	startedAt := time.Now()
	cmd := app.NewCloudControllerManagerCommand(opts,
		func(*cloudconfig.CompletedConfig) cloudprovider.Interface { return prov },
		ctrls, names.CCMControllerAliases(), extra, stop)
	cmd.Use = "vsphere-cloud-controller-manager"
	cmd.Long = `The Kubernetes cloud controller manager for VMware vSphere: finds every node's VM
across all configured vCenters and datacenters, sets its providerID, addresses,
instance type, zone and region (from vSphere tags), and reports shut-down and
deleted VMs. It never reports a VM deleted because a vCenter could not be asked.

Operator commands:
  vsphere-cloud-controller-manager config validate FILE
  vsphere-cloud-controller-manager config convert FILE
  vsphere-cloud-controller-manager topology explain --cloud-config FILE
  vsphere-cloud-controller-manager migrate preflight --cloud-config FILE --kubeconfig FILE
  vsphere-cloud-controller-manager csr explain --cloud-config FILE --kubeconfig FILE [NAME...]`
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	cmd.SetGlobalNormalizationFunc(cliflag.WordSepNormalizeFunc)
	cmd.PreRunE = func(c *cobra.Command, _ []string) error {
		if f := c.Flags().Lookup("version"); f != nil && f.Changed {
			return nil
		}
		capVerbosity(c, stderr)
		if opts.Generic.Debugging.EnableProfiling {
			opts.Generic.Debugging.EnableProfiling = false
			fmt.Fprintf(stderr, "warning: --profiling=true ignored: it would serve /debug/flags/v, which raises the log verbosity at run time past %d, where client-go logs API response bodies (the credential Secret)\n", maxVerbosity)
		}
		cp := opts.KubeCloudShared.CloudProvider
		if cp.Name != provider.Name {
			return fmt.Errorf("--cloud-provider=%q: this binary provides only %q", cp.Name, provider.Name)
		}
		if cp.CloudConfigFile == "" {
			return errors.New("--cloud-config is required: the path of the vSphere cloud-config (YAML, or the legacy INI vsphere.conf)")
		}
		cfg, started, ok := loadStarted(cp.CloudConfigFile, env, stderr)
		if !ok {
			return exitError{1}
		}
		// What the command line and the config must agree on: checked
		// here, and for every change of the config while it runs, so that
		// a change this process would refuse at start is refused, not
		// restarted into.
		startChecks := func(cfg *config.Config) ([]string, error) {
			return checkStart(cfg, opts.Generic.Controllers, nodeLabels)
		}
		warnings, err := startChecks(cfg)
		if err != nil {
			return err
		}
		for _, w := range warnings {
			fmt.Fprintln(stderr, "warning:", w)
		}
		if cfg.Nodes.SkipNodeDeletion {
			fmt.Fprintf(stderr, "%s is set: no Node is deleted because its VM is gone (the reference CCM's switch; any value counts, even false)\n", config.SkipNodeDeletionEnv)
		}
		m := provider.NewMetrics()
		for _, c := range slices.Concat(m.Collectors(), topologyMetrics.Collectors(), csrMetrics.Collectors(), clientMetrics.Collectors(), events.Collectors(), reloadMetrics.Collectors()) {
			if err := legacyregistry.Register(c); err != nil {
				return fmt.Errorf("register metrics: %w", err)
			}
		}
		decoding := &vcenter.Decoding{}
		switch v := strings.ToLower(lookupEnv(env, fastDecoderEnv)); v {
		case "", "on":
		case "off":
			decoding.Off = true
			fmt.Fprintf(stderr, "%s=off: every property collector answer is decoded by govmomi's decoder\n", fastDecoderEnv)
		default:
			return fmt.Errorf("%s=%q: want on or off", fastDecoderEnv, v)
		}
		p, err := provider.New(cfg, provider.Options{Metrics: m, Events: events, NodeLabels: nodeLabels, VCenter: vcenter.Options{Decoding: decoding}})
		if err != nil {
			return err
		}
		prov = p
		// The CCM's own client, for the config events and the lease, as
		// the framework builds its own (--master, --kubeconfig, else
		// in-cluster).
		if rc, err := clientcmd.BuildConfigFromFlags(opts.Master, opts.Generic.ClientConnection.Kubeconfig); err == nil {
			kube, _ = kubernetes.NewForConfig(rc)
		}
		if le := opts.Generic.LeaderElection; le.LeaderElect {
			lead.use(kube, le.ResourceNamespace, le.ResourceName)
		}
		ro := reloadOptions{path: cp.CloudConfigFile, started: started, env: env, metrics: reloadMetrics,
			validate: func(cfg *config.Config) error {
				_, err := startChecks(cfg)
				return err
			},
			checkCA: func(ctx context.Context, vc config.VCenter, bundle []byte) error {
				return vcenter.CheckCABundle(ctx, vc, bundle, cfg.Global.ConnectTimeout)
			},
			minUptime: minUptime, jitter: jitter, startedAt: startedAt}
		if le := opts.Generic.LeaderElection; le.LeaderElect {
			ro.leading, ro.groupNS, ro.groupName = lead.leading, le.ResourceNamespace, le.ResourceName
		}
		reload = newConfigReload(cp.CloudConfigFile, restart)
		reload.start(kube, ro, cfg)
		return nil
	}
	closeFn := func() {
		if reload != nil {
			reload.close()
		}
		if prov != nil {
			prov.Close()
		}
		if err := lead.release(context.Background()); err != nil {
			fmt.Fprintln(stderr, "warning: the leader lease was not released (a standby takes over when it expires):", err)
		}
	}
	return cmd, closeFn, nil
}

// fastDecoderEnv switches the fast property-collector decoder off ("off")
// for a process: every answer is then decoded by govmomi's decoder (the
// CPU time of a big vCenter's reads grows several times; nothing else
// changes). It switches itself off when a shadow decode disagrees.
const fastDecoderEnv = "VSPHERE_CCM_FAST_DECODER"

// maxVerbosity is the highest log verbosity the controller manager runs
// at: from 8 on, client-go logs Kubernetes API response bodies, and the
// LIST of the credential Secret would put passwords in the log.
const maxVerbosity = 7

func capVerbosity(c *cobra.Command, stderr io.Writer) {
	if f := c.Flags().Lookup("v"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > maxVerbosity {
			_ = f.Value.Set(strconv.Itoa(maxVerbosity))
			fmt.Fprintf(stderr, "warning: -v=%d lowered to %d: from 8 on, client-go logs API response bodies, which would include the credential Secret\n", n, maxVerbosity)
		}
	}
	// --vmodule sets levels per file and would bypass the cap above.
	if f := c.Flags().Lookup("vmodule"); f != nil && f.Value.String() != "" {
		capped, changed := capVModule(f.Value.String())
		if changed {
			_ = f.Value.Set(capped)
			fmt.Fprintf(stderr, "warning: --vmodule levels above %d lowered to %d (now %q): from 8 on, client-go logs API response bodies, which would include the credential Secret\n", maxVerbosity, maxVerbosity, capped)
		}
	}
}

// capVModule lowers every level above maxVerbosity in a --vmodule value
// (pattern=N,...). An entry whose level does not parse is dropped, so that
// nothing unchecked gets through.
func capVModule(v string) (string, bool) {
	var out []string
	changed := false
	for _, e := range strings.Split(v, ",") {
		pattern, level, ok := strings.Cut(strings.TrimSpace(e), "=")
		n, err := strconv.Atoi(level)
		switch {
		case !ok || err != nil:
			changed = true
			continue
		case n > maxVerbosity:
			n, changed = maxVerbosity, true
		}
		out = append(out, pattern+"="+strconv.Itoa(n))
	}
	return strings.Join(out, ","), changed
}

// checkStart checks what the config and the command line must agree on
// (the controllers it needs, --node-labels), with warnings for what is
// lost; an error names the field and the flag.
func checkStart(cfg *config.Config, controllers []string, nodeLabels map[string]string) ([]string, error) {
	var warnings []string
	if !genericcontrollermanager.IsControllerEnabled(nodetopology.Name, app.ControllersDisabledByDefault, controllers) {
		if err := needsNodeTopology(cfg); err != nil {
			return nil, fmt.Errorf("%w: add %s to --controllers (or use --controllers=*), or remove the field", err, nodetopology.Name)
		}
		warnings = append(warnings, fmt.Sprintf("--controllers=%s leaves out %s: Nodes waiting for a vCenter that returns wait for the framework's per-Node retry (tens of seconds) instead of being initialized within seconds, placement and drift are not followed after initialization, a guest's new address waits for the node status pass, and the record of each Node's VM (label vsphere.vsphere-ccm.io/vm) is neither written on Nodes another CCM initialized nor kept current, so those Nodes are never deleted for a missing VM; add it to the list to keep them",
			strings.Join(controllers, ","), nodetopology.Name))
	}
	if cfg.Nodes.AdoptUntainted && !genericcontrollermanager.IsControllerEnabled(names.CloudNodeController, app.ControllersDisabledByDefault, controllers) {
		return nil, fmt.Errorf("nodes.adoptUntainted is true, but the %s that initializes the tainted Nodes is not enabled (they would keep the taint): add it to --controllers, or remove the field", names.CloudNodeController)
	}
	if err := needsServingCSR(cfg, controllers); err != nil {
		return nil, err
	}
	if cfg.Nodes.Identity.ApproveClientCertificates &&
		!genericcontrollermanager.IsControllerEnabled(clientcsr.Name, app.ControllersDisabledByDefault, controllers) {
		return nil, fmt.Errorf("nodes.identity.approveClientCertificates is true, but the %s controller that approves them is not enabled: add %s to --controllers (or use --controllers=*), or remove the field", clientcsr.Name, clientcsr.Name)
	}
	labelWarnings, err := checkNodeLabels(nodeLabels, cfg)
	if err != nil {
		return nil, err
	}
	return append(warnings, labelWarnings...), nil
}

// needsNodeTopology is an error naming the first config field that only
// the node-topology controller carries out.
func needsNodeTopology(cfg *config.Config) error {
	switch {
	case cfg.Nodes.OutOfService.Enabled:
		return fmt.Errorf("nodes.outOfService.enabled is true, but the %s controller that adds the taint is not enabled", nodetopology.Name)
	case len(cfg.Labels.Placement) > 0:
		return fmt.Errorf("labels.placement is set, but the %s controller that keeps the placement labels current is not enabled", nodetopology.Name)
	case cfg.Nodes.AdoptUntainted:
		return fmt.Errorf("nodes.adoptUntainted is true, but the %s controller that taints those Nodes for initialization is not enabled", nodetopology.Name)
	case cfg.Labels.OnDrift != "" && cfg.Labels.OnDrift != config.DriftKeep:
		return fmt.Errorf("labels.onDrift is %s, but the %s controller that acts on drift is not enabled", cfg.Labels.OnDrift, nodetopology.Name)
	}
	return nil
}

// needsServingCSR refuses serving certificate approval asked for in the
// config with a --controllers list that leaves its controller out.
func needsServingCSR(cfg *config.Config, controllers []string) error {
	if cfg.Nodes.ServingCertificates.Approve &&
		!genericcontrollermanager.IsControllerEnabled(servingcsr.Name, app.ControllersDisabledByDefault, controllers) {
		return fmt.Errorf("nodes.servingCertificates.approve is true, but the %s controller that approves them is not enabled: add %s to --controllers (or use --controllers=*), or remove the field",
			servingcsr.Name, servingcsr.Name)
	}
	return nil
}
