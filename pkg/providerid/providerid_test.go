package providerid

import (
	"errors"
	"strings"
	"testing"
)

func TestUUID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"vsphere://4211a1b2-0000-4000-8000-000000000001", "4211a1b2-0000-4000-8000-000000000001", false},
		{"vsphere://4211A1B2-0000-4000-8000-000000000001", "4211A1B2-0000-4000-8000-000000000001", false},
		{"aws:///us-east-1a/i-0123", "", true},
		{"vsphere://", "", true},
		{"vsphere://  ", "", true},
		{"", "", true},
		// The reference trims the prefix when there is one: a bare UUID is read too.
		{"4211A1B2-0000-4000-8000-000000000001", "4211A1B2-0000-4000-8000-000000000001", false},
		{" vsphere://4211a1b2-0000-4000-8000-000000000001", "", true},
		{"4211a1b2", "", true},
	} {
		got, err := UUID(tc.in)
		if got != tc.want || (err != nil) != tc.err || (err != nil && !errors.Is(err, ErrNotVSphere)) {
			t.Errorf("UUID(%q) = %q, %v", tc.in, got, err)
		}
	}
	for id, want := range map[string]bool{
		"vsphere://4211a1b2-0000-4000-8000-000000000001": true,
		"4211a1b2-0000-4000-8000-000000000001":           false,
		"vsphere://":                                     false,
		"aws:///us-east-1a/i-0123":                       false,
	} {
		if got := Owned(id); got != want {
			t.Errorf("Owned(%q) = %v, want %v", id, got, want)
		}
	}
	if got := For("4211A1B2-0000-4000-8000-000000000001"); got != "vsphere://4211a1b2-0000-4000-8000-000000000001" {
		t.Errorf("For = %q", got)
	}
}

// FuzzUUID: UUID never panics, and what For writes, UUID reads back.
func FuzzUUID(f *testing.F) {
	for _, s := range []string{"vsphere://4211a1b2-0000-4000-8000-000000000001", "vsphere://", "", "azure:///x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		uuid, err := UUID(s)
		if err == nil && (uuid == "" || !strings.HasPrefix(s, Prefix) && !isUUID(uuid)) {
			t.Fatalf("UUID(%q) = %q without error", s, uuid)
		}
		if Owned(s) && (err != nil || !strings.HasPrefix(s, Prefix)) {
			t.Fatalf("Owned(%q) without the prefix or a UUID", s)
		}
		if strings.TrimSpace(s) != "" {
			if back, err := UUID(For(s)); err != nil || back != strings.TrimSpace(strings.ToLower(s)) {
				t.Fatalf("UUID(For(%q)) = %q, %v", s, back, err)
			}
		}
	})
}
