package nodetopology

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// Nodes that joined without the uninitialized taint (provider.
// JoinedWithoutTaint) get no providerID, zone, region or addresses from
// any CCM: the framework's node controller initializes only tainted
// Nodes. Each whose VM is found (Nodes that are not vSphere VMs are left
// alone) is reported (an event, a gauge, topology explain, migrate
// preflight); with nodes.adoptUntainted, if its VM is found by its machine
// UUID, it is given the taint, so that the node controller initializes it exactly as it
// initializes a new Node (it sets a providerID only where none is, and
// never changes one). The taint is NoSchedule: running Pods stay; new ones
// wait the seconds the initialization takes.

// The events.
const (
	ReasonNotInitialized = "NotInitialized"
	ReasonAdopted        = "NodeAdopted"
)

// untainted is the set of Nodes that joined without the taint, for the
// gauge.
type untainted struct {
	mu    sync.Mutex
	names map[string]bool
}

func (u *untainted) set(name string, on bool) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.names == nil {
		u.names = map[string]bool{}
	}
	if on {
		u.names[name] = true
	} else {
		delete(u.names, name)
	}
	return len(u.names)
}

// previewer is what adoption (syncUntainted) asks.
type previewer interface {
	// Preview is what the framework's node controller would set on node
	// (its VM found), without effects.
	Preview(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error)
}

// syncUntainted reports a Node that joined without the taint and, with
// AdoptUntainted, taints it once its VM is found.
func (c *Controller) syncUntainted(ctx context.Context, node *v1.Node) error {
	md, err := c.preview.Preview(ctx, node)
	if err != nil {
		// No VM of this CCM's vCenters, or not found yet: not reported (a
		// cluster may have Nodes that are not vSphere VMs); a change
		// notification brings it back.
		c.opts.Metrics.setUntainted(c.untainted.set(node.Name, false))
		klog.FromContext(ctx).V(2).Info("Node joined without the uninitialized taint; its VM is not found, or cannot be answered for", "node", node.Name, "err", err)
		return nil
	}
	c.opts.Metrics.setUntainted(c.untainted.set(node.Name, true))
	if !c.opts.AdoptUntainted {
		c.opts.Events.Event(node, v1.EventTypeWarning, ReasonNotInitialized,
			"Node joined without the node.cloudprovider.kubernetes.io/uninitialized taint (its kubelet ran without --cloud-provider=external, or it joined before the CCM was installed): "+
				"no CCM sets its providerID, zone, region or addresses, although its VM "+md.ProviderID+" is found. Start the kubelet with --cloud-provider=external and register the Node again, or set nodes.adoptUntainted: true")
		return nil
	}
	// Only a VM whose BIOS UUID is the Node's machine UUID: a VM found by
	// name alone (nodes.lookupOrder vmName) may be another machine's (a
	// bare-metal Node named like some VM), and the taint would give the
	// Node that VM's identity.
	uuid, err := providerid.UUID(md.ProviderID)
	if err != nil || !inventory.SameUUID(uuid, node.Status.NodeInfo.SystemUUID) {
		c.opts.Events.Event(node, v1.EventTypeWarning, ReasonNotInitialized,
			fmt.Sprintf("Node joined without the uninitialized taint and is not adopted: the VM found for it (%s) was found by name, not by the Node's machine UUID %q; initialize it by registering it again with --cloud-provider=external", md.ProviderID, node.Status.NodeInfo.SystemUUID))
		return nil
	}
	tainted := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !provider.JoinedWithoutTaint(cur) {
			return nil // initialized or tainted meanwhile
		}
		cur.Spec.Taints = append(cur.Spec.Taints, v1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule})
		if _, err := c.kube.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
		tainted = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("taint Node %s for initialization: %w", node.Name, err)
	}
	if tainted {
		c.opts.Metrics.adopted()
		c.opts.Events.Event(node, v1.EventTypeNormal, ReasonAdopted,
			fmt.Sprintf("Node joined without the uninitialized taint; its VM %s is found: tainted node.cloudprovider.kubernetes.io/uninitialized (nodes.adoptUntainted) so that the node controller initializes it (providerID, zone, region, addresses)", md.ProviderID))
		klog.FromContext(ctx).Info("Node joined without the uninitialized taint: tainted for initialization", "node", node.Name, "providerID", md.ProviderID)
	}
	return nil
}
