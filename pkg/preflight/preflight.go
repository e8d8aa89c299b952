package preflight

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	cloudnodeutil "k8s.io/cloud-provider/node/helpers"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeaddresses"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// Impact says what a difference means for the switch.
type Impact string

const (
	// Blocking: the Node would keep a value that this CCM disagrees with,
	// or could not be matched to a VM. Resolve before switching.
	Blocking Impact = "blocking"
	// Changes: the value will change after the switch (addresses, on the
	// next status pass).
	Changes Impact = "changes"
	// Note: nothing changes on this Node, but new Nodes differ (a label
	// this CCM would add only at initialization).
	Note Impact = "note"
)

// Difference is one field of one Node that this CCM would set differently.
type Difference struct {
	Node    string `json:"node"`
	Field   string `json:"field"`
	Current string `json:"current"`
	Would   string `json:"would"`
	Impact  Impact `json:"impact"`
	// Why says what the difference means and what to do.
	Why string `json:"why"`
}

// labelPairs are the GA and beta labels of one dimension: the reference and
// the in-tree provider set both.
var labelPairs = []struct {
	field   string
	labels  []string
	would   func(*cloudprovider.InstanceMetadata) string
	impact  Impact
	whyDiff string
}{
	{"zone", []string{v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone},
		func(m *cloudprovider.InstanceMetadata) string { return m.Zone }, Blocking,
		"the Node keeps its zone label after the switch while this CCM resolves another (TopologyDrift): Pods and volumes scheduled by zone disagree. Align the zone tags (or the labels.zone category) before switching, or plan labels.onDrift: relabel"},
	{"region", []string{v1.LabelTopologyRegion, v1.LabelFailureDomainBetaRegion},
		func(m *cloudprovider.InstanceMetadata) string { return m.Region }, Blocking,
		"the Node keeps its region label after the switch while this CCM resolves another: align the region tags (or the labels.region category) before switching"},
	{"instanceType", []string{v1.LabelInstanceTypeStable, v1.LabelInstanceType},
		func(m *cloudprovider.InstanceMetadata) string { return m.InstanceType }, Note,
		"existing Nodes keep their instance type label; new Nodes get this one (node selectors and autoscalers that name instance types see both)"},
}

