package provider

import (
	"errors"
	"iter"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// failedInits are the Nodes whose last initialization (InstanceMetadata)
// failed and that have not been retried since, each with the counts
// (Provider.progress and arrivals) read when its lookup began: the
// node-topology controller asks the framework to retry them (RetryDue)
// once the inventories have made progress since and their lookup can be
// answered, or, for a Node whose lookup found no VM, VMs have become
// findable in a vCenter since (entered its scope, templates made VMs,
// renamed: inventory.Index.Findable) and its lookup now finds a VM; each
// once per failure. A Node that fails with every vCenter current (its VM
// exists nowhere) is retried at the next progress, not at every pass, and
// not for every VM created elsewhere; one that failed with its VM found
// (ambiguous, no address, no zone) is not retried for VMs at all.
type failedInits struct {
	mu    sync.Mutex
	nodes map[string]failure
}

// failure is a failed initialization: where the inventories were when its
// lookup began, and whether its lookup found no VM, the only failure a VM
// becoming findable can mend: absent from every vCenter
// (inventory.ErrNotFound), or absent from those that answered while
// another could not (inventory.IncompleteError, a vCenter down).
type failure struct {
	at     mark
	missed bool
}

// lookupMissed reports whether err, an initialization's, says its lookup found
// no VM (see failure), rather than an ambiguous VM, or a VM without an
// address or a zone.
func lookupMissed(err error) bool {
	var incomplete *inventory.IncompleteError
	return errors.Is(err, inventory.ErrNotFound) || errors.As(err, &incomplete)
}

// mark is where the inventories were when a lookup began.
type mark struct{ progress, arrivals uint64 }

func (f *failedInits) set(name string, failed bool, fl failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !failed {
		delete(f.nodes, name)
		return
	}
	if f.nodes == nil {
		f.nodes = map[string]failure{}
	}
	f.nodes[name] = fl
}

// take removes and returns the Nodes of nodes that failed before the
// inventories reached now (progress or arrivals) and for which due is
// true, told whether there was progress since (or only arrivals) and
// whether the Node's lookup found no VM; it forgets failed Nodes not in
// nodes (deleted, or no longer waiting).
func (f *failedInits) take(nodes []*v1.Node, now mark, due func(n *v1.Node, progressed, missed bool) bool) []*v1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	present := make(map[string]bool, len(nodes))
	var out []*v1.Node
	for _, n := range nodes {
		present[n.Name] = true
		fl, failed := f.nodes[n.Name]
		at := fl.at
		if !failed || (at.progress >= now.progress && at.arrivals >= now.arrivals) {
			continue
		}
		if due(n, at.progress < now.progress, fl.missed) {
			delete(f.nodes, n.Name)
			out = append(out, n)
		}
	}
	for name := range f.nodes {
		if !present[name] {
			delete(f.nodes, name)
		}
	}
	return out
}

// initFailed records the outcome (err) of an initialization whose lookup
// began at at. A failure during which the inventories made progress or
// VMs became findable wakes Recovered's waiters: what it missed may be
// what it waited for (a page with its VM that arrived while it failed).
func (p *Provider) initFailed(name string, err error, at mark) {
	failed := err != nil
	p.failed.set(name, failed, failure{at: at, missed: lookupMissed(err)})
	if failed && (p.progress.Load() != at.progress || p.arrivals.Load() != at.arrivals) {
		p.recovered.Notify()
	}
}

// RetryDue returns, among waiting (the Nodes that still carry the
// framework's uninitialized taint), those whose initialization failed and
// since which either the inventories made progress (a page of a first
// read, a read completed, a vCenter back, tags) and their lookup can now
// be answered without waiting for an inventory (inventory.Peek), or, their
// lookup having found no VM, VMs became findable in a vCenter and their
// lookup now finds one. It makes no
// request. Each failure is returned once: a Node returned is returned
// again only after it fails again.
func (p *Provider) RetryDue(waiting []*v1.Node) []*v1.Node {
	if !p.ready() {
		return nil
	}
	now := mark{progress: p.progress.Load(), arrivals: p.arrivals.Load()}
	return p.failed.take(waiting, now, p.due)
}

// due reports whether a failed Node is worth retrying now: after
// progress, when its lookup can be answered; after arrivals only, when
// its lookup found no VM and now finds one (a VM that became findable
// elsewhere settles nothing new, and mends no other failure).
func (p *Provider) due(n *v1.Node, progressed, missed bool) bool {
	switch {
	case progressed:
		return p.answerable(n)
	case missed:
		return p.finds(n)
	}
	return false
}

// finds reports whether node's lookup would now find a VM, not only
// settle a miss: all that a VM becoming findable can change. Any method
// that finds counts, though findVM stops at an earlier method that cannot
// tell: at worst one retry that fails again.
func (p *Provider) finds(node *v1.Node) bool {
	for found := range p.peeks(node) {
		if found {
			return true
		}
	}
	return false
}

// answerable reports whether node's lookup (findVM's methods, in order)
// would now be answered without waiting for an inventory. A Node no
// inventory progress can help (another provider's providerID, no method
// that can search yet) is not: it would be retried at every page.
func (p *Provider) answerable(node *v1.Node) bool {
	searched := false
	for found, settled := range p.peeks(node) {
		searched = true
		switch {
		case found:
			return true
		case !settled:
			return false // a method that cannot tell stops the search
		}
	}
	return searched
}

// peeks yields what inventory.Peek says now of each lookup findVM would
// make for node, in its order: the UUID of its providerID when set (then
// the only lookup), else each method of nodes.lookupOrder that has a
// value (none for the systemUUID before the kubelet reports it). It makes
// no request.
func (p *Provider) peeks(node *v1.Node) iter.Seq2[bool, bool] {
	return func(yield func(found, settled bool) bool) {
		if id := node.Spec.ProviderID; id != "" {
			if uuid, err := providerid.UUID(id); err == nil {
				yield(p.inv.Peek(config.LookupUUID, uuid))
			}
			return
		}
		for m, value := range p.lookups(node) {
			if value != "" && !yield(p.inv.Peek(m, value)) {
				return
			}
		}
	}
}
