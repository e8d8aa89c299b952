package hostnames

import "testing"

func TestFits(t *testing.T) {
	for _, tc := range []struct {
		node, host string
		domains    []string
		want       bool
	}{
		{"worker-1", "worker-1", nil, true},
		{"worker-1", "WORKER-1.example.com.", nil, true},
		{"worker-1", "worker-1.example.com", []string{"example.com"}, true},
		{"worker-1", "worker-1.dc1.example.com", []string{"example.com"}, true},
		{"worker-1", "worker-1.example.org", []string{"example.com"}, false},
		{"worker-1", "worker-1.notexample.com", []string{"example.com"}, false},
		{"worker-1", "web01.example.com", nil, false},
		{"worker-1", "worker-10", nil, false},
		{"worker-1", "evil.worker-1", nil, false},
		{"worker-1", "", nil, false},
		{"worker-1.example.com", "worker-1.example.com", []string{"example.org"}, true}, // the Node's own name
	} {
		if got := Fits(tc.node, tc.host, tc.domains); got != tc.want {
			t.Errorf("Fits(%q, %q, %v) = %v, want %v", tc.node, tc.host, tc.domains, got, tc.want)
		}
	}
}
