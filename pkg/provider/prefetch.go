package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

var _ cloudprovider.InformerUser = (*Provider)(nil)

// SetInformers is called by the framework with its informers, before they
// start: the provider reads ahead the VM details of every Node that
// registers uninitialized (see Prefetch), from the Node informer the node
// controller shares.
func (p *Provider) SetInformers(f informers.SharedInformerFactory) {
	ctx := klog.NewContext(context.Background(), klog.Background().WithName("vsphere"))
	_, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				p.Prefetch(ctx, n)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, n := old.(*v1.Node), cur.(*v1.Node)
			// The kubelet reports its systemUUID after it registers; an
			// adopted Node gets its taint later. Heartbeats change neither.
			if o.Status.NodeInfo.SystemUUID != n.Status.NodeInfo.SystemUUID || hasUninitializedTaint(o) != hasUninitializedTaint(n) {
				p.Prefetch(ctx, n)
			}
		},
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "No Node event handler: Nodes' VM details will be read when the node controller looks them up")
	}
}

// Prefetch reads ahead the details of the VM of a Node that waits for
// initialization (inventory.Prefetch), so that the node controller's
// lookup, right after, finds them: the Nodes of a registration storm share
// one vSphere request per vCenter and PrefetchInterval instead of costing
// one request each. It makes no request itself, decides nothing, and does
// nothing for an initialized Node or before the provider has started. The
// methods are tried in the lookup's order (providerID first); it stops at
// the first that finds one VM.
func (p *Provider) Prefetch(ctx context.Context, node *v1.Node) {
	if !p.ready() || !hasUninitializedTaint(node) {
		return
	}
	if id := node.Spec.ProviderID; id != "" {
		if uuid, err := providerid.UUID(id); err == nil {
			p.inv.Prefetch(ctx, config.LookupUUID, uuid)
		}
		return
	}
	for m, value := range p.lookups(node) {
		if value != "" && p.inv.Prefetch(ctx, m, value) {
			return
		}
	}
}
