package servingcsr

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// ClusterOptions are what the cluster's objects do not say, from
// nodes.servingCertificates.
type ClusterOptions struct {
	// ServiceCIDRs and PodCIDRs are the cluster's ranges, in addition to
	// the ServiceCIDR objects and every Node's spec.podCIDRs.
	ServiceCIDRs, PodCIDRs []netip.Prefix
	// ControlPlaneEndpoints are the API server's addresses and names as
	// clients reach them (lower case), in addition to the default/kubernetes
	// EndpointSlices.
	ControlPlaneEndpoints []string
	// ClusterDomain is the cluster's DNS domain (lower case; default
	// cluster.local).
	ClusterDomain string
	// ServiceCIDRAPI: the API server serves networking.k8s.io/v1
	// ServiceCIDRs, read when set.
	ServiceCIDRAPI bool
	// DiscoverServiceCIDRAPI: Start asks the API server whether it serves
	// ServiceCIDRs (ServesServiceCIDRs, retried with back-off until it
	// answers) instead of ServiceCIDRAPI saying so.
	DiscoverServiceCIDRAPI bool
}

// ControlPlaneLabel marks a control-plane Node (kubeadm sets it with the
// admin's credentials; NodeRestriction keeps a kubelet from setting it on
// itself).
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// ClusterIndex is the Cluster of informers: the shared Node informer
// (indexed by BIOS UUID, address, name and Pod range) and its own, which
// exist only with the controller: Services, Namespaces, ServiceCIDRs and
// the API server's EndpointSlices (default/kubernetes). It answers from
// memory: no API request per certificate request.
type ClusterIndex struct {
	kube                                kubernetes.Interface
	nodes, services, namespaces, slices cache.Indexer
	all                                 informers.SharedInformerFactory
	factories                           []informers.SharedInformerFactory
	synced                              []cache.InformerSynced
	opts                                ClusterOptions

	// mu guards the ServiceCIDR informer, which an API server upgraded to
	// serve them adds while running (rediscover).
	mu          sync.RWMutex
	cidrs       cache.Store // nil without the ServiceCIDR API
	cidrsSynced cache.InformerSynced
	wg          sync.WaitGroup
}

// The indexes on Nodes and Services.
const (
	byUUID    = "servingcsr.uuid"
	byIP      = "servingcsr.ip"
	byName    = "servingcsr.name"
	byPodCIDR = "servingcsr.podCIDR"
)

// ServesServiceCIDRs asks the API server whether it serves
// networking.k8s.io/v1 ServiceCIDRs (Kubernetes 1.33 and later).
func ServesServiceCIDRs(ctx context.Context, kube kubernetes.Interface) (bool, error) {
	var list metav1.APIResourceList
	err := kube.Discovery().RESTClient().Get().AbsPath("/apis/networking.k8s.io/v1").Do(ctx).Into(&list)
	if apierrors.IsNotFound(err) {
		return false, nil // no networking.k8s.io/v1 at all
	}
	if err != nil {
		return false, fmt.Errorf("discover networking.k8s.io/v1: %w", err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "servicecidrs" }), nil
}

// podPoolAPIs are the APIs of CNIs whose Pod addresses come from pools of
// their own, not from the Nodes' spec.podCIDRs: group/version and
// resource.
var podPoolAPIs = []struct{ cni, groupVersion, resource string }{
	{"Calico", "crd.projectcalico.org/v1", "ippools"},
	{"Cilium", "cilium.io/v2alpha1", "ciliumpodippools"},
	{"Cilium", "cilium.io/v2", "ciliumnodes"},
}

// PodPoolCNIs names the CNIs the API server serves the pool APIs of
// (Calico's IPPools, Cilium's pools and nodes): their Pod addresses are
// in no Node's spec.podCIDRs, so another Node's Pod address is refused
// only when nodes.servingCertificates.podCIDRs lists the pools.
func PodPoolCNIs(ctx context.Context, kube kubernetes.Interface) ([]string, error) {
	var out []string
	for _, api := range podPoolAPIs {
		var list metav1.APIResourceList
		err := kube.Discovery().RESTClient().Get().AbsPath("/apis/" + api.groupVersion).Do(ctx).Into(&list)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return out, fmt.Errorf("discover %s: %w", api.groupVersion, err)
		}
		if slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == api.resource }) && !slices.Contains(out, api.cni) {
			out = append(out, api.cni)
		}
	}
	return out, nil
}

