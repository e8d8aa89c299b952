//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// stretchedCluster is vc-a's first cluster, stretched over two sites of
// one host each: VM 0 is in site a's VM group, VM 1 in site b's, VM 2
// runs on site a in no VM group.
type stretchedCluster struct {
	cluster      string
	clusterRef   types.ManagedObjectReference
	hostA, hostB types.ManagedObjectReference
	inA, inB     vcsim.VM
	loose        vcsim.VM
}

func setupStretched(t *testing.T) (*harness, stretchedCluster) {
	t.Helper()
	h := setupFleet(t,
		vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1"}, Clusters: 1, Hosts: 2, VMs: 3},
		vcsim.Spec{Name: "vc-b", Datacenters: []string{"dc-2"}, Hosts: 1, VMs: 1})
	a := h.fleet.VCenter("vc-a")
	var s stretchedCluster
	s.clusterRef, s.cluster = a.VMs[0].ClusterRef, a.VMs[0].Cluster
	hosts := a.ClusterHosts(s.clusterRef)
	s.hostA, s.hostB = hosts[0], hosts[1]
	s.inA, s.inB, s.loose = a.VMs[0], a.VMs[1], a.VMs[2]
	must.OK(t, a.Relocate(h.ctx, s.inA.Ref, s.hostA))
	must.OK(t, a.Relocate(h.ctx, s.inB.Ref, s.hostB))
	must.OK(t, a.Relocate(h.ctx, s.loose.Ref, s.hostA))
	must.OK(t, a.Stretch(h.ctx, s.clusterRef,
		vcsim.Site{Name: "site-a", Hosts: []types.ManagedObjectReference{s.hostA}, VMs: []types.ManagedObjectReference{s.inA.Ref}},
		vcsim.Site{Name: "site-b", Hosts: []types.ManagedObjectReference{s.hostB}, VMs: []types.ManagedObjectReference{s.inB.Ref}}))
	h.configTail = fmt.Sprintf("hostGroupZones:\n- cluster: %s\n  hostGroups:\n    site-a-hosts: zone-a\n    site-b-hosts: zone-b\n  region: stretched\n", s.cluster)
	h.writeConfig(nil)
	return h, s
}

// waitLabels waits until the Node of vm has the given zone and region.
func (h *harness) waitLabels(t *testing.T, vm vcsim.VM, zone, region string) {
	t.Helper()
	poll.NoError(t, "node "+vm.Name+" in "+zone, 60*time.Second, func() error {
		n, err := h.node(vm.Name)
		if err != nil {
			return err
		}
		if hasTaint(n, uninitializedTaint) {
			return errors.New("not initialized")
		}
		if n.Labels[zoneLabel] != zone || n.Labels[regionLabel] != region {
			return fmt.Errorf("zone %q region %q", n.Labels[zoneLabel], n.Labels[regionLabel])
		}
		return nil
	})
}

