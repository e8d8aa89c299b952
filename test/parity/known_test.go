//go:build parity

package parity

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A deliberate difference: where this CCM answers otherwise than the
// reference on purpose, because its answer is better for the operator and
// safe for a migrating cluster. Each is a row of the table in
// docs/migration.md ("Where answers differ"), by ID.
type known struct {
	id    string
	match func(f finding, c nodeCase, ref, ours answer) bool
}

var knowns = []known{
	// The reference answers InstanceExists and InstanceShutdown only for a
	// VM whose addresses it can compute (its discovery fails on a VM with
	// no IP or host name yet, rules that match nothing, a guest that
	// stopped); ours answers from the VM's identity and power state. The
	// reference's error keeps the Node; ours says it exists, and that it
	// is shut down when vCenter reports it powered off or suspended (the
	// framework then adds its shutdown taint, as for any stopped VM).
	{"verdicts-without-addresses", func(f finding, c nodeCase, ref, ours answer) bool {
		if ref.Metadata != nil || !strings.HasPrefix(f.Ref, "error") {
			return false
		}
		switch f.Field {
		case "exists": // never false: that is a deletion
			return strings.HasPrefix(f.Ours, "true")
		case "shutdown": // true only for a VM vCenter reports powered off or suspended
			return !strings.HasPrefix(f.Ours, "error")
		}
		return false
	}},
	// A kubelet's node IP (--node-ip) that the reference's rules did not
	// choose fails the Node in the framework ("failed to get node address
	// from cloud provider that matches ip"); ours adds it where the guest
	// reports it and the rules allow it as internal, and the framework
	// keeps it as the Node's InternalIP.
	//
	// Only where ours, as the framework makes it the Node's, has the node
	// IP as its only InternalIP, no ExternalIP the reference did not give
	// but the node IP, and the reference's answer in every other field.
	{"node-ip-added", func(f finding, c nodeCase, ref, ours answer) bool {
		r := c.refAnswer
		if !strings.HasSuffix(c.name, "/node-ip") || f.Field != "metadata" || r == nil || ours.Metadata == nil ||
			!strings.HasPrefix(f.Ref, "error (the framework: failed to get node address from cloud provider that matches ip") || f.Ours != "answered" {
			return false
		}
		o := ours.Metadata
		nodeIPs := strings.Split(c.node.Annotations["alpha.kubernetes.io/provided-node-ip"], ",")
		var internal []string
		for _, a := range o.Addresses {
			switch a.Type {
			case v1.NodeInternalIP:
				internal = append(internal, a.Address)
			case v1.NodeExternalIP:
				if !slices.Contains(nodeIPs, a.Address) && !slices.Contains(r.Addresses, a) {
					return false
				}
			}
		}
		// Where the reference gave one address of a node IP's family as
		// both types (no rule matched), the node IP takes both, as the
		// reference gives it first (the corpus excludes no node IP as
		// external).
		for _, ip := range nodeIPs {
			v4 := strings.Contains(ip, ".")
			of := func(as []v1.NodeAddress, t v1.NodeAddressType) (out []string) {
				for _, a := range as {
					if a.Type == t && strings.Contains(a.Address, ".") == v4 {
						out = append(out, a.Address)
					}
				}
				return out
			}
			if in := of(r.Addresses, v1.NodeInternalIP); len(in) == 1 && slices.Equal(in, of(r.Addresses, v1.NodeExternalIP)) &&
				!slices.Equal(of(o.Addresses, v1.NodeExternalIP), []string{ip}) {
				return false
			}
		}
		return slices.Equal(internal, nodeIPs) && o.ProviderID == r.ProviderID && o.InstanceType == r.InstanceType &&
			o.Zone == r.Zone && o.Region == r.Region && onlyOurLabelsAdded(r.Labels, o.Labels)
	}},
	// Ours labels every Node with its vCenter and datacenter.
	{"location-labels", func(f finding, c nodeCase, ref, ours answer) bool {
		return f.Field == "labels" && f.Ref == "{}" && onlyOurLabels(ours.Metadata.Labels)
	}},
	// A template cannot run a kubelet: ours never takes one for a Node's
	// VM (the reference does); both keep the Node.
	{"templates-are-not-nodes", func(f finding, c nodeCase, ref, ours answer) bool {
		return c.layout == "template" && strings.HasPrefix(f.Ours, "error") && !strings.HasPrefix(f.Ref, "false")
	}},
	// Another provider's Node (its providerID not ours, nor a UUID) is
	// never reported gone; the reference reports it gone and Kubernetes
	// deletes it.
	{"foreign-nodes-kept", func(f finding, c nodeCase, ref, ours answer) bool {
		return c.name == "other-cloud-provider-id" && f.Field == "exists" && strings.HasPrefix(f.Ref, "false") && strings.HasPrefix(f.Ours, "error")
	}},
	// A VM is reported gone only on vCenter's word about the VM itself
	// (ManagedObjectNotFound on the reference this CCM recorded on the
	// Node): a Node whose VM no process of this CCM ever saw carries no
	// record, and is kept until an operator deletes it. The reference
	// (after a restart: it keeps the references in memory) reports it gone.
	{"unrecorded-vm-kept", func(f finding, c nodeCase, ref, ours answer) bool {
		return strings.HasPrefix(c.name, "destroyed-vm") && f.Field == "exists" && strings.HasPrefix(f.Ref, "false") &&
			strings.Contains(ours.Exists.Error, "carries no record of its VM's reference")
	}},
	// A VM is reported gone only on proof: not while a vCenter holds VMs
	// whose identity cannot be read (orphaned, inaccessible), any of which
	// may be it. The reference deletes the Node.
	{"absence-needs-proof", func(f finding, c nodeCase, ref, ours answer) bool {
		return strings.HasPrefix(c.name, "destroyed-") && f.Field == "exists" && strings.HasPrefix(f.Ref, "false") &&
			strings.Contains(ours.Exists.Error, "identity cannot be read")
	}},
}

