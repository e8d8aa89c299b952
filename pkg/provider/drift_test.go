package provider_test

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// events drains what the fake recorder holds.
func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, prefix string, words ...string) bool {
	for _, e := range events {
		if !strings.HasPrefix(e, prefix) {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(e, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestTopologyDrift: an initialized Node whose VM moves to another zone
// keeps its labels by default, with a TopologyDrift event and the gauge
// at 1 until the VM is back; with labels.onDrift: relabel, its labels
// follow the VM, with a TopologyRelabelled event.
func TestTopologyDrift(t *testing.T) {
	e := stretched(t, "", nil)
	a := e.fleet.VCenter("vc-a")
	var vm vcsim.VM
	var other []vcsim.VM
	for _, v := range a.VMs {
		switch {
		case v.Cluster == "vc-a-dc-1-c0" && vm.Name == "":
			vm = v
		case v.Cluster == "vc-a-dc-1-c1":
			other = append(other, v)
		}
	}
	for _, policy := range []config.DriftPolicy{config.DriftKeep, config.DriftRelabel} {
		t.Run(string(policy), func(t *testing.T) {
			head := "labels:\n  zone: k8s-zone\n  region: k8s-region\n  onDrift: " + string(policy) + "\n"
			cfg, _, err := config.Parse("d.yaml", []byte(e.fleet.Config("global:\n  connectTimeout: 5s\n"+head, nil)), config.Options{})
			must(t, err)
			rec := record.NewFakeRecorder(100)
			m := provider.NewMetrics()
			reg := metrics.NewKubeRegistry()
			for _, c := range m.Collectors() {
				reg.MustRegister(c)
			}
			p, err := provider.New(cfg, provider.Options{Recorder: rec, Metrics: m, VCenter: vcenter.Options{RetryMin: 50 * time.Millisecond}})
			must(t, err)
			// The Node as the framework leaves it after initialization.
			n := node(vm)
			n.Spec.ProviderID = "vsphere://" + vm.UUID
			n.Labels = map[string]string{v1.LabelTopologyZone: "zone-" + vm.Cluster, v1.LabelTopologyRegion: "region-vc-a-dc-1",
				v1.LabelFailureDomainBetaZone: "zone-" + vm.Cluster, v1.LabelFailureDomainBetaRegion: "region-vc-a-dc-1"}
			kube := fake.NewClientset(n.DeepCopy())
			must(t, p.Start(e.ctx, kube))
			defer p.Close()
			must(t, p.WaitForSync(e.ctx))
			gauge := func(want string) error {
				m.Refresh(p)
				return testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vsphere_ccm_nodes_topology_drifted [ALPHA] Initialized Nodes whose zone or region label no longer matches their VM (moved, retagged, regrouped), by the VM's vCenter.
# TYPE vsphere_ccm_nodes_topology_drifted gauge
vsphere_ccm_nodes_topology_drifted{vcenter="vc-a"} `+want+`
vsphere_ccm_nodes_topology_drifted{vcenter="vc-b"} 0
vsphere_ccm_nodes_topology_drifted{vcenter="vc-c"} 0
`), "vsphere_ccm_nodes_topology_drifted")
			}
			if _, err := p.InstanceMetadata(e.ctx, n); err != nil {
				t.Fatal(err)
			}
			if err := gauge("0"); err != nil {
				t.Errorf("before the move: %v", err)
			}
			must(t, a.Relocate(e.ctx, vm.Ref, other[0].HostRef))
			var events []string
			poll.True(t, "the VM in its new zone", func() bool {
				md, err := p.InstanceMetadata(e.ctx, n)
				events = append(events, drain(rec)...)
				return err == nil && md.Zone == "zone-vc-a-dc-1-c1"
			})
			got, err := kube.CoreV1().Nodes().Get(e.ctx, n.Name, metav1.GetOptions{})
			must(t, err)
			switch policy {
			case config.DriftKeep:
				if !hasEvent(events, "Warning TopologyDrift", `"zone-vc-a-dc-1-c0"`, `"zone-vc-a-dc-1-c1"`, other[0].Host, "labels.onDrift") {
					t.Errorf("no TopologyDrift event naming both zones and the host; events: %q", events)
				}
				if err := gauge("1"); err != nil {
					t.Error(err)
				}
				if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vsphere_ccm_node_events_total [ALPHA] Events recorded on Nodes by type (Warning, Normal) and reason (VMNotFound, TopologyDrift, ...), repeats within 10 minutes not counted.
# TYPE vsphere_ccm_node_events_total counter
vsphere_ccm_node_events_total{reason="TopologyDrift",type="Warning"} 1
`), "vsphere_ccm_node_events_total"); err != nil {
					t.Error(err)
				}
				if z := got.Labels[v1.LabelTopologyZone]; z != "zone-vc-a-dc-1-c0" {
					t.Errorf("label changed to %q with onDrift: keep", z)
				}
				if ex := p.Explain(e.ctx, provider.ExplainOptions{}); len(ex.Drifted) != 1 || !strings.Contains(ex.Drifted[0], n.Name) {
					t.Errorf("explain drifted = %q", ex.Drifted)
				}
				// Back home: no drift.
				must(t, a.Relocate(e.ctx, vm.Ref, vm.HostRef))
				poll.True(t, "the drift to end", func() bool {
					_, err := p.InstanceMetadata(e.ctx, n)
					return err == nil && gauge("0") == nil
				})
			case config.DriftRelabel:
				for _, l := range []string{v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone} {
					if z := got.Labels[l]; z != "zone-vc-a-dc-1-c1" {
						t.Errorf("%s = %q, want the VM's new zone with onDrift: relabel (GA and beta together)", l, z)
					}
				}
				if got.Labels[v1.LabelFailureDomainBetaRegion] != "region-vc-a-dc-1" {
					t.Errorf("beta region %q changed", got.Labels[v1.LabelFailureDomainBetaRegion])
				}
				if !hasEvent(events, "Normal TopologyRelabelled", `"zone-vc-a-dc-1-c0"`, `"zone-vc-a-dc-1-c1"`) {
					t.Errorf("no TopologyRelabelled event; events: %q", events)
				}
				var relabelled int
				for _, ev := range events {
					if strings.HasPrefix(ev, "Normal TopologyRelabelled") {
						relabelled++
					}
				}
				if relabelled != 1 {
					t.Errorf("%d TopologyRelabelled events, want 1: %q", relabelled, events)
				}
				if err := gauge("0"); err != nil {
					t.Error(err)
				}
				must(t, a.Relocate(e.ctx, vm.Ref, vm.HostRef))
			}
		})
	}
}
