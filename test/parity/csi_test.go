//go:build parity

package parity

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/refwire"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// A csiLayout tags one VM's host chain (and, to show CSI ignores it, the
// VM) with zone and region tags. want is what vSphere CSI computes with
// both categories, for the reader: the test asks CSI's own code.
type csiLayout struct {
	name string
	tag  func(ctx context.Context, v *vcsim.VCenter, vm vcsim.VM) error
	// ambiguous: vSphere CSI's answer depends on the order in which
	// vCenter lists an object's tags; it must be one of these zones.
	ambiguous []string
}

// csiLayouts per vCenter (for vSphere CSI's code and the reference CCM's:
// tags_test.go). vc-a's datacenter has the region tag "r-dc";
// vc-b has no region above its clusters; vc-c has its region on the root
// folder and a zone on the datacenter's host folder.
func csiLayouts() map[string][]csiLayout {
	z, r := vcsim.ZoneCategory, vcsim.RegionCategory
	tags := func(ts ...func(v *vcsim.VCenter, vm vcsim.VM) (string, string, types.ManagedObjectReference)) func(context.Context, *vcsim.VCenter, vcsim.VM) error {
		return func(ctx context.Context, v *vcsim.VCenter, vm vcsim.VM) error {
			for _, t := range ts {
				cat, tag, ref := t(v, vm)
				if err := v.Tag(ctx, cat, tag, ref); err != nil {
					return err
				}
			}
			return nil
		}
	}
	on := func(cat, tag, what string) func(v *vcsim.VCenter, vm vcsim.VM) (string, string, types.ManagedObjectReference) {
		return func(v *vcsim.VCenter, vm vcsim.VM) (string, string, types.ManagedObjectReference) {
			switch what {
			case "host":
				return cat, tag, vm.HostRef
			case "cluster":
				return cat, tag, vm.ClusterRef
			case "pool":
				return cat, tag, v.ResourcePool(vm.Ref)
			default:
				return cat, tag, vm.Ref
			}
		}
	}
	return map[string][]csiLayout{
		"vc-a": {
			{name: "zone-on-cluster", tag: tags(on(z, "za0-cluster", "cluster"))},
			{name: "zone-on-host", tag: tags(on(z, "za1-host", "host"))},
			{name: "zone-on-host-and-cluster", tag: tags(on(z, "za2-host", "host"), on(z, "za2-cluster", "cluster"))},
			{name: "region-on-cluster-under-datacenter", tag: tags(on(z, "za3-host", "host"), on(r, "ra3-cluster", "cluster"))},
			{name: "zone-and-region-on-host", tag: tags(on(z, "za4-host", "host"), on(r, "ra4-host", "host"))},
			{name: "cluster-completes-with-a-second-zone", tag: tags(on(z, "za5-host", "host"), on(z, "za5-cluster", "cluster"), on(r, "ra5-cluster", "cluster")),
				ambiguous: []string{"za5-host", "za5-cluster"}},
			{name: "zone-on-vm-only", tag: tags(on(z, "za6-vm", "vm"))},
			{name: "untagged"},
			{name: "zone-on-vm-and-cluster", tag: tags(on(z, "za8-vm", "vm"), on(z, "za8-cluster", "cluster"))},
			{name: "zone-on-resource-pool", tag: tags(on(z, "za9-pool", "pool"))},
		},
		"vc-b": {
			{name: "no-region-anywhere", tag: tags(on(z, "zb0-cluster", "cluster"))},
			{name: "zone-on-vm-region-on-cluster", tag: tags(on(z, "zb3-vm", "vm"), on(r, "rb3-cluster", "cluster"))},
			{name: "zone-and-region-on-vm", tag: tags(on(z, "zb4-vm", "vm"), on(r, "rb4-vm", "vm"))},
			{name: "zone-and-region-on-cluster", tag: tags(on(z, "zb1-cluster", "cluster"), on(r, "rb1-cluster", "cluster"))},
			{name: "region-on-host-zone-on-cluster", tag: tags(on(r, "rb2-host", "host"), on(z, "zb2-cluster", "cluster"))},
		},
		"vc-c": {
			{name: "zone-on-cluster-and-host-folder", tag: tags(on(z, "zc0-cluster", "cluster"))},
			{name: "zone-on-host-folder-only"},
		},
	}
}

// A tagCase is a VM of the tagged fleet and the layout of its tags.
type tagCase struct {
	vm     vcsim.VM
	layout csiLayout
}