// onlyOurLabelsAdded reports whether ours has the reference's labels and,
// beyond them, only this CCM's location labels.
func onlyOurLabelsAdded(ref, ours map[string]string) bool {
	for k, v := range ref {
		if ours[k] != v {
			return false
		}
	}
	for k := range ours {
		if _, ok := ref[k]; !ok && !strings.HasPrefix(k, "vsphere.vsphere-ccm.io/") {
			return false
		}
	}
	return true
}

func onlyOurLabels(m map[string]string) bool {
	for k := range m {
		if !strings.HasPrefix(k, "vsphere.vsphere-ccm.io/") {
			return false
		}
	}
	return len(m) > 0
}

// explain returns the ID of the deliberate difference f is, or "". Never
// one that deletes a Node the reference keeps, or answers another
// InternalIP, instance type, zone or region.
func explain(f finding, c nodeCase, ref, ours answer) string {
	if f.Field == "exists" && strings.HasPrefix(f.Ours, "false") {
		return ""
	}
	for _, k := range knowns {
		if k.match(f, c, ref, ours) {
			return k.id
		}
	}
	return ""
}

// checkKnown fails unless the deliberate differences the corpus showed
// are exactly the rows of docs/migration.md's table.
func checkKnown(t *testing.T, seen map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(string(b), -1)
	var documented []string
	for _, r := range rows {
		documented = append(documented, r[1])
	}
	var shown []string
	for id := range seen {
		shown = append(shown, id)
	}
	sort.Strings(documented)
	sort.Strings(shown)
	if !slices.Equal(documented, shown) {
		t.Errorf("docs/migration.md lists the deliberate differences %v; the corpus shows %v (every row must be shown, every one shown documented)", documented, shown)
	}
	for _, k := range knowns {
		if !seen[k.id] {
			t.Errorf("deliberate difference %s is no longer shown by the corpus: remove it from known_test.go and docs/migration.md, or restore the case", k.id)
		}
	}
}
