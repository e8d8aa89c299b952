//go:build parity

// Package parity is the differential harness: it runs the reference CCM's
// own node code (k8s.io/cloud-provider-vsphere, built from hack/refnode, a
// module of its own) and this CCM's provider against the same simulated
// vCenters, VMs and cloud-configs, and compares every answer a Node gets:
// ordered addresses, instance type, providerID, zone and region, and the
// InstanceExists and InstanceShutdown verdicts. A difference fails the
// test unless it is one of the deliberate ones (known_test.go), which
// docs/migration.md lists; a deliberate one the corpus no longer shows
// fails it too, so the table stays in step. The same way, vSphere CSI's
// own node-topology code (hack/refcsi) is the oracle for the CCM's CSI
// view and labels.csiCompatible (csi_test.go).
//
//	make parity
package parity

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	cloudnodeutil "k8s.io/cloud-provider/node/helpers"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/refwire"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

type (
	answer   = refwire.Answer
	metadata = refwire.Metadata
	verdict  = refwire.Verdict
)

// A finding is one answer that differs.
type finding struct {
	Rules, Case, Field string
	Ref, Ours          string
}

func (f finding) String() string {
	return fmt.Sprintf("%s / %s: %s: reference %s, ours %s", f.Rules, f.Case, f.Field, f.Ref, f.Ours)
}

// A nodeCase is one Node asked about: a VM's Node as the kubelet registers
// it (no providerID), as it is once initialized (providerID set), or a
// Node of no VM.
type nodeCase struct {
	name   string
	layout string // the VM's layout, "" for none
	node   v1.Node
	skip   bool // SKIP_NODE_DELETION set
	// refAnswer is the reference's metadata before the framework's node-IP
	// filter (onNode), set when it is compared; nil: an error.
	refAnswer *metadata
}

func TestParity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ref, err := refwire.Build(ctx, filepath.Join("..", ".."), ".", t.TempDir(), "refnode")
	if err != nil {
		t.Fatal(err)
	}
	checkGuestOSTable(t, ref)

	ls := layouts()
	per := (len(ls) + 3) / 4
	fleet, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-a", Clusters: 2, Hosts: 2, VMs: per},
		vcsim.Spec{Name: "vc-b", Clusters: 2, Hosts: 2, VMs: per})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	if err := fleet.TagZones(ctx); err != nil {
		t.Fatal(err)
	}
	vms := fleet.VMs()
	var cases []nodeCase
	for i, l := range ls {
		vm := vms[i]
		if err := l.apply(ctx, fleet.VCenter(vm.VCenter), vm); err != nil {
			t.Fatal(err)
		}
		name := l.host
		if name == "" {
			name = vm.Name
		}
		systemUUID := strings.ToUpper(vm.UUID)
		if i%3 == 1 { // some kubelets report the SMBIOS byte order
			systemUUID = inventory.SwapUUID(vm.UUID)
		}
		fresh := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: systemUUID}}}
		initialized := *fresh.DeepCopy()
		initialized.Spec.ProviderID = "vsphere://" + vm.UUID
		// As this CCM leaves it: the record of its VM.
		initialized.Labels = map[string]string{provider.LabelVCenter: vm.VCenter, provider.LabelVM: vm.Ref.Value}
		cases = append(cases, nodeCase{name: l.name + "/new", layout: l.name, node: fresh},
			nodeCase{name: l.name + "/initialized", layout: l.name, node: initialized})
		if ip := l.lastIP(); ip != "" { // a kubelet with --node-ip: the guest's last address
			for _, n := range []v1.Node{*fresh.DeepCopy(), *initialized.DeepCopy()} {
				n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: ip}
				kind := "/new/node-ip"
				if n.Spec.ProviderID != "" {
					kind = "/initialized/node-ip"
				}
				cases = append(cases, nodeCase{name: l.name + kind, layout: l.name, node: n})
			}
		}
	}
	cases = append(cases, strangers(vms[0])...)

	seen := map[string]bool{} // the deliberate differences the corpus showed
	answered := 0             // Nodes both answered with metadata: the comparison is not of errors only
	nodeIPAnswered := 0       // of them, Nodes with a kubelet's node IP (the reference's choice: nothing added)
	diff := func(t *testing.T, rules string, c nodeCase, ref, got answer) int {
		c.refAnswer = ref.Metadata
		ref, got = onNode(c, ref), onNode(c, got)
		if ref.Metadata != nil && got.Metadata != nil {
			answered++
			if strings.HasSuffix(c.name, "/node-ip") {
				nodeIPAnswered++
			}
		}
		n := 0
		for _, f := range compare(rules, c.name, ref, got) {
			if k := explain(f, c, ref, got); k != "" {
				seen[k] = true
				continue
			}
			n++
			t.Errorf("undocumented difference: %s", f)
		}
		return n
	}
	for _, r := range ruleSets() {
		t.Run(r.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vsphere.yaml")
			if r.ini {
				path = filepath.Join(filepath.Dir(path), "vsphere.conf")
			}
			if err := os.WriteFile(path, []byte(r.config(fleet)), 0o600); err != nil {
				t.Fatal(err)
			}
			refp := startReference(ctx, t, ref, path, r.env)
			o := startOurs(ctx, t, path, r.env)
			n := 0
			for _, c := range cases {
				n += diff(t, r.name, c, refp.ask(c, true), ask(ctx, o, c))
			}
			t.Logf("%d Nodes compared, %d undocumented differences", len(cases), n)
		})
	}
	// Last, as the corpus changes: VMs a running CCM knew are destroyed
	// and powered off, and the orphaned VM is reconnected (so that every
	// vCenter can prove absence again).
	t.Run("after-changes", func(t *testing.T) {
		r := ruleSets()[0]
		path := filepath.Join(t.TempDir(), "vsphere.yaml")
		if err := os.WriteFile(path, []byte(r.config(fleet)), 0o600); err != nil {
			t.Fatal(err)
		}
		refp := startReference(ctx, t, ref, path, nil)
		o := startOurs(ctx, t, path, nil)
		byLayout := map[string]nodeCase{}
		for _, c := range cases {
			if strings.HasSuffix(c.name, "/initialized") {
				byLayout[c.layout] = c
				refp.ask(c, true) // registered while running, as in a live cluster
			}
		}
		changed := changeCorpus(ctx, t, fleet, vms, ls)
		for _, name := range changed.wait {
			c := byLayout[name]
			poll.True(t, "ours to see "+name+" change", func() bool { return changed.seen(ctx, o.plain, c) })
		}
		n := 0
		for _, c := range changed.cases(byLayout) {
			n += diff(t, "after-changes", c, refp.ask(c, false), ask(ctx, o, c))
		}
		t.Logf("%d Nodes compared, %d undocumented differences", len(changed.cases(byLayout)), n)
	})
	// Most layouts have addresses under most rule sets.
	// (Not counting the Nodes with a node IP: the reference fails many of
	// them by design, which node-ip-added shows.)
	plain := len(cases)
	for _, c := range cases {
		if strings.HasSuffix(c.name, "/node-ip") {
			plain--
		}
	}
	if min := len(ruleSets()) * plain / 2; answered-nodeIPAnswered < min {
		t.Errorf("only %d answers with metadata from both, want at least %d: the comparison is mostly of errors", answered-nodeIPAnswered, min)
	}
	if nodeIPAnswered == 0 {
		t.Error("no Node with a node IP answered by both: the case where nothing is added is not compared")
	}
	t.Logf("%d layouts, %d rule sets, %d Nodes answered with metadata by both (%d of them with a kubelet's node IP)",
		len(ls), len(ruleSets()), answered, nodeIPAnswered)
	checkKnown(t, seen)
}