// NewClusterIndex adds its indexes to the Node informer (before it
// starts) and creates its own informers; Start starts them.
func NewClusterIndex(kube kubernetes.Interface, nodes coreinformers.NodeInformer, opts ClusterOptions) (*ClusterIndex, error) {
	if opts.ClusterDomain == "" {
		opts.ClusterDomain = "cluster.local"
	}
	if err := nodes.Informer().AddIndexers(cache.Indexers{byUUID: nodeUUIDs, byIP: nodeIPs, byName: nodeNames, byPodCIDR: nodePodCIDRs}); err != nil {
		return nil, fmt.Errorf("%s: index Nodes: %w", Name, err)
	}
	all := informers.NewSharedInformerFactory(kube, 0)
	apiserver := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(metav1.NamespaceDefault),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=kubernetes" }))
	svc := all.Core().V1().Services().Informer()
	if err := svc.AddIndexers(cache.Indexers{byIP: serviceIPs, byName: serviceNames}); err != nil {
		return nil, fmt.Errorf("%s: index Services: %w", Name, err)
	}
	ns := all.Core().V1().Namespaces().Informer()
	eps := apiserver.Discovery().V1().EndpointSlices().Informer()
	c := &ClusterIndex{kube: kube, nodes: nodes.Informer().GetIndexer(), services: svc.GetIndexer(), namespaces: ns.GetIndexer(), slices: eps.GetIndexer(),
		all: all, factories: []informers.SharedInformerFactory{all, apiserver}, opts: opts,
		synced: []cache.InformerSynced{nodes.Informer().HasSynced, svc.HasSynced, ns.HasSynced, eps.HasSynced}}
	if opts.ServiceCIDRAPI && !opts.DiscoverServiceCIDRAPI {
		c.readServiceCIDRs()
	}
	return c, nil
}

// readServiceCIDRs adds the ServiceCIDR informer (started by Start, or by
// the caller after it).
func (c *ClusterIndex) readServiceCIDRs() {
	cidrs := c.all.Networking().V1().ServiceCIDRs().Informer()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cidrs, c.cidrsSynced = cidrs.GetStore(), cidrs.HasSynced
}

// serviceCIDRs are the ServiceCIDR objects read (nil without the API).
func (c *ClusterIndex) serviceCIDRs() []any {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.cidrs == nil {
		return nil
	}
	return c.cidrs.List()
}

// ServiceRangeKnown implements Cluster: the Service range is configured
// (serviceCIDRs) or read from the API server's ServiceCIDRs. Without it a
// free address of the range cannot be told from a Node's.
func (c *ClusterIndex) ServiceRangeKnown() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.opts.ServiceCIDRs) > 0 || c.cidrs != nil
}

// RediscoverEvery is how often an API server that served no ServiceCIDRs
// is asked again (it may have been upgraded to Kubernetes 1.33 or later).
const RediscoverEvery = 10 * time.Minute

// rediscover asks the API server every RediscoverEvery whether it serves
// ServiceCIDRs now, until it does (they are then read) or ctx ends.
func (c *ClusterIndex) rediscover(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, RediscoverEvery, false, func(ctx context.Context) (bool, error) {
		served, err := ServesServiceCIDRs(ctx, c.kube)
		if err != nil || !served {
			return false, nil
		}
		c.readServiceCIDRs()
		c.all.Start(ctx.Done())
		klog.FromContext(ctx).Info("The API server serves ServiceCIDRs now: the Service range is read from them", "controller", Name)
		return true, nil
	})
}

// discover asks the API server whether it serves ServiceCIDRs, with
// back-off until it answers or ctx ends (an API server still starting
// must not stop the CCM), and warns when neither it nor the config
// gives the Service range.
func (c *ClusterIndex) discover(ctx context.Context) {
	log := klog.FromContext(ctx)
	var served bool
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: time.Minute}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		var err error
		if served, err = ServesServiceCIDRs(ctx, c.kube); err != nil {
			log.Error(err, "Cannot tell whether the API server serves ServiceCIDRs; retrying", "controller", Name)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return // ctx ended: HasSynced stays false
	}
	if len(c.opts.PodCIDRs) == 0 {
		if cnis, err := PodPoolCNIs(ctx, c.kube); err != nil {
			log.Error(err, "Cannot tell whether the CNI allocates Pod addresses from pools of its own", "controller", Name)
		} else if len(cnis) > 0 {
			log.Info("Warning: the cluster's CNI ("+strings.Join(cnis, ", ")+") allocates Pod addresses from pools of its own, not from the Nodes' spec.podCIDRs, and nodes.servingCertificates.podCIDRs is not set: "+
				"a Pod address of another Node that a guest reports is not refused for being a Pod's; list the CNI's pools (Calico IPPools, Cilium's cluster-pool or CiliumPodIPPools) in podCIDRs", "controller", Name)
		}
	}
	if served {
		c.readServiceCIDRs()
		return
	}
	if len(c.opts.ServiceCIDRs) == 0 {
		log.Info("Warning: the API server does not serve networking.k8s.io/v1 ServiceCIDRs and nodes.servingCertificates.serviceCIDRs is not set: "+
			"requests with an IP SAN wait (ServiceRangeUnknown), as a free address of the Service range cannot be told from a Node's; set serviceCIDRs to the cluster's --service-cluster-ip-range. The API server is asked again every 10 minutes", "controller", Name)
	}
	c.wg.Go(func() { c.rediscover(ctx) })
}

