//go:build parity

package parity

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/refwire"
)

// TestParityTags runs the reference CCM's own zone lookup (hack/refnode)
// and this CCM's on the tag layouts of csiLayouts: tags on hosts,
// clusters, resource pools, VMs, the datacenter's host folder and root
// folder, with both categories and with one. Zone and region must be the
// reference's, except where documented in docs/migration.md ("Zones from
// tags"):
//   - where the reference's answer depends on the order in which vCenter
//     lists an object's tags, ours is an error naming both values;
//   - with one category configured the reference reports no zone nor
//     region; ours reports the one configured.
func TestParityTags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ref, err := refwire.Build(ctx, filepath.Join("..", ".."), ".", t.TempDir(), "refnode")
	if err != nil {
		t.Fatal(err)
	}
	fleet, cases := tagFleet(ctx, t)
	defer fleet.Close()
	both := "labels:\n  zone: k8s-zone\n  region: k8s-region\n"
	compared, answered := 0, 0
	for _, rules := range []struct{ name, labels string }{
		{"zone-and-region", both},
		{"zone-only", "labels:\n  zone: k8s-zone\n"},
		{"region-only", "labels:\n  region: k8s-region\n"},
	} {
		t.Run(rules.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vsphere.yaml")
			must(t, fleet.WriteConfig(path, rules.labels, nil))
			refp := startReference(ctx, t, ref, path, nil)
			o := startOurs(ctx, t, path, nil)
			for _, vc := range cases {
				name := vc.vm.VCenter + "/" + vc.layout.name
				node := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vc.vm.Name},
					Spec:   v1.NodeSpec{ProviderID: "vsphere://" + vc.vm.UUID},
					Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: strings.ToUpper(vc.vm.UUID)}}}
				nc := nodeCase{name: name, node: node}
				r, got := refp.ask(nc, true), ask(ctx, o, nc)
				compared++
				switch {
				case rules.labels != both:
					// The reference: no zone nor region with one category.
					if r.Metadata == nil || r.Metadata.Zone != "" || r.Metadata.Region != "" {
						t.Errorf("%s: the reference answers %+v (%s), want no zone nor region", name, r.Metadata, r.MetadataError)
					}
				case len(vc.layout.ambiguous) > 0:
					if r.Metadata == nil || !contains(vc.layout.ambiguous, r.Metadata.Zone) {
						t.Errorf("%s: the reference answers %+v (%s), want a zone of %q", name, r.Metadata, r.MetadataError, vc.layout.ambiguous)
					}
					if got.Metadata != nil || !strings.Contains(got.MetadataError, "depending on the order") {
						t.Errorf("%s: ours answers %+v (%s), want the ambiguity named", name, got.Metadata, got.MetadataError)
					}
				case r.Metadata == nil:
					if got.Metadata != nil {
						t.Errorf("%s: ours answers zone %q region %q, the reference fails: %s", name, got.Metadata.Zone, got.Metadata.Region, r.MetadataError)
					}
				case got.Metadata == nil:
					t.Errorf("%s: ours fails (%s), the reference answers zone %q region %q", name, got.MetadataError, r.Metadata.Zone, r.Metadata.Region)
				default:
					answered++
					if got.Metadata.Zone != r.Metadata.Zone || got.Metadata.Region != r.Metadata.Region {
						t.Errorf("%s: ours zone %q region %q, the reference zone %q region %q", name, got.Metadata.Zone, got.Metadata.Region, r.Metadata.Zone, r.Metadata.Region)
					}
				}
			}
		})
	}
	if answered < 8 {
		t.Errorf("only %d layouts answered by both with both categories: the comparison is mostly of errors", answered)
	}
	t.Logf("%d layouts x 3 rule sets: %d answers of the reference compared, %d with a zone and region from both", len(cases), compared, answered)
}