// strangers are Nodes of no VM of the fleet, and Nodes naming a VM in
// forms the reference also reads.
func strangers(vm vcsim.VM) []nodeCase {
	bare := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare-metal-1"},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: "4c4c4544-0042-3510-8052-b4c04f333432"}}}
	destroyed := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "destroyed-vm"},
		Spec:   v1.NodeSpec{ProviderID: "vsphere://4299ffff-0000-4000-8000-0000000000aa"},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: "4299FFFF-0000-4000-8000-0000000000AA"}}}
	// Initialized by this CCM: it recorded its VM, a reference no VM has now.
	recorded := *destroyed.DeepCopy()
	recorded.Name = "destroyed-recorded-vm"
	recorded.Labels = map[string]string{provider.LabelVCenter: "vc-a", provider.LabelVM: "vm-999999"}
	bareUUID := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare-uuid-provider-id"},
		Spec: v1.NodeSpec{ProviderID: strings.ToUpper(vm.UUID)}}
	upper := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "upper-case-provider-id"},
		Spec: v1.NodeSpec{ProviderID: "vsphere://" + strings.ToUpper(vm.UUID)}}
	foreign := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other-cloud"},
		Spec: v1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}}
	return []nodeCase{
		{name: "bare-metal-no-provider-id", node: bare},
		{name: "destroyed-vm", node: destroyed},
		{name: "destroyed-vm/SKIP_NODE_DELETION", node: destroyed, skip: true},
		{name: "destroyed-recorded-vm", node: recorded},
		{name: "destroyed-recorded-vm/SKIP_NODE_DELETION", node: recorded, skip: true},
		{name: "bare-uuid-provider-id", layout: "one-nic-ipv4", node: bareUUID},
		{name: "upper-case-provider-id", layout: "one-nic-ipv4", node: upper},
		{name: "other-cloud-provider-id", node: foreign},
	}
}

