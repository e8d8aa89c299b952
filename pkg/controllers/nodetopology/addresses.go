package nodetopology

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeaddresses"
)

// The framework's node controller writes a Node's addresses only at its
// node status pass (--node-status-update-frequency, 5 minutes by
// default), though the inventory sees a guest's new address within a long
// poll. syncAddresses writes them as soon as the controller observes the
// Node: exactly what that pass would write (nodeaddresses.Framework), only
// when that pass would write (it detects a change) and the addresses
// differ, at most once per AddressPace. The pass then writes nothing new
// (it still sends its empty patch for a Node with two addresses of one
// type, as it always does: its test keeps one address per type).

// addressesDue says whether node's addresses are to be written as want:
// they differ, and the framework's pass would write them too (so a mere
// reordering it ignores is not written either).
func addressesDue(node *v1.Node, want []v1.NodeAddress) bool {
	return !equality.Semantic.DeepEqual(node.Status.Addresses, want) && nodeaddresses.ChangeDetected(node.Status.Addresses, want)
}

// AddressPace is the least time between two address writes of one Node
// by this controller: a guest that changes its addresses at will, or a
// kubelet that writes its own (one not run with --cloud-provider=external
// on an initialized Node), makes at most one write per pace, not one per
// inventory change. A change within the pace is written when it ends. A
// Node first seen wanting a write waits a pace too: the framework's node
// controller writes a new Node's addresses right after initializing it.
const AddressPace = 30 * time.Second

// addressWrites records each Node's last address write by this
// controller. Workers share it; the queue hands each Node to one worker at
// a time.
type addressWrites struct {
	mu   sync.Mutex
	last map[string]addressWrite
}

// addressWrite is one write: when, and the resource version of the Node
// it was computed from ("" after a failed write). A lister copy still at
// that version predates the write (the informer has not delivered it):
// its addresses are not compared, so the write is not made twice.
type addressWrite struct {
	at   time.Time
	from string
}

func (w *addressWrites) get(node string) (addressWrite, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.last[node]
	return r, ok
}

func (w *addressWrites) put(node string, r addressWrite) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]addressWrite{}
	}
	w.last[node] = r
}

func (w *addressWrites) forget(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, node)
}

// staleRecheck is when a Node seen at the version a write was computed
// from is looked at again: the informer delivers the write within
// milliseconds, and a change made meanwhile is not lost.
const staleRecheck = time.Second

// syncAddresses writes node's addresses from cloud (Observation.Addresses)
// when they are due, as the framework writes them (a strategic merge patch
// of status), at most once per AddressPace. It returns when to look at the
// Node again (0: on a change only).
func (c *Controller) syncAddresses(ctx context.Context, node *v1.Node, cloud []v1.NodeAddress) (time.Duration, error) {
	want, ok, err := nodeaddresses.Framework(node, cloud)
	if err != nil {
		// The framework logs the same and writes nothing.
		klog.FromContext(ctx).V(4).Info("Node addresses not updated", "node", node.Name, "err", err)
		return 0, nil
	}
	if !ok || !addressesDue(node, want) {
		return 0, nil
	}
	now := c.opts.Clock.Now()
	last, seen := c.addresses.get(node.Name)
	if !seen {
		// First seen wanting a write: a Node just initialized, whose
		// addresses the framework's node controller writes itself right
		// after (or this process just started). Its pace starts now, so
		// that the two do not both write them.
		c.addresses.put(node.Name, addressWrite{at: now})
		return AddressPace, nil
	}
	if last.from != "" && last.from == node.ResourceVersion {
		return staleRecheck, nil
	}
	if wait := last.at.Add(AddressPace).Sub(now); wait > 0 {
		return wait, nil
	}
	updated := node.DeepCopy()
	updated.Status.Addresses = want
	if _, _, err := nodeutil.PatchNodeStatus(c.kube.CoreV1(), types.NodeName(node.Name), node, updated); err != nil {
		c.addresses.put(node.Name, addressWrite{at: now}) // tried again after the pace, not at every change
		return AddressPace, fmt.Errorf("node %s: addresses: %w", node.Name, err)
	}
	c.addresses.put(node.Name, addressWrite{at: now, from: node.ResourceVersion})
	c.opts.Metrics.addressesUpdated()
	klog.FromContext(ctx).V(2).Info("Node addresses updated", "node", node.Name, "addresses", want)
	return 0, nil
}
