package provider

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// Nodes labelled with a vCenter or datacenter the config no longer has
// hold every deletion back; explain says which and how many.
func TestDeletionsHeld(t *testing.T) {
	cfg, _, err := config.Parse("c.yaml", []byte("vcenter:\n  vc-a:\n    server: a.example\n    user: u\n    password: p\n    datacenters: [dc-1]\n"), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	node := func(name, vc, dc string) v1.Node {
		l := map[string]string{LabelVCenter: vc}
		if dc != "" {
			l[LabelDatacenter] = dc
		}
		return v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	got := p.deletionsHeld([]v1.Node{node("n1", "vc-a", "dc-1"), node("n2", "vc-gone", ""), node("n3", "vc-gone", "dc-1"),
		node("n4", "vc-a", "dc-9"), {ObjectMeta: metav1.ObjectMeta{Name: "bare"}}})
	if len(got) != 2 || !strings.HasPrefix(got[0], "vCenter vc-a datacenter dc-9 is not configured but 1 Node(s)") ||
		!strings.HasPrefix(got[1], "vCenter vc-gone is not configured but 2 Node(s) are labelled with it (n2 first)") {
		t.Errorf("deletionsHeld = %q", got)
	}
}
