package nodetopology_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/events"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestTopologyDrift, against simulated vCenters with the real provider and
// the controller on a fake API: an initialized Node whose VM moves to
// another zone keeps its labels by default, with a TopologyDrift event and
// the gauge at 1 until the VM is back; with labels.onDrift: relabel, its
// labels follow the VM, with one TopologyRelabelled event. Nothing calls
// InstanceMetadata: the move is seen through the inventory's change
// notification, and the resync is an hour.
func TestTopologyDrift(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1"}, Clusters: 2, Hosts: 2, VMs: 2})
	must.OK(t, err)
	defer f.Close()
	a := f.VCenter("vc-a")
	must.OK(t, f.TagZones(ctx))
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
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			head := "labels:\n  zone: k8s-zone\n  region: k8s-region\n  onDrift: " + string(policy) + "\n"
			cfg, _, err := config.Parse("d.yaml", []byte(f.Config("global:\n  connectTimeout: 5s\n"+head, nil)), config.Options{})
			must.OK(t, err)
			// One recorder for both, as the command builds it.
			rec := record.NewFakeRecorder(100)
			ev := nodeevents.New(nil)
			ev.SetSink(rec)
			m := nodetopology.NewMetrics()
			reg := metrics.NewKubeRegistry()
			for _, c := range slices.Concat(m.Collectors(), ev.Collectors()) {
				reg.MustRegister(c)
			}
			p, err := provider.New(cfg, provider.Options{Events: ev, VCenter: vcenter.Options{RetryMin: 50 * time.Millisecond}})
			must.OK(t, err)
			// The Node as the framework leaves it after initialization.
			n := &v1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Labels: map[string]string{
					v1.LabelTopologyZone: "zone-" + vm.Cluster, v1.LabelTopologyRegion: "region-dc-1",
					v1.LabelFailureDomainBetaZone: "zone-" + vm.Cluster, v1.LabelFailureDomainBetaRegion: "region-dc-1"}},
				Spec: v1.NodeSpec{ProviderID: "vsphere://" + vm.UUID},
			}
			kube := fake.NewClientset(n.DeepCopy())
			must.OK(t, p.Start(ctx, kube))
			defer p.Close()
			must.OK(t, p.WaitForSync(ctx))
			factory := informers.NewSharedInformerFactory(kube, 0)
			c, err := nodetopology.New(kube, factory.Core().V1().Nodes(), p, nodetopology.Options{Resync: time.Hour, Events: ev, Metrics: m, VCenters: []string{"vc-a"}})
			must.OK(t, err)
			factory.Start(ctx.Done())
			done := make(chan struct{})
			go func() { c.Run(ctx, 1); close(done) }()
			defer func() { cancel(); <-done; factory.Shutdown() }()
			gauge := func(want string) error {
				return testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vsphere_ccm_nodes_topology_drifted [ALPHA] Initialized Nodes whose zone or region label no longer matches their VM (moved, retagged, regrouped), by the VM's vCenter.
# TYPE vsphere_ccm_nodes_topology_drifted gauge
vsphere_ccm_nodes_topology_drifted{vcenter="vc-a"} `+want+`
`), "vsphere_ccm_nodes_topology_drifted")
			}
			poll.True(t, "the gauge at 0 before the move", func() bool { return gauge("0") == nil })
			must.OK(t, a.Relocate(ctx, vm.Ref, other[0].HostRef))
			var seen []string
			switch policy {
			case config.DriftKeep:
				poll.True(t, "a TopologyDrift event", func() bool {
					seen = append(seen, events.Drain(rec)...)
					return events.Has(seen, "Warning TopologyDrift")
				})
				if !events.Has(seen, "Warning TopologyDrift", `"zone-vc-a-dc-1-c0"`, `"zone-vc-a-dc-1-c1"`, other[0].Host, "labels.onDrift") {
					t.Errorf("no TopologyDrift event naming both zones and the host; events: %q", seen)
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
				got, err := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
				must.OK(t, err)
				if z := got.Labels[v1.LabelTopologyZone]; z != "zone-vc-a-dc-1-c0" {
					t.Errorf("label changed to %q with onDrift: keep", z)
				}
				if ex := p.Explain(ctx, provider.ExplainOptions{Nodes: []v1.Node{*got}}); len(ex.Drifted) != 1 || !strings.Contains(ex.Drifted[0], n.Name) {
					t.Errorf("explain drifted = %q", ex.Drifted)
				}
				// Back home: no drift.
				must.OK(t, a.Relocate(ctx, vm.Ref, vm.HostRef))
				poll.True(t, "the drift to end", func() bool { return gauge("0") == nil })
			case config.DriftRelabel:
				poll.True(t, "the labels to follow the VM", func() bool {
					got, err := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
					return err == nil && got.Labels[v1.LabelTopologyZone] == "zone-vc-a-dc-1-c1" && got.Labels[v1.LabelFailureDomainBetaZone] == "zone-vc-a-dc-1-c1"
				})
				got, err := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
				must.OK(t, err)
				if got.Labels[v1.LabelFailureDomainBetaRegion] != "region-dc-1" {
					t.Errorf("beta region %q changed", got.Labels[v1.LabelFailureDomainBetaRegion])
				}
				// The relabelled Node comes back through the informer and
				// is observed again: no drift, no second event.
				poll.True(t, "the relabelled Node observed", func() bool {
					seen = append(seen, events.Drain(rec)...)
					return events.Has(seen, "Normal TopologyRelabelled") && gauge("0") == nil
				})
				if !events.Has(seen, "Normal TopologyRelabelled", `"zone-vc-a-dc-1-c0"`, `"zone-vc-a-dc-1-c1"`) {
					t.Errorf("no TopologyRelabelled event; events: %q", seen)
				}
				must.OK(t, a.Relocate(ctx, vm.Ref, vm.HostRef))
			}
		})
	}
}
