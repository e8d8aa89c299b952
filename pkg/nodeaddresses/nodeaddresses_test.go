package nodeaddresses

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

func list(pairs ...string) []v1.NodeAddress {
	var out []v1.NodeAddress
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, v1.NodeAddress{Type: v1.NodeAddressType(pairs[i]), Address: pairs[i+1]})
	}
	return out
}

// The framework's own behaviour, on the same inputs, is the oracle of
// pkg/controllers/nodetopology's TestAddressesAsTheFramework and
// FuzzAddressesAsTheFramework; these are the cases its code comments name.
func TestChangeDetected(t *testing.T) {
	for _, tc := range []struct {
		name          string
		current, want []v1.NodeAddress
		changed       bool
	}{
		{"the same", list("InternalIP", "10.0.0.5", "Hostname", "w1"), list("InternalIP", "10.0.0.5", "Hostname", "w1"), false},
		{"reordered", list("Hostname", "w1", "InternalIP", "10.0.0.5"), list("InternalIP", "10.0.0.5", "Hostname", "w1"), false},
		{"another address", list("InternalIP", "10.0.0.5"), list("InternalIP", "10.0.0.6"), true},
		{"one more", list("InternalIP", "10.0.0.5"), list("InternalIP", "10.0.0.5", "Hostname", "w1"), true},
		{"two of one type, the same: still a change", list("InternalIP", "10.0.0.5", "InternalIP", "fd00::5"), list("InternalIP", "10.0.0.5", "InternalIP", "fd00::5"), true},
	} {
		if got := ChangeDetected(tc.current, tc.want); got != tc.changed {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.changed)
		}
	}
}

func TestFramework(t *testing.T) {
	node := func(nodeIP string, status ...string) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Status: v1.NodeStatus{Addresses: list(status...)}}
		if nodeIP != "" {
			n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: nodeIP}
		}
		return n
	}
	for _, tc := range []struct {
		name   string
		node   *v1.Node
		cloud  []v1.NodeAddress
		want   []v1.NodeAddress
		ok     bool
		hasErr bool
	}{
		{name: "nothing given", node: node("", "Hostname", "w1")},
		{name: "the kubelet's host name kept", node: node("", "Hostname", "w1"), cloud: list("InternalIP", "10.0.0.5"),
			want: list("InternalIP", "10.0.0.5", "Hostname", "w1"), ok: true},
		{name: "the provider's host name", node: node("", "Hostname", "w1"), cloud: list("Hostname", "w1.example", "InternalIP", "10.0.0.5"),
			want: list("Hostname", "w1.example", "InternalIP", "10.0.0.5"), ok: true},
		{name: "the node IP first, the only one of its type", node: node("10.0.0.6"), cloud: list("InternalIP", "10.0.0.5", "InternalIP", "10.0.0.6"),
			want: list("InternalIP", "10.0.0.6"), ok: true},
		{name: "a node IP not given", node: node("10.0.0.7"), cloud: list("InternalIP", "10.0.0.5"), hasErr: true},
	} {
		got, ok, err := Framework(tc.node, tc.cloud)
		if ok != tc.ok || (err != nil) != tc.hasErr || len(got) != len(tc.want) {
			t.Errorf("%s: %v %v %v, want %v %v (error %v)", tc.name, got, ok, err, tc.want, tc.ok, tc.hasErr)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}
