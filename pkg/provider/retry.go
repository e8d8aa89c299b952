package provider

import (
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// failedInits are the Nodes whose last initialization (InstanceMetadata)
// failed and that have not been retried since, each with the progress
// count (Provider.progress) read when its lookup began: the node-topology
// controller asks the framework to retry them (RetryDue) once the
// inventories have made progress since and their lookup can be answered,
// each once per failure. A Node that fails with every vCenter current (its
// VM exists nowhere) is retried at the next progress, not at every pass.
type failedInits struct {
	mu    sync.Mutex
	nodes map[string]uint64
}

func (f *failedInits) set(name string, failed bool, progress uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !failed {
		delete(f.nodes, name)
		return
	}
	if f.nodes == nil {
		f.nodes = map[string]uint64{}
	}
	f.nodes[name] = progress
}

// take removes and returns the Nodes of nodes that failed before progress
// reached now and for which due is true; it forgets failed Nodes not in
// nodes (deleted, or no longer waiting).
func (f *failedInits) take(nodes []*v1.Node, now uint64, due func(*v1.Node) bool) []*v1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	present := make(map[string]bool, len(nodes))
	var out []*v1.Node
	for _, n := range nodes {
		present[n.Name] = true
		if at, failed := f.nodes[n.Name]; failed && at < now && due(n) {
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

// initFailed records the outcome of an initialization whose lookup began
// at progress count at. A failure during which the inventories made
// progress wakes Recovered's waiters: the progress it missed may be what
// it waited for (a page with its VM that arrived while it failed).
func (p *Provider) initFailed(name string, failed bool, at uint64) {
	p.failed.set(name, failed, at)
	if failed && p.progress.Load() != at {
		p.recovered.Notify()
	}
}

// RetryDue returns, among waiting (the Nodes that still carry the
// framework's uninitialized taint), those whose initialization failed,
// whose inventories made progress since (a page of a first read, a read
// completed, a vCenter back) and whose lookup can now be answered
// without waiting for an inventory (inventory.Peek). It makes no
// request. Each failure is returned once: a Node returned is returned
// again only after it fails again.
func (p *Provider) RetryDue(waiting []*v1.Node) []*v1.Node {
	if !p.ready() {
		return nil
	}
	return p.failed.take(waiting, p.progress.Load(), p.answerable)
}

// answerable reports whether node's lookup (findVM's methods, in order)
// would now be answered without waiting for an inventory. A Node no
// inventory progress can help (another provider's providerID, no method
// that can search yet) is not: it would be retried at every page.
func (p *Provider) answerable(node *v1.Node) bool {
	if id := node.Spec.ProviderID; id != "" {
		uuid, err := providerid.UUID(id)
		if err != nil {
			return false
		}
		found, settled := p.inv.Peek(config.LookupUUID, uuid)
		return found || settled
	}
	searched := false
	for m, value := range p.lookups(node) {
		if value == "" {
			continue // no systemUUID yet
		}
		searched = true
		found, settled := p.inv.Peek(m, value)
		switch {
		case found:
			return true
		case !settled:
			return false // a method that cannot tell stops the search
		}
	}
	return searched
}
