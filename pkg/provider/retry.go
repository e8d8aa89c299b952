package provider

import (
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// failedInits are the Nodes whose last initialization (InstanceMetadata)
// failed and that have not been retried since: the node-topology
// controller asks the framework to retry them (RetryDue) once their
// lookup can be answered, each once per failure.
type failedInits struct {
	mu    sync.Mutex
	nodes map[string]bool
}

func (f *failedInits) set(name string, failed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !failed {
		delete(f.nodes, name)
		return
	}
	if f.nodes == nil {
		f.nodes = map[string]bool{}
	}
	f.nodes[name] = true
}

// take removes and returns the Nodes of nodes that failed and for which
// due is true; it forgets failed Nodes not in nodes (deleted, or
// initialized meanwhile by a later success).
func (f *failedInits) take(nodes []*v1.Node, due func(*v1.Node) bool) []*v1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	present := make(map[string]bool, len(nodes))
	var out []*v1.Node
	for _, n := range nodes {
		present[n.Name] = true
		if f.nodes[n.Name] && due(n) {
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

// RetryDue returns, among waiting (the Nodes that still carry the
// framework's uninitialized taint), those whose initialization failed
// since they were last returned and whose lookup can now be answered
// without waiting for an inventory (inventory.Answerable): a page of a
// first read holds their VM, a read completed, a vCenter came back.
// It makes no request. Each failure is returned once: a Node returned is
// returned again only after it fails again.
func (p *Provider) RetryDue(waiting []*v1.Node) []*v1.Node {
	if !p.ready() {
		return nil
	}
	return p.failed.take(waiting, p.answerable)
}

// answerable reports whether node's lookup (findVM's methods, in order)
// would now be answered without waiting for an inventory.
func (p *Provider) answerable(node *v1.Node) bool {
	if id := node.Spec.ProviderID; id != "" {
		uuid, err := providerid.UUID(id)
		if err != nil {
			return true
		}
		found, settled := p.inv.Peek(config.LookupUUID, uuid)
		return found || settled
	}
	for _, m := range p.cfg.Nodes.LookupOrder {
		value := node.Name
		if m == config.LookupUUID {
			if value = node.Status.NodeInfo.SystemUUID; value == "" {
				continue
			}
		}
		found, settled := p.inv.Peek(m, value)
		switch {
		case found:
			return true
		case !settled:
			return false // a method that cannot tell stops the search
		}
	}
	return true
}
