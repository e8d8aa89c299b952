package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("esx-host-rack-", 6) // 84 characters
	tests := []struct{ in, want string }{
		{"esx-01.example.com", "esx-01.example.com"},
		{"Metro Stretched (A)", "Metro-Stretched--A"},
		{"site-a-hosts", "site-a-hosts"},
		{"_x_", "x"},
		{"", ""},
		{"ÄÖÜ", ""},
		{long, "esx-host-rack-esx-host-rack-esx-host-rack-esx-host-rac-" + sha8(long)},
	}
	for _, tt := range tests {
		got := LabelValue(tt.in)
		if got != tt.want {
			t.Errorf("LabelValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q is not a label value: %v", tt.in, got, errs)
		}
	}
	if LabelValue(long+"a") == LabelValue(long+"b") {
		t.Errorf("two long names that differ at the end got the same value")
	}
}

func sha8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// FuzzLabelValue: every output is a valid label value, and sanitizing is
// idempotent.
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"esx-01.example.com", "Metro Stretched (A)", strings.Repeat("x", 70), "-a-", "ä"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := LabelValue(s)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("LabelValue(%q) = %q: %v", s, v, errs)
		}
		if again := LabelValue(v); again != v {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, v, again)
		}
	})
}

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
