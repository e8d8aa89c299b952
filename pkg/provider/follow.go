package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// followVCenter reacts to one vCenter until ctx ends: a health change
// refreshes the gauges; every change that may change an Observation wakes
// Changed's waiters; an inventory that becomes current also wakes
// Recovered's (the node-topology controller then asks the framework to
// retry the Nodes waiting for initialization), and so do each page of
// its first read and each time VMs become findable in it (entered its
// scope, templates made VMs, renamed).
func (p *Provider) followVCenter(ctx context.Context, c *vcenter.Client, ix *inventory.Index) {
	refresh := func() {
		if m := p.opts.Metrics; m != nil {
			m.Refresh(p)
		}
	}
	// Each channel is taken again before Changed's waiters are woken, so
	// that a change is either seen by them or fires the new channel.
	tc := p.topo.Cache(ix.VCenter())
	var tags <-chan struct{} // nil (never ready) without a tag cache
	if tc != nil {
		tags = tc.Changed()
	}
	// Every channel is held across passes: one taken afresh at each pass
	// would miss a change that fired while another case was handled.
	changed, health, synced, paged, findable := ix.Changed(), c.HealthChanged(), ix.Synced(), ix.Paged(), ix.Findable()
	for {
		select {
		case <-ctx.Done():
			return
		case <-health:
			health = c.HealthChanged()
			refresh()
			p.changes.Notify()
		case <-changed:
			changed = ix.Changed()
			p.changes.Notify()
		case <-tags:
			tags = tc.Changed()
			p.changes.Notify()
			// A Node that failed for want of its tags may be retried.
			p.progress.Add(1)
			p.recovered.Notify()
		case <-synced:
			synced = ix.Synced()
			refresh()
			p.changes.Notify()
			p.progress.Add(1)
			p.recovered.Notify()
		case <-paged:
			// Lookups that missed may find their VM in the new page.
			paged = ix.Paged()
			p.progress.Add(1)
			p.recovered.Notify()
		case <-findable:
			// A Node whose VM was found nowhere may find it now (its VM
			// created, or moved into the configured datacenters, after the
			// Node registered; a template made a VM; a VM renamed):
			// retried at once, not after the node controller's back-off.
			findable = ix.Findable()
			p.arrivals.Add(1)
			p.recovered.Notify()
		}
	}
}

// Recovered returns a channel closed when a vCenter's inventory next
// becomes current (after its first read, a re-login, an outage), its
// first read reads another page, or VMs become findable in it, then replaced:
// Nodes waiting for it can be retried (RetryDue says which).
func (p *Provider) Recovered() <-chan struct{} { return p.recovered.C() }

// HasUninitializedTaint reports whether the framework has yet to
// initialize the Node.
func HasUninitializedTaint(n *v1.Node) bool { return hasUninitializedTaint(n) }

// JoinedWithoutTaint is a Node that no cloud provider initialized and
// none will: no providerID, and no node.cloudprovider.kubernetes.io/
// uninitialized taint (its kubelet ran without --cloud-provider=external,
// or it joined before a CCM was installed). The framework's node
// controller initializes only tainted Nodes.
func JoinedWithoutTaint(n *v1.Node) bool {
	return n.Spec.ProviderID == "" && !hasUninitializedTaint(n)
}

func hasUninitializedTaint(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}
