package provider

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
)

func TestDriftOf(t *testing.T) {
	res := topology.Result{Zone: &topology.Value{Value: "zone-b", From: "tag k8s-zone:zone-b on cluster c1"}, Region: &topology.Value{Value: "r1"}}
	node := func(labels map[string]string, taints ...v1.Taint) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}, Spec: v1.NodeSpec{Taints: taints}}
	}
	for _, tc := range []struct {
		name string
		node *v1.Node
		want []string // labels that drifted
	}{
		{"same", node(map[string]string{v1.LabelTopologyZone: "zone-b", v1.LabelTopologyRegion: "r1"}), nil},
		{"zone moved", node(map[string]string{v1.LabelTopologyZone: "zone-a", v1.LabelTopologyRegion: "r1"}), []string{v1.LabelTopologyZone}},
		{"both moved", node(map[string]string{v1.LabelTopologyZone: "zone-a", v1.LabelTopologyRegion: "r0"}), []string{v1.LabelTopologyZone, v1.LabelTopologyRegion}},
		{"no labels", node(nil), nil},
		{"GA and beta moved: one drift, on GA", node(map[string]string{v1.LabelTopologyZone: "zone-a", v1.LabelFailureDomainBetaZone: "zone-a", v1.LabelTopologyRegion: "r1"}),
			[]string{v1.LabelTopologyZone}},
		{"only beta differs", node(map[string]string{v1.LabelTopologyZone: "zone-b", v1.LabelFailureDomainBetaZone: "zone-a", v1.LabelTopologyRegion: "r1", v1.LabelFailureDomainBetaRegion: "r0"}),
			[]string{v1.LabelFailureDomainBetaZone, v1.LabelFailureDomainBetaRegion}},
		{"not initialized (kubelet's label)", node(map[string]string{v1.LabelTopologyZone: "zone-a"},
			v1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: v1.TaintEffectNoSchedule}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := driftOf(tc.node, "vc-a", "esx1", res)
			var labels []string
			for _, d := range got {
				labels = append(labels, d.Label)
				now := map[string]string{v1.LabelTopologyZone: "zone-b", v1.LabelTopologyRegion: "r1",
					v1.LabelFailureDomainBetaZone: "zone-b", v1.LabelFailureDomainBetaRegion: "r1"}[d.Label]
				if d.Node != "n1" || d.VCenter != "vc-a" || d.Host != "esx1" || d.Labelled != tc.node.Labels[d.Label] || d.Now != now {
					t.Errorf("drift %+v", d)
				}
			}
			if len(labels) != len(tc.want) {
				t.Fatalf("drifted %v, want %v", labels, tc.want)
			}
			for i := range labels {
				if labels[i] != tc.want[i] {
					t.Errorf("drifted %v, want %v", labels, tc.want)
				}
			}
		})
	}
}
