//go:build e2e

package e2e

import (
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/refwire"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestSwitchFromReference: a cluster the reference CCM initialized (its
// own binary, k8s.io/cloud-provider-vsphere v1.36.0 built from
// hack/refnode's module) on VMs with several NICs, IPv6, a VIP and static
// addresses in guestinfo.metadata, switched to this CCM with the same
// config: each Node is written once, with the record of its VM (nothing
// else changes), then never again over many node status passes (SWITCH_PASSES,
// default 60, every SWITCH_EVERY, default 1s: the count of ten minutes of
// 10 s passes; SWITCH_EVERY=10s runs the ten minutes); a Node registered
// after the switch gets what the reference's own code answers for it.
func TestSwitchFromReference(t *testing.T) {
	t.Parallel()
	h := setupFleet(t, vcsim.Spec{Name: "vc-a", Clusters: 2, Hosts: 2, VMs: 3}, vcsim.Spec{Name: "vc-b", Hosts: 2, VMs: 3})
	refCCM, err := refwire.Build(h.ctx, h.root, "k8s.io/cloud-provider-vsphere/cmd/vsphere-cloud-controller-manager", t.TempDir(), "reference-ccm")
	must.OK(t, err)
	refnode, err := refwire.Build(h.ctx, h.root, ".", t.TempDir(), "refnode")
	must.OK(t, err)
	vms := h.fleet.VMs()
	for i, vm := range vms {
		productionGuest(t, h, vm, i)
	}
	// The reference's own schema, inline credentials, dual-stack, two CIDRs.
	var cfg strings.Builder
	cfg.WriteString("global:\n  port: 443\nlabels:\n  zone: k8s-zone\n  region: k8s-region\nnodes:\n" +
		"  internalNetworkSubnetCidr: \"10.30.0.0/16,fd00:30::/64\"\nvcenter:\n")
	for _, v := range h.fleet.VCenters {
		fmt.Fprintf(&cfg, "  %s:\n    server: %s\n    port: %d\n    caFile: %s\n    user: %s\n    password: %s\n    datacenters: [dc-1]\n    ipFamily: [ipv4, ipv6]\n",
			v.Name, v.Host, v.Port, v.CAFile, v.User, v.Password)
	}
	must.OK(t, os.WriteFile(h.cfgPath, []byte(cfg.String()), 0o600))

	before, late := vms[:len(vms)-1], vms[len(vms)-1]
	for _, vm := range before {
		h.register(t, vm, false)
	}
	// The reference refuses two IP families without its feature gate.
	ref, err := ccmproc.StartEnv(h.cp, refCCM, h.cfgPath, filepath.Join(h.work, "reference.log"),
		ccmproc.Flags("--cloud-provider=vsphere", "--node-status-update-frequency=1s"), []string{"ENABLE_ALPHA_DUAL_STACK=true"})
	must.OK(t, err)
	t.Cleanup(ref.Stop)
	initializedByRef := func(n *v1.Node) bool { return n.Spec.ProviderID != "" && !hasTaint(n, controlplane.UninitializedTaint) }
	if err := controlplane.WaitForNodes(h.ctx, h.kube, len(before), 2*time.Minute, initializedByRef); err != nil {
		t.Fatalf("the reference did not initialize the Nodes: %v\n%s", err, tailString(ref.LogText(), 4000))
	}
	ref.Stop()
	was, err := h.kube.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
	must.OK(t, err)
	for _, n := range was.Items {
		if len(n.Status.Addresses) < 3 {
			t.Fatalf("the reference gave %s only %v", n.Name, n.Status.Addresses)
		}
	}

	passes := 60
	if s := os.Getenv("SWITCH_PASSES"); s != "" {
		passes, err = strconv.Atoi(s)
		must.OK(t, err)
	}
	every := time.Second
	if s := os.Getenv("SWITCH_EVERY"); s != "" {
		every, err = time.ParseDuration(s)
		must.OK(t, err)
	}
	c := h.startCCM("--node-status-update-frequency=" + every.String())
	must.OK(t, c.WaitHealthy(h.ctx))
	// One write per Node: the record of its VM (provider.LabelVCenter,
	// provider.LabelVM), the reference vCenter is asked about before the
	// Node is deleted; nothing else of the reference's Node changes.
	var recorded *v1.NodeList
	poll.NoError(t, "every Node records its VM", time.Minute, func() error {
		recorded, err = h.kube.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range recorded.Items {
			if recorded.Items[i].Labels[provider.LabelVM] == "" {
				return fmt.Errorf("%s: no %s: %w", recorded.Items[i].Name, provider.LabelVM, errNotYet)
			}
		}
		return nil
	})
	for i := range recorded.Items {
		n, o := &recorded.Items[i], &was.Items[i]
		vm := before[slices.IndexFunc(before, func(vm vcsim.VM) bool { return vm.Name == n.Name })]
		want := maps.Clone(o.Labels)
		want[provider.LabelVCenter], want[provider.LabelVM] = vm.VCenter, vm.Ref.Value
		if !maps.Equal(n.Labels, want) || fmt.Sprint(n.Status.Addresses) != fmt.Sprint(o.Status.Addresses) || fmt.Sprint(n.Spec.Taints) != fmt.Sprint(o.Spec.Taints) {
			t.Errorf("Node %s: more than its VM's record written after the switch:\n addresses %v -> %v\n labels %v -> %v\n taints %v -> %v", n.Name,
				o.Status.Addresses, n.Status.Addresses, o.Labels, n.Labels, o.Spec.Taints, n.Spec.Taints)
		}
	}
	calls := `vsphere_ccm_instance_calls_total{method="InstanceMetadata"}`
	poll.NoError(t, fmt.Sprintf("%d node status passes", passes), time.Duration(passes)*(every+4*time.Second)+time.Minute, func() error {
		if got := c.metric(t, calls); got < float64(passes*len(before)) {
			return fmt.Errorf("%.0f InstanceMetadata calls", got)
		}
		return nil
	})
	now, err := h.kube.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
	must.OK(t, err)
	for i := range now.Items {
		n, o := &now.Items[i], &recorded.Items[i]
		if n.ResourceVersion != o.ResourceVersion {
			t.Errorf("Node %s written after its VM's record:\n addresses %v -> %v\n labels %v -> %v\n taints %v -> %v", n.Name,
				o.Status.Addresses, n.Status.Addresses, o.Labels, n.Labels, o.Spec.Taints, n.Spec.Taints)
		}
	}

	// A Node registered after the switch gets the reference's answer.
	h.register(t, late, true)
	var got *v1.Node
	poll.True(t, "the late Node initialized", func() bool {
		n, err := h.node(late.Name)
		got = n
		return err == nil && initializedByRef(n) && len(n.Status.Addresses) > 0
	})
	want := askReference(t, h, refnode, got)
	if want.Metadata == nil {
		t.Fatalf("the reference's code cannot answer for %s: %s", late.Name, want.MetadataError)
	}
	if g, w := fmt.Sprint(got.Status.Addresses), fmt.Sprint(want.Metadata.Addresses); g != w {
		t.Errorf("late Node addresses %s, the reference's %s", g, w)
	}
	for label, w := range map[string]string{v1.LabelInstanceTypeStable: want.Metadata.InstanceType,
		v1.LabelTopologyZone: want.Metadata.Zone, v1.LabelTopologyRegion: want.Metadata.Region} {
		if got.Labels[label] != w {
			t.Errorf("late Node %s = %q, the reference's %q", label, got.Labels[label], w)
		}
	}
	if got.Spec.ProviderID != want.Metadata.ProviderID {
		t.Errorf("late Node providerID %s, the reference's %s", got.Spec.ProviderID, want.Metadata.ProviderID)
	}
}

// productionGuest gives the i-th VM what production guests report: a
// management NIC first, then the Kubernetes NIC with a VIP before the
// real IPv4 and IPv6 addresses (the static ones, in CAPV's cloud-init
// metadata, for every other VM), a docker0 bridge.
func productionGuest(t *testing.T, h *harness, vm vcsim.VM, i int) {
	t.Helper()
	v := h.fleet.VCenter(vm.VCenter)
	v4, v6 := fmt.Sprintf("10.30.%d.%d", i/200, 10+i%200), fmt.Sprintf("fd00:30::%x", 0x10+i)
	nics := []types.GuestNicInfo{
		{Network: "pg-mgmt", DeviceConfigId: 4000, Connected: true, IpAddress: []string{fmt.Sprintf("192.168.30.%d", 10+i)}},
		{Network: "pg-k8s", DeviceConfigId: 4001, Connected: true, IpAddress: []string{"10.30.0.5", v4, "fe80::1", v6}},
		{Network: "", DeviceConfigId: -1, Connected: true, IpAddress: []string{"172.17.0.1"}},
	}
	if i%2 == 0 {
		meta := "instance-id: " + vm.Name + "\nlocal-hostname: " + vm.Name + "\nnetwork:\n  version: 2\n  ethernets:\n    id0:\n      set-name: eth1\n" +
			"      addresses:\n      - " + v4 + "/16\n      - " + v6 + "/64\n"
		task, err := object.NewVirtualMachine(v.Admin(), vm.Ref).Reconfigure(h.ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
			&types.OptionValue{Key: "guestinfo.metadata", Value: base64.StdEncoding.EncodeToString([]byte(meta))},
			&types.OptionValue{Key: "guestinfo.metadata.encoding", Value: "base64"},
		}})
		must.OK(t, err)
		must.OK(t, task.Wait(h.ctx))
	}
	v.SetGuest(vm.Ref, vm.Name, nics)
}

// askReference asks the reference's own node code what node gets, as a
// new Node (no providerID) discovered by its systemUUID.
func askReference(t *testing.T, h *harness, bin string, node *v1.Node) refwire.Answer {
	t.Helper()
	p, err := refwire.Start(h.ctx, bin, h.cfgPath)
	must.OK(t, err)
	defer p.Close()
	n := node.DeepCopy()
	n.Spec.ProviderID = ""
	a, err := p.Ask(n, true, false)
	must.OK(t, err)
	return a
}
