package nodetopology

import (
	"context"
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// TestRelabelPatchesPairs: a drifted zone or region is patched on its GA
// and its beta label together; other labels are kept.
func TestRelabelPatchesPairs(t *testing.T) {
	old := map[string]string{
		v1.LabelTopologyZone: "a", v1.LabelFailureDomainBetaZone: "a",
		v1.LabelTopologyRegion: "r1", v1.LabelFailureDomainBetaRegion: "r1", "team": "x"}
	tests := []struct {
		name  string
		drift []provider.Drift
		want  map[string]string
	}{
		{"zone on the GA label", []provider.Drift{{Node: "n", Label: v1.LabelTopologyZone, Now: "b"}},
			map[string]string{v1.LabelTopologyZone: "b", v1.LabelFailureDomainBetaZone: "b"}},
		{"zone on the beta label only", []provider.Drift{{Node: "n", Label: v1.LabelFailureDomainBetaZone, Now: "b"}},
			map[string]string{v1.LabelTopologyZone: "b", v1.LabelFailureDomainBetaZone: "b"}},
		{"zone and region", []provider.Drift{{Node: "n", Label: v1.LabelTopologyZone, Now: "b"}, {Node: "n", Label: v1.LabelTopologyRegion, Now: "r2"}},
			map[string]string{v1.LabelTopologyZone: "b", v1.LabelFailureDomainBetaZone: "b", v1.LabelTopologyRegion: "r2", v1.LabelFailureDomainBetaRegion: "r2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: maps.Clone(old)}})
			if err := Relabel(context.Background(), kube, tt.drift); err != nil {
				t.Fatal(err)
			}
			n, err := kube.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := maps.Clone(old)
			maps.Copy(want, tt.want)
			if !maps.Equal(n.Labels, want) {
				t.Errorf("labels %v, want %v", n.Labels, want)
			}
		})
	}
}
