package provider

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// IdentityMismatchError: with nodes.identity, a Node being initialized
// whose VM (found by what its kubelet reported) is not the VM vCenter
// names like the Node. A kubelet chooses its Node name and reports its
// machine UUID; only vCenter's word binds the two. The Node is not
// initialized, and never deleted for it.
type IdentityMismatchError struct {
	Node string
	VM   inventory.VM
	// Key is nodes.identity.nodeNameKey ("" binds by VM name), Bound the
	// Node name the VM's extraConfig holds there ("" none).
	Key, Bound string
	// Others, when more than 1, is how many VMs hold the Node's name in
	// Key (a clone copies it): a name binds one VM.
	Others int
}

func (e *IdentityMismatchError) Error() string {
	switch {
	case e.Key != "" && e.Others > 1:
		return fmt.Sprintf("node %s reports the machine of VM %s, and %d VMs hold Node name %q in their extraConfig %s (a clone copies it): a name binds one VM, so the Node is not initialized; clear or change the key on the VMs that are not this Node",
			e.Node, e.VM.Location(), e.Others, e.Bound, e.Key)
	case e.Key != "" && e.Bound == "":
		return fmt.Sprintf("node %s reports the machine of VM %s, whose provisioner set no Node name in its extraConfig %s: with nodes.identity.nodeNameKey a Node is initialized only as the VM bound to its name there; the Node is not initialized",
			e.Node, e.VM.Location(), e.Key)
	}
	if e.Key != "" {
		return fmt.Sprintf("node %s reports the machine of VM %s, whose extraConfig %s names Node %q: with nodes.identity a Node is initialized only as the VM its provisioner bound to that name (its kubelet's certificate was bound to that VM); the Node is not initialized",
			e.Node, e.VM.Location(), e.Key, e.Bound)
	}
	return fmt.Sprintf("node %s reports the machine of VM %s, whose name in vCenter is %q: with nodes.identity a Node is initialized only as the VM vCenter names like it (its kubelet's certificate was bound to that VM); the Node is not initialized. If the VM was renamed, rename it back or register the Node under the VM's name",
		e.Node, e.VM.Location(), e.VM.Name)
}

// checkIdentity refuses to initialize node as vm unless vCenter binds vm
// to node's name (nodes.identity): the VM's name, or with nodeNameKey the
// Node name its provisioner set in its extraConfig. Initialized Nodes (a
// providerID) are answered as they are.
func (p *Provider) checkIdentity(node *v1.Node, vm inventory.VM) error {
	id := p.cfg.Nodes.Identity
	if !id.ApproveClientCertificates || node.Spec.ProviderID != "" {
		return nil
	}
	bound := vm.Name
	if id.NodeNameKey != "" {
		name, known := p.inv.BoundName(vm.VCenter, vm.Ref)
		if !known {
			return fmt.Errorf("node %s: whether VM %s is bound to it (extraConfig %s) cannot be told yet: its vCenter's inventory is not current or does not hold the VM; the framework retries", node.Name, vm.Location(), id.NodeNameKey)
		}
		bound = name
		if bound != "" && strings.EqualFold(bound, node.Name) {
			// A name binds one VM: clones copy extraConfig.
			vms, err := p.inv.BoundTo(node.Name)
			if err != nil {
				return fmt.Errorf("node %s: which VMs are bound to it (extraConfig %s) cannot be told yet: %w", node.Name, id.NodeNameKey, err)
			}
			if len(vms) == 1 && vms[0].Ref == vm.Ref && vms[0].VCenter == vm.VCenter {
				return nil
			}
			p.opts.Metrics.identityMismatch()
			return &IdentityMismatchError{Node: node.Name, VM: vm, Key: id.NodeNameKey, Bound: bound, Others: len(vms)}
		}
	} else if strings.EqualFold(bound, node.Name) {
		return nil
	}
	p.opts.Metrics.identityMismatch()
	return &IdentityMismatchError{Node: node.Name, VM: vm, Key: id.NodeNameKey, Bound: bound}
}

// BoundTo lists every VM, in every vCenter, whose provisioner named node
// in the extraConfig key nodes.identity.nodeNameKey, from the inventories
// alone. An error means the list may be incomplete.
func (p *Provider) BoundTo(node string) ([]inventory.KeyOwner, error) {
	if !p.ready() {
		return nil, p.notReady()
	}
	return p.inv.BoundTo(node)
}

// KeyOwners lists every VM, in every vCenter, whose guest publishes
// fingerprint as its kubelet's client key (nodes.identity), from the
// inventories alone. An error means the list may be incomplete.
func (p *Provider) KeyOwners(fingerprint string) ([]inventory.KeyOwner, error) {
	if !p.ready() {
		return nil, p.notReady()
	}
	return p.inv.KeyOwners(fingerprint)
}