// Compare lists how md, what this CCM would set, differs from what node
// carries. err is the lookup's error, if the Node could not be matched.
// kept names the labels of md.AdditionalLabels that the controllers keep
// current on initialized Nodes too (labels.placement); the others are set
// only when a Node is initialized.
func Compare(node *v1.Node, md *cloudprovider.InstanceMetadata, err error, kept []string) []Difference {
	var nodeIP *provider.NodeIPError
	if errors.As(err, &nodeIP) {
		return []Difference{{Node: node.Name, Field: "addresses", Current: addresses(node.Status.Addresses), Impact: Note,
			Why: fmt.Sprintf("%v. The framework's node controller cannot set this Node's addresses with either CCM "+
				"(it requires the node IP among them): nothing changes with the switch, but the Node is not initialized, or its addresses not updated, until this is fixed", err)}}
	}
	if err != nil {
		return []Difference{{Node: node.Name, Field: "vm", Current: node.Spec.ProviderID, Impact: Blocking,
			Why: fmt.Sprintf("no VM found for this Node, so it would not be initialized or updated (it is never deleted without proof): %v", err)}}
	}
	var out []Difference
	add := func(field, current, would string, impact Impact, why string) {
		out = append(out, Difference{Node: node.Name, Field: field, Current: current, Would: would, Impact: impact, Why: why})
	}
	switch cur := node.Spec.ProviderID; {
	case provider.JoinedWithoutTaint(node):
		add("initialization", "none (no providerID, no uninitialized taint)", md.ProviderID, Note,
			"this Node joined without the node.cloudprovider.kubernetes.io/uninitialized taint (kubelet without --cloud-provider=external, or before a CCM was installed): "+
				"no CCM initializes it, before or after the switch. Start its kubelet with --cloud-provider=external and register it again, or set nodes.adoptUntainted: true, and this CCM has it initialized once its VM is found")
	case cur == "":
		// Not initialized yet: this CCM initializes it; nothing to keep.
	case !strings.EqualFold(cur, md.ProviderID):
		add("providerID", cur, md.ProviderID, Blocking,
			"spec.providerID is immutable: the Node keeps the old one, and this CCM would look it up by a UUID that is not its VM's. Find why the VM differs (a cloned or re-registered VM, another vCenter) before switching")
	case cur != md.ProviderID:
		add("providerID", cur, md.ProviderID, Note, "differs only in case: this CCM matches UUIDs without regard to case")
	}
	for _, p := range labelPairs {
		would := p.would(md)
		for _, l := range p.labels {
			cur, ok := node.Labels[l]
			switch {
			case ok && cur != would:
				add(p.field+" ("+l+")", cur, would, p.impact, p.whyDiff)
			case !ok && would != "" && node.Spec.ProviderID != "":
				add(p.field+" ("+l+")", "", would, Note, "the framework labels a Node only when it initializes it: this initialized Node stays without the label, new Nodes get it")
			}
		}
	}
	keys := slices.Sorted(maps.Keys(md.AdditionalLabels))
	for _, k := range keys {
		would := md.AdditionalLabels[k]
		cur, ok := node.Labels[k]
		switch {
		case node.Spec.ProviderID == "" || (ok && cur == would):
		case k == provider.LabelVM || k == provider.LabelVCenter:
			add("label "+k, cur, would, Changes,
				"the record of the Node's VM (its reference, in its vCenter): the node-topology controller writes it on every initialized Node once, within seconds of the switch, "+
					"and keeps it current; a VM no view or search shows is proven gone only when vCenter answers a read of this reference with ManagedObjectNotFound")
		case slices.Contains(kept, k):
			add("label "+k, cur, would, Changes,
				"a placement label (labels.placement): the node-topology controller sets it on initialized Nodes too, within seconds of the switch, and keeps it current")
		case ok:
			add("label "+k, cur, would, Note,
				"added only when a Node is initialized: this Node keeps its value, new Nodes get this one")
		default:
			add("label "+k, "", would, Note,
				"added only when a Node is initialized: this Node stays without it, new Nodes get it")
		}
	}
	// The addresses as the framework's node controller makes them the
	// Node's: with the kubelet's node IP first, the only one of its type.
	onNode := md.NodeAddresses
	if ip, ok := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]; ok {
		if filtered, err := cloudnodeutil.GetNodeAddressesFromNodeIP(ip, onNode); err == nil {
			onNode = filtered
		} else if node.Spec.ProviderID != "" {
			add("addresses", addresses(node.Status.Addresses), addresses(onNode), Note,
				fmt.Sprintf("the framework's node controller refuses these addresses with this Node's node IP annotation (%v): it does with the reference CCM too, and the Node keeps its addresses", err))
			return out
		}
	}
	if cur, would := addresses(node.Status.Addresses), addresses(onNode); node.Spec.ProviderID != "" && cur != would {
		if nodeaddresses.ChangeDetected(node.Status.Addresses, onNode) {
			add("addresses", cur, would, Changes,
				"the node controller replaces the addresses on its next status pass: check the nodes.* address rules (subnets, VM networks, ipFamily) if this is not intended")
		} else {
			add("addresses", cur, would, Note,
				"only the order differs, which the node controller does not count as a change: the Node keeps its order until another change rewrites the list in this order")
		}
	}
	return out
}

// addresses formats addresses as an ordered "Type=address" list, the
// Hostname address included: the list as the Node carries it.
func addresses(as []v1.NodeAddress) string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, string(a.Type)+"="+a.Address)
	}
	return strings.Join(out, ",")
}

// Blocks reports whether any difference blocks the switch.
func Blocks(ds []Difference) bool {
	return slices.ContainsFunc(ds, func(d Difference) bool { return d.Impact == Blocking })
}
