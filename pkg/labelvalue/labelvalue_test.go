package labelvalue

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestOf(t *testing.T) {
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
		got := Of(tt.in)
		if got != tt.want {
			t.Errorf("Of(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("Of(%q) = %q is not a label value: %v", tt.in, got, errs)
		}
	}
	if Of(long+"a") == Of(long+"b") {
		t.Errorf("two long names that differ at the end got the same value")
	}
}

func sha8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// FuzzOf: every output is a valid label value, and sanitizing is
// idempotent.
func FuzzOf(f *testing.F) {
	for _, s := range []string{"esx-01.example.com", "Metro Stretched (A)", strings.Repeat("x", 70), "-a-", "ä"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := Of(s)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("Of(%q) = %q: %v", s, v, errs)
		}
		if again := Of(v); again != v {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, v, again)
		}
	})
}