// Start starts the informers it owns (first asking the API server whether
// it serves ServiceCIDRs, with DiscoverServiceCIDRAPI: it then blocks
// until it answers or ctx ends); they stop when ctx ends and Shutdown
// returns once they have.
func (c *ClusterIndex) Start(ctx context.Context) {
	if c.opts.DiscoverServiceCIDRAPI {
		c.discover(ctx)
	}
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
}

// Shutdown waits for the informers Start started to stop (after ctx ended).
func (c *ClusterIndex) Shutdown() {
	c.wg.Wait()
	for _, f := range c.factories {
		f.Shutdown()
	}
}

// HasSynced reports whether every informer has synced.
func (c *ClusterIndex) HasSynced() bool {
	c.mu.RLock()
	cs := c.cidrsSynced
	c.mu.RUnlock()
	if cs != nil && !cs() {
		return false
	}
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// OthersOnVM implements Cluster: a lookup in the BIOS UUID index.
func (c *ClusterIndex) OthersOnVM(node *v1.Node) []string {
	keys, _ := nodeUUIDs(node)
	if len(keys) == 0 {
		return nil
	}
	objs, _ := c.nodes.ByIndex(byUUID, keys[0])
	var out []string
	for _, o := range objs {
		if n := o.(*v1.Node); n.Name != node.Name {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

func nodeUUIDs(obj any) ([]string, error) {
	n, ok := obj.(*v1.Node)
	if !ok || !providerid.Owned(n.Spec.ProviderID) {
		return nil, nil
	}
	u, err := providerid.UUID(n.Spec.ProviderID)
	if err != nil {
		return nil, nil
	}
	key := inventory.NormalizeUUID(u)
	if key == "" {
		return nil, nil
	}
	// Both byte orders: a lookup by either finds it.
	if sw := inventory.SwapUUID(key); sw != key {
		return []string{key, sw}, nil
	}
	return []string{key}, nil
}

func nodeIPs(obj any) ([]string, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip.Unmap().WithZone("").String())
		}
	}
	return out, nil
}

func nodeNames(obj any) ([]string, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return nil, nil
	}
	out := []string{dnsKey(n.Name)}
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS:
			if k := dnsKey(a.Address); !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

func nodePodCIDRs(obj any) ([]string, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, s := range append([]string{n.Spec.PodCIDR}, n.Spec.PodCIDRs...) {
		// A kubelet may set its Node's Pod range when it registers: one
		// wider than any Node's (0.0.0.0/0) would deny every address.
		if p, err := netip.ParsePrefix(s); err == nil && p.Bits() >= minNodePodBits(p.Addr()) {
			if k := p.Masked().String(); !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// minNodePodBits is the shortest Pod range a Node's spec is believed for
// (kube-controller-manager gives /24 and /64 by default): /16 and /48.
func minNodePodBits(a netip.Addr) int {
	if a.Is4() {
		return 16
	}
	return 48
}

func serviceIPs(obj any) ([]string, error) {
	s, ok := obj.(*v1.Service)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, a := range serviceAddresses(s) {
		if k := a.ip.String(); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

func serviceNames(obj any) ([]string, error) {
	s, ok := obj.(*v1.Service)
	if !ok {
		return nil, nil
	}
	out := []string{dnsKey(s.Name)}
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.Hostname != "" {
			out = append(out, dnsKey(in.Hostname))
		}
	}
	return out, nil
}

// serviceAddress is an address a Service holds, and in which field.
type serviceAddress struct {
	ip     netip.Addr
	reason string
	field  string
}

func serviceAddresses(s *v1.Service) []serviceAddress {
	var out []serviceAddress
	add := func(text, reason, field string) {
		if ip, err := netip.ParseAddr(text); err == nil {
			out = append(out, serviceAddress{ip.Unmap().WithZone(""), reason, field})
		}
	}
	for _, ip := range append([]string{s.Spec.ClusterIP}, s.Spec.ClusterIPs...) {
		add(ip, "ServiceIP", "spec.clusterIPs")
	}
	for _, ip := range s.Spec.ExternalIPs {
		add(ip, "ExternalIP", "spec.externalIPs")
	}
	add(s.Spec.LoadBalancerIP, "LoadBalancerIP", "spec.loadBalancerIP")
	for _, in := range s.Status.LoadBalancer.Ingress {
		add(in.IP, "LoadBalancerIP", "status.loadBalancer.ingress")
	}
	return out
}

// dnsKey is a name as compared: lower case, without a final dot.
func dnsKey(s string) string { return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".") }