// TestStretchedClusterHostGroups: with the real API server, Nodes of a
// stretched cluster get the zone of their site's host group and the
// entry's region (not the cluster's zone tag); the VM in no VM group gets
// its host's zone and a NoIntendedZone event; an HA restart on the other
// site keeps the Node's zone with an OutsideIntendedZone event; a VM moved
// to the other site's VM group makes its Node drift (TopologyDrift, gauge)
// and keeps its label; Nodes of other vCenters keep their tags.
func TestStretchedClusterHostGroups(t *testing.T) {
	t.Parallel()
	h, s := setupStretched(t)
	a := h.fleet.VCenter("vc-a")
	c := h.startCCM()
	h.registerAll(t)
	h.waitLabels(t, s.inA, "zone-a", "stretched")
	h.waitLabels(t, s.inB, "zone-b", "stretched")
	h.waitLabels(t, s.loose, "zone-a", "stretched")
	other := h.fleet.VCenter("vc-b").VMs[0]
	h.waitInitialized(t, other)
	h.waitEvent(t, s.loose.Name, topology.ReasonNoIntendedZone, "in no VM group", `"zone-a"`)

	// HA restarts site a's VM on site b: it keeps its intended zone.
	must.OK(t, a.Relocate(h.ctx, s.inA.Ref, s.hostB))
	h.waitEvent(t, s.inA.Name, topology.ReasonOutsideIntendedZone, `runs in zone "zone-b"`, `outside its intended zone "zone-a"`)
	if n, err := h.node(s.inA.Name); err != nil || n.Labels[zoneLabel] != "zone-a" {
		t.Errorf("after the HA restart: %v, zone %q; want zone-a kept", err, n.Labels[zoneLabel])
	}

	// Site b's VM is moved to site a's VM group: its intended zone is now
	// zone-a, its label says zone-b.
	must.OK(t, a.SetGroups(h.ctx, s.clusterRef, []types.BaseClusterGroupInfo{
		&types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "site-a-vms"}, Vm: []types.ManagedObjectReference{s.inA.Ref, s.inB.Ref}},
		&types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "site-b-vms"}},
	}, nil))
	h.waitEvent(t, s.inB.Name, nodetopology.ReasonTopologyDrift, `topology.kubernetes.io/zone is "zone-b"`, `now resolves to "zone-a"`, "labels.onDrift")
	poll.True(t, "the drift gauge", func() bool {
		return c.metric(t, `vsphere_ccm_nodes_topology_drifted{vcenter="vc-a"}`) == 1
	})
	if n, err := h.node(s.inB.Name); err != nil || n.Labels[zoneLabel] != "zone-b" {
		t.Errorf("after the drift: %v, zone %q; want zone-b kept (onDrift: keep)", err, n.Labels[zoneLabel])
	}

	// topology explain --csi: vSphere CSI sees the cluster's zone tag, not
	// the host groups; the drift and the misplaced VM are reported.
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(h.ctx, h.binary, "topology", "explain", "--cloud-config", h.cfgPath,
		"--kubeconfig", h.cp.Kubeconfig, "--csi", "-o", "json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("topology explain --csi: %v (want exit status 3: problems found)\n%s", err, stderr.String())
	}
	var ex provider.Explanation
	must.OK(t, json.Unmarshal(stdout.Bytes(), &ex))
	joined := func(l []string) string { return strings.Join(l, "\n") }
	for _, want := range []struct {
		list []string
		text string
	}{
		{ex.CSIDifferences, fmt.Sprintf(`zone: the CCM sets "zone-a" (VM group site-a-vms`)},
		{ex.CSIDifferences, fmt.Sprintf(`vSphere CSI finds "zone-%s"`, s.cluster)},
		{ex.Drifted, fmt.Sprintf(`node %s: topology.kubernetes.io/zone is "zone-b"`, s.inB.Name)},
		{ex.Misplaced, s.inA.Name},
	} {
		if !strings.Contains(joined(want.list), want.text) {
			t.Errorf("explain does not say %q in:\n%s", want.text, joined(want.list))
		}
	}
	for _, pl := range ex.Placements {
		if pl.VM == other.Name && (pl.CSI == nil || len(pl.CSI.Differences) != 0) {
			t.Errorf("%s (cluster tags): CSI view %+v, want no difference", pl.VM, pl.CSI)
		}
	}
}

