package inventory

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vmware/govmomi/vim25/types"
)

// KeyOwner is a VM whose guest publishes a kubelet key fingerprint.
type KeyOwner struct {
	VCenter  string
	Ref      types.ManagedObjectReference
	Name     string
	UUID     string // BIOS UUID, lower case
	Template bool
	// NodeName is the Node name the provisioner set in the VM's
	// extraConfig (Options.NodeNameProperty); "" when none, or when the
	// key is not followed.
	NodeName string
}

// String names the VM for humans: vCenter/name (moref).
func (o KeyOwner) String() string { return fmt.Sprintf("%s/%s (%s)", o.VCenter, o.Name, o.Ref.Value) }

// KeyOwners lists every VM, templates included, in every vCenter, whose
// guest publishes fingerprint in Options.KubeletKeyProperty, from the
// indexes alone: no request. The list is complete only when every index is
// current; otherwise the VMs found so far come with an IncompleteError
// naming what could not answer: another VM may publish it there.
func (inv *Inventory) KeyOwners(fingerprint string) ([]KeyOwner, error) {
	return inv.vmsWhere("kubelet key fingerprint "+fingerprint,
		func(ix *Index) error {
			if ix.keyProp == "" {
				return fmt.Errorf("vCenter %q: kubelet key fingerprints are not followed (Options.KubeletKeyProperty is empty)", ix.VCenter())
			}
			return nil
		},
		func(id *ident) bool { return id.kubeletKey != "" && strings.EqualFold(id.kubeletKey, fingerprint) })
}

// vmsWhere lists every VM, templates included, in every vCenter, for which
// match holds, from the indexes alone; follows says whether an index
// follows what match reads (an error: it cannot tell). The list is
// complete only when every index follows it and is current; otherwise the
// VMs found so far come with an IncompleteError about key.
func (inv *Inventory) vmsWhere(key string, follows func(*Index) error, match func(*ident) bool) ([]KeyOwner, error) {
	var out []KeyOwner
	var causes []error
	for _, ix := range inv.indexes {
		if err := follows(ix); err != nil {
			causes = append(causes, err)
			continue
		}
		// The status first, as in find: data read after it is at least as new.
		if ok, _, err := ix.Status(); !ok {
			causes = append(causes, err)
		}
		ix.store.read(func(d *data) {
			for _, id := range d.vms {
				if match(id) {
					out = append(out, KeyOwner{VCenter: ix.VCenter(), Name: id.name, UUID: uuidString(id.uuid), Template: id.template, NodeName: id.nodeName,
						Ref: types.ManagedObjectReference{Type: "VirtualMachine", Value: id.ref}})
				}
			}
		})
	}
	slices.SortFunc(out, func(a, b KeyOwner) int { return strings.Compare(a.String(), b.String()) })
	if len(causes) > 0 {
		return out, &IncompleteError{Key: key, Causes: causes}
	}
	return out, nil
}

// uuidString is a BIOS UUID as text, "" for none.
func uuidString(k uuidKey) string {
	if k == (uuidKey{}) {
		return ""
	}
	return k.String()
}

// BoundName is the Node name the provisioner set in the extraConfig of VM
// ref of vCenter vc (Options.NodeNameProperty), from the index alone; ""
// when the VM has none. false: the key is not followed there, the index is
// not current (the value may have changed), or it does not hold the VM:
// it cannot tell.
func (inv *Inventory) BoundName(vc string, ref types.ManagedObjectReference) (string, bool) {
	ix := inv.Index(vc)
	if ix == nil || ix.nameProp == "" {
		return "", false
	}
	if ok, _, _ := ix.Status(); !ok {
		return "", false
	}
	var name string
	var found bool
	ix.store.read(func(d *data) {
		if id, ok := d.vms[ref.Value]; ok {
			name, found = id.nodeName, true
		}
	})
	return name, found
}

// BoundTo lists every VM, templates included, in every vCenter, whose
// provisioner set node as its Node name (Options.NodeNameProperty; case
// aside), from the indexes alone. Clones copy extraConfig, so more than one
// may: a name binds one VM. The list is complete only when every index is
// current and follows the key; otherwise the VMs found so far come with
// an IncompleteError.
func (inv *Inventory) BoundTo(node string) ([]KeyOwner, error) {
	return inv.vmsWhere("Node name "+node,
		func(ix *Index) error {
			if ix.nameProp == "" {
				return fmt.Errorf("vCenter %q: Node names in extraConfig are not followed (Options.NodeNameProperty is empty)", ix.VCenter())
			}
			return nil
		},
		func(id *ident) bool { return id.nodeName != "" && strings.EqualFold(id.nodeName, node) })
}