// tagFleet starts three vCenters with one VM per layout of csiLayouts
// (vc-a's datacenter tagged with region "r-dc"; vc-c's root folder with
// region "r-root" and its host folder with zone "zc-host-folder") and tags
// each VM's chain as its layout says. The caller closes the fleet.
func tagFleet(ctx context.Context, t *testing.T) (*vcsim.Fleet, []tagCase) {
	t.Helper()
	ls := csiLayouts()
	fleet, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-a", Clusters: len(ls["vc-a"]), Hosts: 1, VMs: 1},
		vcsim.Spec{Name: "vc-b", Clusters: len(ls["vc-b"]), Hosts: 1, VMs: 1},
		vcsim.Spec{Name: "vc-c", Clusters: len(ls["vc-c"]), Hosts: 1, VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, c := fleet.VCenter("vc-a"), fleet.VCenter("vc-c")
	var cases []tagCase
	tag := func(err error) {
		if err != nil {
			fleet.Close()
			t.Fatal(err)
		}
	}
	tag(a.Tag(ctx, vcsim.RegionCategory, "r-dc", a.Datacenter("dc-1")))
	tag(c.Tag(ctx, vcsim.RegionCategory, "r-root", c.RootFolder()))
	tag(c.Tag(ctx, vcsim.ZoneCategory, "zc-host-folder", c.HostFolder("dc-1")))
	for _, v := range fleet.VCenters {
		for i, l := range ls[v.Name] {
			vm := v.VMs[i]
			if l.tag != nil {
				tag(l.tag(ctx, v, vm))
			}
			cases = append(cases, tagCase{vm, l})
		}
	}
	return fleet, cases
}

// A csiForm is one way to write vSphere CSI's [Labels] with the CCM's
// categories, and the CCM config it is paired with.
type csiForm struct {
	name   string
	labels string // csi-vsphere.conf's [Labels] and [TopologyCategory] sections
	ccm    string // the CCM's labels: section
	// zoneKey and regionKey are the label keys CSI reports ("" when it
	// reports none).
	zoneKey, regionKey string
	// failsAll: CSI fails every Node with this message.
	failsAll string
}

func csiForms() []csiForm {
	both := "labels:\n  zone: k8s-zone\n  region: k8s-region\n"
	return []csiForm{
		{name: "topology-categories", labels: "[Labels]\ntopology-categories = \"k8s-zone,k8s-region\"\n", ccm: both,
			zoneKey: "topology.csi.vmware.com/k8s-zone", regionKey: "topology.csi.vmware.com/k8s-region"},
		{name: "legacy-zone-region", labels: "[Labels]\nzone = \"k8s-zone\"\nregion = \"k8s-region\"\n", ccm: both,
			zoneKey: v1.LabelFailureDomainBetaZone, regionKey: v1.LabelFailureDomainBetaRegion},
		{name: "legacy-with-ga-labels", labels: "[Labels]\nzone = \"k8s-zone\"\nregion = \"k8s-region\"\n" +
			"[TopologyCategory \"k8s-zone\"]\nlabel = \"topology.kubernetes.io/zone\"\n[TopologyCategory \"k8s-region\"]\nlabel = \"topology.kubernetes.io/region\"\n",
			ccm: both, zoneKey: v1.LabelTopologyZone, regionKey: v1.LabelTopologyRegion},
		{name: "topology-categories-zone-only", labels: "[Labels]\ntopology-categories = \"k8s-zone\"\n", ccm: "labels:\n  zone: k8s-zone\n",
			zoneKey: "topology.csi.vmware.com/k8s-zone"},
		{name: "legacy-zone-only", labels: "[Labels]\nzone = \"k8s-zone\"\n", ccm: "labels:\n  zone: k8s-zone\n",
			failsAll: "missing zone or region information"},
	}
}

// TestParityCSI runs vSphere CSI's own node-topology code (hack/refcsi)
// and this CCM's CSI view (topology explain --csi) and labels.csiCompatible
// on the same VMs, for each way of writing CSI's labels, and checks that
// the csi-vsphere.conf files of the docs are accepted by CSI's own reader.
func TestParityCSI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := refwire.BuildCSI(ctx, filepath.Join("..", ".."), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("docs", func(t *testing.T) {
		confs, _ := filepath.Glob(filepath.Join("..", "..", "docs", "examples", "csi-*.conf"))
		if len(confs) == 0 {
			t.Fatal("no docs/examples/csi-*.conf")
		}
		for _, c := range confs {
			if err := refwire.CheckCSIConfig(ctx, bin, c); err != nil {
				t.Errorf("vSphere CSI rejects %s: %v", c, err)
			}
		}
	})

	fleet, cases := tagFleet(ctx, t)
	defer fleet.Close()

	compared, differ := 0, 0
	for _, form := range csiForms() {
		t.Run(form.name, func(t *testing.T) {
			ours := csiView(ctx, t, fleet, form.ccm, false)
			compat := csiView(ctx, t, fleet, form.ccm+"  csiCompatible: true\n", true)
			refs := map[string]*refwire.Proc{}
			for _, v := range fleet.VCenters {
				refs[v.Name] = startCSI(ctx, t, bin, v, form.labels)
			}
			for _, vc := range cases {
				name := vc.vm.VCenter + "/" + vc.layout.name
				ref, err := refs[vc.vm.VCenter].AskCSI(vc.vm.UUID)
				if err != nil {
					t.Fatal(err)
				}
				compared++
				if form.failsAll != "" {
					if !strings.Contains(ref.Error, form.failsAll) {
						t.Errorf("%s: vSphere CSI answers %+v, want it to fail with %q", name, ref, form.failsAll)
					}
					continue // the CCM cannot know CSI's form: docs/csi.md says to use topology-categories
				}
				for key := range ref.Labels {
					if key != form.zoneKey && key != form.regionKey {
						t.Errorf("%s: vSphere CSI reports label %s, docs/csi.md says %s and %s", name, key, form.zoneKey, form.regionKey)
					}
				}
				refZone, refRegion := ref.Labels[form.zoneKey], ref.Labels[form.regionKey]
				for _, o := range []struct {
					what string
					got  answerCSI
				}{{"topology explain --csi", ours[vc.vm.UUID]}, {"labels.csiCompatible", compat[vc.vm.UUID]}} {
					switch {
					case len(vc.layout.ambiguous) > 0 && form.regionKey != "":
						// CSI answers; which tag wins is up to vCenter's listing order.
						if ref.Error != "" || !contains(vc.layout.ambiguous, refZone) {
							t.Errorf("%s: vSphere CSI answers %+v, want a zone of %q", name, ref, vc.layout.ambiguous)
						}
						if !strings.Contains(o.got.err, "depending on the order") {
							t.Errorf("%s: %s: %+v, want the ambiguity named", name, o.what, o.got)
						}
					case ref.Error != "":
						if o.got.err == "" {
							differ++
							t.Errorf("%s: %s: zone %q region %q, vSphere CSI fails: %s", name, o.what, o.got.zone, o.got.region, ref.Error)
						}
					case o.got.err != "" || o.got.zone != refZone || o.got.region != refRegion:
						differ++
						t.Errorf("%s: %s: zone %q region %q (%s), vSphere CSI: zone %q region %q", name, o.what, o.got.zone, o.got.region, o.got.err, refZone, refRegion)
					}
				}
			}
		})
	}
	t.Logf("%d layouts x %d forms: %d answers of vSphere CSI compared, %d differences", len(cases), len(csiForms()), compared, differ)
}

// answerCSI is one VM's zone and region in a CSI view of ours, or its error.
type answerCSI struct{ zone, region, err string }

// csiView is, per VM UUID, what this CCM says vSphere CSI computes with
// the labels section ccm (topology explain --csi), or, with compat (ccm
// has labels.csiCompatible), the zone and region it applies itself.
func csiView(ctx context.Context, t *testing.T, fleet *vcsim.Fleet, ccm string, compat bool) map[string]answerCSI {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vsphere.yaml")
	must(t, fleet.WriteConfig(path, ccm, nil))
	cfg, _, err := config.Load(path, config.Options{})
	if err != nil {
		t.Fatalf("ours rejects %s: %v", ccm, err)
	}
	p, err := provider.New(cfg, provider.Options{})
	must(t, err)
	must(t, p.Start(ctx, nil))
	t.Cleanup(p.Close)
	must(t, p.WaitForSync(ctx))
	out := map[string]answerCSI{}
	for _, v := range fleet.VCenters {
		for _, vm := range v.VMs {
			var a answerCSI
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + vm.UUID}}
			if compat {
				md, err := p.InstanceMetadata(ctx, node)
				if err != nil {
					a.err = err.Error()
				} else {
					a.zone, a.region = md.Zone, md.Region
				}
				out[vm.UUID] = a
				continue
			}
			found, err := p.FindVM(ctx, node)
			must(t, err)
			ex := p.Explain(ctx, provider.ExplainOptions{CSI: true}, found)
			if len(ex.Placements) != 1 || ex.Placements[0].CSI == nil {
				t.Fatalf("%s: explain --csi gave %+v", vm.Name, ex)
			}
			view := ex.Placements[0].CSI
			a.err = view.Error
			if view.Zone != nil {
				a.zone = view.Zone.Value
			}
			if view.Region != nil {
				a.region = view.Region.Value
			}
			out[vm.UUID] = a
		}
	}
	return out
}

// startCSI runs vSphere CSI's code with a csi-vsphere.conf for one
// vCenter (CSI keys vCenters by host, and every simulator is 127.0.0.1).
func startCSI(ctx context.Context, t *testing.T, bin string, v *vcsim.VCenter, labels string) *refwire.Proc {
	t.Helper()
	conf := fmt.Sprintf("[Global]\ncluster-id = \"parity\"\n\n[VirtualCenter %q]\nport = \"%d\"\nca-file = %q\nuser = %q\npassword = %q\ndatacenters = \"dc-1\"\n\n%s",
		v.Host, v.Port, v.CAFile, v.User, v.Password, labels)
	path := filepath.Join(t.TempDir(), "csi-vsphere.conf")
	must(t, os.WriteFile(path, []byte(conf), 0o600))
	p, err := refwire.StartCSI(ctx, bin, path)
	must(t, err)
	t.Cleanup(p.Close)
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