// TestRelabelSticks: with labels.onDrift: relabel, a Node whose VM's
// intended zone changed is relabelled, GA and beta labels together, with
// one event; the framework's node controller (which copies a beta label
// over its GA one) then leaves the labels alone over three status passes.
func TestRelabelSticks(t *testing.T) {
	t.Parallel()
	h, s := setupStretched(t)
	h.labelsTail = "  onDrift: relabel\n"
	h.writeConfig(nil)
	a := h.fleet.VCenter("vc-a")
	c := h.startCCM("--node-status-update-frequency=2s")
	h.registerAll(t)
	h.waitLabels(t, s.inB, "zone-b", "stretched")
	nodes := len(h.fleet.VMs())

	// Site b's VM is moved to site a's VM group: its intended zone is zone-a.
	must.OK(t, a.SetGroups(h.ctx, s.clusterRef, []types.BaseClusterGroupInfo{
		&types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "site-a-vms"}, Vm: []types.ManagedObjectReference{s.inA.Ref, s.inB.Ref}},
		&types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "site-b-vms"}},
	}, nil))
	poll.NoError(t, "GA and beta zone relabelled", 60*time.Second, func() error {
		n, err := h.node(s.inB.Name)
		if err != nil {
			return err
		}
		if n.Labels[zoneLabel] != "zone-a" || n.Labels[v1.LabelFailureDomainBetaZone] != "zone-a" {
			return fmt.Errorf("zone %q, beta zone %q", n.Labels[zoneLabel], n.Labels[v1.LabelFailureDomainBetaZone])
		}
		return nil
	})
	n, err := h.node(s.inB.Name)
	must.OK(t, err)
	// Every change of the Node from here on.
	w, err := h.kube.CoreV1().Nodes().Watch(h.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + n.Name, ResourceVersion: n.ResourceVersion})
	must.OK(t, err)
	defer w.Stop()

	// Three status passes: every Node's metadata asked three more times.
	calls := `vsphere_ccm_instance_calls_total{method="InstanceMetadata"}`
	base := c.metric(t, calls)
	poll.True(t, "three node status passes", func() bool { return c.metric(t, calls) >= base+float64(3*nodes) })

	n, err = h.node(s.inB.Name)
	must.OK(t, err)
	for _, l := range []string{zoneLabel, v1.LabelFailureDomainBetaZone} {
		if n.Labels[l] != "zone-a" {
			t.Errorf("after three status passes %s = %q, want zone-a (the labels flapped)", l, n.Labels[l])
		}
	}
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if m, ok := ev.Object.(*v1.Node); ok && (m.Labels[zoneLabel] != "zone-a" || m.Labels[v1.LabelFailureDomainBetaZone] != "zone-a") {
				t.Errorf("after the relabel the Node's zone labels changed: %s %q, beta %q", ev.Type, m.Labels[zoneLabel], m.Labels[v1.LabelFailureDomainBetaZone])
			}
		default:
			done = true
		}
	}
	evs, err := h.events(s.inB.Name)
	must.OK(t, err)
	var relabelled []v1.Event
	for _, ev := range evs {
		if ev.Reason == nodetopology.ReasonTopologyRelabelled {
			relabelled = append(relabelled, ev)
		}
	}
	if len(relabelled) != 1 || relabelled[0].Count > 1 || !strings.Contains(relabelled[0].Message, `"zone-b" to "zone-a"`) {
		t.Errorf("TopologyRelabelled events: %+v, want one, once, from zone-b to zone-a", relabelled)
	}
	// The API server's audit log: the relabel (and the retry nudges of
	// Nodes that waited for their vCenter at start) are the node-topology
	// controller's; the provider, which answers the framework, wrote no Node.
	writes := h.nodeWritesBy(t)
	if writes["vsphere-cloud-controller-manager"] != 0 {
		t.Errorf("the provider wrote Nodes: %v", writes)
	}
	if writes[nodetopology.ClientName] == 0 {
		t.Errorf("Node writes by user agent: %v, want the relabel by %s", writes, nodetopology.ClientName)
	}
}

// nodeWritesBy counts the successful Node writes of the CCM's clients, by
// the client name that ends their user agent.
func (h *harness) nodeWritesBy(t *testing.T) map[string]int {
	t.Helper()
	ws, err := h.cp.NodeWrites()
	must.OK(t, err)
	out := map[string]int{}
	for _, w := range ws {
		if w.Code >= 300 || !strings.HasPrefix(w.UserAgent, "vsphere-cloud-controller-manager/") {
			continue
		}
		out[w.UserAgent[strings.LastIndex(w.UserAgent, "/")+1:]]++
	}
	return out
}

// TestTopologySeenWithoutStatusPass: at the default
// --node-status-update-frequency (5 minutes), a VM restarted on the other
// site and a DRS group change are reported within 30 s, by the
// node-topology controller, with no node status pass in between.
func TestTopologySeenWithoutStatusPass(t *testing.T) {
	// Not parallel: it waits for events within a bound: it runs alone, not beside another test's control plane.
	h, s := setupStretched(t)
	a := h.fleet.VCenter("vc-a")
	c := h.startCCM("--node-status-update-frequency=5m")
	h.registerAll(t)
	h.waitLabels(t, s.inA, "zone-a", "stretched")
	h.waitLabels(t, s.inB, "zone-b", "stretched")
	calls := `vsphere_ccm_instance_calls_total{method="InstanceMetadata"}`
	before := c.metric(t, calls)

	must.OK(t, a.Relocate(h.ctx, s.inA.Ref, s.hostB))
	h.waitEventWithin(t, 30*time.Second, s.inA.Name, topology.ReasonOutsideIntendedZone, `runs in zone "zone-b"`)

	must.OK(t, a.SetGroups(h.ctx, s.clusterRef, []types.BaseClusterGroupInfo{
		&types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "site-a-vms"}, Vm: []types.ManagedObjectReference{s.inA.Ref, s.inB.Ref}},
		&types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "site-b-vms"}},
	}, nil))
	h.waitEventWithin(t, 30*time.Second, s.inB.Name, nodetopology.ReasonTopologyDrift, `topology.kubernetes.io/zone is "zone-b"`, `now resolves to "zone-a"`)
	if after := c.metric(t, calls); after >= before+float64(len(h.fleet.VMs())) {
		t.Errorf("InstanceMetadata called %v times meanwhile: a status pass, not the controller, may have reported it", after-before)
	}
}