// checkGuestOSTable: the instance type's guestId table is the reference's.
func checkGuestOSTable(t *testing.T, ref string) {
	out, err := exec.Command(ref, "-guest-os-go").Output()
	if err != nil {
		t.Fatalf("refnode -guest-os-go: %v", err)
	}
	ours, err := os.ReadFile(filepath.Join("..", "..", "pkg", "provider", "guestos.go"))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(ours) {
		t.Errorf("pkg/provider/guestos.go is not the reference's table: regenerate it with\n  %s -guest-os-go > pkg/provider/guestos.go", ref)
	}
}

// startReference runs the reference's node code for one config.
func startReference(ctx context.Context, t *testing.T, bin, config string, env []string) *refProc {
	t.Helper()
	p, err := refwire.Start(ctx, bin, config, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &refProc{t: t, p: p}
}

type refProc struct {
	t *testing.T
	p *refwire.Proc
}

func (r *refProc) ask(c nodeCase, register bool) answer {
	r.t.Helper()
	a, err := r.p.Ask(&c.node, register, c.skip)
	if err != nil {
		r.t.Fatal(err)
	}
	return a
}

// ours is this CCM's provider, as the controller manager builds it, with
// and without SKIP_NODE_DELETION.
type ours struct{ plain, skip *provider.Provider }

func startOurs(ctx context.Context, t *testing.T, path string, env []string) ours {
	t.Helper()
	start := func(env []string) *provider.Provider {
		cfg, _, err := config.Load(path, config.Options{Env: env})
		if err != nil {
			t.Fatalf("ours rejects %s: %v", path, err)
		}
		p, err := provider.New(cfg, provider.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		if err := p.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return ours{plain: start(env), skip: start(append(slices.Clip(env), "SKIP_NODE_DELETION=true"))}
}

func ask(ctx context.Context, o ours, c nodeCase) answer {
	p := o.plain
	if c.skip {
		p = o.skip
	}
	var a answer
	node := c.node.DeepCopy()
	md, err := p.InstanceMetadata(ctx, node)
	if err != nil {
		a.MetadataError = err.Error()
	} else {
		a.Metadata = fromMetadata(md)
	}
	ok, err := p.InstanceExists(ctx, node)
	a.Exists = verdict{Value: ok, Error: errString(err)}
	off, err := p.InstanceShutdown(ctx, node)
	a.Shutdown = verdict{Value: off, Error: errString(err)}
	return a
}

func fromMetadata(md *cloudprovider.InstanceMetadata) *metadata {
	return &metadata{ProviderID: md.ProviderID, InstanceType: md.InstanceType, Addresses: md.NodeAddresses,
		Zone: md.Zone, Region: md.Region, Labels: md.AdditionalLabels}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// onNode is a's metadata as the framework's node controller makes it the
// Node's, for a Node whose kubelet gave a node IP (--node-ip): the node IP
// must be one of the addresses, and is kept as the only one of its type
// (an error there fails the Node, as the provider's error would).
func onNode(c nodeCase, a answer) answer {
	ip, ok := c.node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]
	if !ok || a.Metadata == nil {
		return a
	}
	md := *a.Metadata
	addrs, err := cloudnodeutil.GetNodeAddressesFromNodeIP(ip, md.Addresses)
	if err != nil {
		a.Metadata, a.MetadataError = nil, "the framework: "+err.Error()
		return a
	}
	md.Addresses = addrs
	a.Metadata = &md
	return a
}

// compare lists the fields whose answers differ. Errors compare as
// errors: their text is each CCM's own.
func compare(rules, name string, ref, ours answer) []finding {
	var out []finding
	add := func(field, r, o string) {
		if r != o {
			out = append(out, finding{Rules: rules, Case: name, Field: field, Ref: r, Ours: o})
		}
	}
	if ref.Exists.String() != ours.Exists.String() {
		add("exists", ref.Exists.String()+" "+ref.Exists.Error, ours.Exists.String()+" "+ours.Exists.Error)
	}
	add("shutdown", ref.Shutdown.String(), ours.Shutdown.String())
	switch {
	case ref.Metadata == nil && ours.Metadata == nil:
	case ref.Metadata == nil:
		add("metadata", "error ("+ref.MetadataError+")", "answered")
	case ours.Metadata == nil:
		add("metadata", "answered", "error ("+ours.MetadataError+")")
	default:
		r, o := ref.Metadata, ours.Metadata
		add("providerID", r.ProviderID, o.ProviderID)
		add("instanceType", r.InstanceType, o.InstanceType)
		add("addresses", addresses(r.Addresses), addresses(o.Addresses))
		add("zone", r.Zone, o.Zone)
		add("region", r.Region, o.Region)
		add("labels", labels(r.Labels), labels(o.Labels))
	}
	return out
}

func addresses(as []v1.NodeAddress) string {
	var s []string
	for _, a := range as {
		s = append(s, string(a.Type)+"="+a.Address)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func labels(m map[string]string) string {
	var s []string
	for k, v := range m {
		s = append(s, k+"="+v)
	}
	sort.Strings(s)
	return "{" + strings.Join(s, " ") + "}"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
