package provider

import "testing"

func TestPlacementDriftOf(t *testing.T) {
	want := map[string]string{LabelHost: "esx-2", LabelCluster: "c1", LabelHostGroup: ""}
	n := nodeLabels{name: "n1", labels: map[string]string{LabelHost: "esx-1", LabelCluster: "c1", LabelHostGroup: "site-a"}}
	got := placementDriftOf(n, "vc-a", want)
	if len(got) != 2 || got[0].Label != LabelHost || got[0].Now != "esx-2" || got[1].Label != LabelHostGroup || got[1].Now != "" {
		t.Errorf("drift %+v, want host changed and host group removed", got)
	}
	n.uninitialized = true
	if got := placementDriftOf(n, "vc-a", want); got != nil {
		t.Errorf("an uninitialized Node drifted: %+v", got)
	}
	n = nodeLabels{name: "n1", labels: map[string]string{LabelHost: "esx-2", LabelCluster: "c1"}}
	if got := placementDriftOf(n, "vc-a", want); len(got) != 0 {
		t.Errorf("current labels drifted: %+v", got)
	}
}

// TestLabelNames: a label names a vCenter or datacenter when it is the
// name, or the name made valid; nothing else matches.
func TestLabelNames(t *testing.T) {
	tests := []struct {
		label, name string
		want        bool
	}{
		{"dc-1", "dc-1", true},
		{"Metro-DC--A", "Metro DC (A)", true},
		{"fd00--10", "fd00::10", true},
		{"Metro-DC--A", "Metro DC (B)", false},
		{"dc-1", "dc-2", false},
		{"Metro DC (A)", "Metro-DC--A", false}, // a label is never the raw form of another name
	}
	for _, tt := range tests {
		if got := labelNames(tt.label, tt.name); got != tt.want {
			t.Errorf("labelNames(%q, %q) = %v, want %v", tt.label, tt.name, got, tt.want)
		}
	}
}
