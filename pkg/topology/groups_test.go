package topology_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// stretched is one vCenter whose first cluster (4 hosts) is stretched
// over two sites, a and b, of two hosts each, the way vSAN stretched
// clusters are built: host groups site-a-hosts and site-b-hosts, VM
// groups site-a-vms and site-b-vms, and a "should run on" rule for each.
// VM i of the cluster runs on host i mod 4 and is in its site's VM group,
// except the last VM ("loose"), which is in no VM group. The second
// cluster is an ordinary one. Clusters carry zone tags and the
// datacenter a region tag, to show what host groups take precedence over.
type stretched struct {
	v       *vcsim.VCenter
	f       *vcsim.Fleet
	cluster types.ManagedObjectReference
	hosts   []types.ManagedObjectReference // sorted; 0-1 site a, 2-3 site b
	site    map[string]string              // VM name -> "a" or "b" (where it runs)
	vms     []vcsim.VM                     // of the stretched cluster
	loose   vcsim.VM
	other   []vcsim.VM // of the ordinary cluster
}

func startStretched(t *testing.T) (*stretched, context.Context) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	f, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-s", Clusters: 2, Hosts: 4, VMs: 5})
	must.OK(t, err)
	t.Cleanup(f.Close)
	tagStretched(t, ctx, f)
	v := f.VCenter("vc-s")
	s := &stretched{v: v, f: f, cluster: v.VMs[0].ClusterRef, site: map[string]string{}}
	s.hosts = v.ClusterHosts(s.cluster)
	if len(s.hosts) != 4 {
		t.Fatalf("cluster %s has %d hosts, want 4", s.cluster.Value, len(s.hosts))
	}
	sites := map[string]*vcsim.Site{"a": {Name: "site-a", Hosts: s.hosts[:2]}, "b": {Name: "site-b", Hosts: s.hosts[2:]}}
	for _, vm := range v.VMs {
		if vm.ClusterRef != s.cluster {
			s.other = append(s.other, vm)
			continue
		}
		i := len(s.vms)
		must.OK(t, v.Relocate(ctx, vm.Ref, s.hosts[i%4]))
		s.site[vm.Name] = map[bool]string{true: "a", false: "b"}[i%4 < 2]
		s.vms = append(s.vms, vm)
	}
	s.loose = s.vms[len(s.vms)-1]
	for _, vm := range s.vms[:len(s.vms)-1] {
		sites[s.site[vm.Name]].VMs = append(sites[s.site[vm.Name]].VMs, vm.Ref)
	}
	must.OK(t, v.Stretch(ctx, s.cluster, *sites["a"], *sites["b"]))
	return s, ctx
}

// hostGroupZones is the config entry for the stretched cluster.
func (s *stretched) hostGroupZones(body string) string {
	return fmt.Sprintf("hostGroupZones:\n- cluster: %q\n%s", s.clusterName(), body)
}

func (s *stretched) clusterName() string { return s.vms[0].Cluster }

// TestHostGroupZones: VMs of the stretched cluster get the zone of their
// site's host group (intended: VM group and rule; actual: the host) and
// the entry's region, over the cluster's zone tag and the datacenter's
// region tag; the VM in no VM group gets the zone of its host with a
// warning; the ordinary cluster keeps its tags.
func TestHostGroupZones(t *testing.T) {
	s, ctx := startStretched(t)
	for name, entry := range map[string]string{
		"names":   "  hostGroups:\n    site-a-hosts: zone-a\n    site-b-hosts: zone-b\n  region: stretched\n",
		"pattern": "  hostGroupPattern: ^site-(?P<zone>[a-z])-hosts$\n  region: stretched\n",
	} {
		t.Run(name, func(t *testing.T) {
			st := start(t, ctx, s.f, zoneAndRegion+s.hostGroupZones(entry), nil)
			wantZone := func(site string) string {
				if name == "pattern" {
					return site
				}
				return "zone-" + site
			}
			for _, vm := range s.vms {
				got, err := st.resolve(t, ctx, vm)
				if err != nil {
					t.Errorf("%s: %v", vm.Name, err)
					continue
				}
				want := wantZone(s.site[vm.Name])
				if got.Zone == nil || got.Zone.Value != want {
					t.Errorf("%s: zone %+v, want %s", vm.Name, got.Zone, want)
				}
				if got.Region == nil || got.Region.Value != "stretched" || !strings.Contains(got.Region.From, "hostGroupZones[0]") {
					t.Errorf("%s: region %+v, want stretched from hostGroupZones[0]", vm.Name, got.Region)
				}
				p := got.Placement
				if p == nil || p.Actual == nil || p.Actual.Value != want {
					t.Fatalf("%s: placement %+v, want actual zone %s", vm.Name, p, want)
				}
				if vm.Name == s.loose.Name {
					if reason, msg := p.Warning(); p.Intended != nil || reason != topology.ReasonNoIntendedZone || !strings.Contains(msg, "in no VM group") {
						t.Errorf("%s (in no VM group): intended %+v, warning %s %q", vm.Name, p.Intended, reason, msg)
					}
					continue
				}
				if p.Intended == nil || p.Intended.Value != want || !strings.Contains(p.Intended.From, "rule site-"+s.site[vm.Name]+"-vms-on-site-") {
					t.Errorf("%s: intended %+v, want %s from its rule", vm.Name, p.Intended, want)
				}
				if reason, msg := p.Warning(); reason != "" {
					t.Errorf("%s: warning %s %q, want none", vm.Name, reason, msg)
				}
			}
			for _, vm := range s.other {
				got, err := st.resolve(t, ctx, vm)
				if err != nil {
					t.Errorf("%s: %v", vm.Name, err)
					continue
				}
				if got.Placement != nil || got.Zone == nil || got.Zone.Value != "zone-"+vm.Cluster || got.Region.Value != "vc-s-"+vm.Datacenter {
					t.Errorf("%s (ordinary cluster): %+v, want the tags' zone and region", vm.Name, got)
				}
			}
		})
	}
}

// TestHostGroupFailover: a VM restarted on the other site (HA, a manual
// vMotion) keeps its intended zone; its actual zone follows the host and
// the placement warns, until it is back.
func TestHostGroupFailover(t *testing.T) {
	s, ctx := startStretched(t)
	st := start(t, ctx, s.f, zoneAndRegion+s.hostGroupZones("  hostGroups:\n    site-a-hosts: zone-a\n    site-b-hosts: zone-b\n"), nil)
	vm := s.vms[0] // site a
	placement := func() *topology.Placement {
		got, err := st.resolve(t, ctx, vm)
		if err != nil {
			t.Fatalf("%s: %v", vm.Name, err)
		}
		if got.Zone == nil || got.Zone.Value != "zone-a" {
			t.Fatalf("%s: zone %+v, want its intended zone-a", vm.Name, got.Zone)
		}
		return got.Placement
	}
	must.OK(t, s.v.Relocate(ctx, vm.Ref, s.hosts[3]))
	poll.True(t, "the inventory to see the VM on site b", func() bool {
		p := placement()
		return p.Actual != nil && p.Actual.Value == "zone-b"
	})
	if reason, w := placement().Warning(); reason != topology.ReasonOutsideIntendedZone || !strings.Contains(w, `runs in zone "zone-b"`) || !strings.Contains(w, `outside its intended zone "zone-a"`) {
		t.Errorf("warning %s %q, want OutsideIntendedZone naming both zones", reason, w)
	}
	must.OK(t, s.v.Relocate(ctx, vm.Ref, s.hosts[0]))
	poll.True(t, "the VM back on site a", func() bool { reason, _ := placement().Warning(); return reason == "" })
}

// TestHostGroupErrors: configurations that cannot give a VM one zone are
// errors that name the entry, the cluster and the groups, never a guess.
func TestHostGroupErrors(t *testing.T) {
	s, ctx := startStretched(t)
	// A second VM group for a VM of site a, tied to site b; a host of site a
	// also in a host group mapped to zone-b.
	twoRules, twoGroupsHost := s.vms[1], s.vms[0] // on hosts 1 and 0
	must.OK(t, s.v.SetGroups(ctx, s.cluster,
		[]types.BaseClusterGroupInfo{
			&types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "extra-vms"}, Vm: []types.ManagedObjectReference{twoRules.Ref}},
			&types.ClusterHostGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "also-b-hosts"}, Host: []types.ManagedObjectReference{s.hosts[0]}},
			&types.ClusterHostGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: "bad zone!-hosts"}, Host: []types.ManagedObjectReference{s.hosts[2]}},
		},
		[]types.BaseClusterRuleInfo{&types.ClusterVmHostRuleInfo{
			ClusterRuleInfo: types.ClusterRuleInfo{Name: "extra-on-b", Enabled: types.NewBool(true)}, VmGroupName: "extra-vms", AffineHostGroupName: "site-b-hosts"}}))
	for _, tc := range []struct {
		name, entry string
		vm          vcsim.VM
		want        []string
	}{
		{"unknown groups", "  hostGroups:\n    london-hosts: zone-l\n    paris-hosts: zone-p\n", s.vms[2],
			[]string{"hostGroupZones[0]", "none of the cluster's host groups is a zone", "london-hosts, paris-hosts", "site-a-hosts"}},
		{"VM groups tied to two zones", "  hostGroups:\n    site-a-hosts: zone-a\n    site-b-hosts: zone-b\n", twoRules,
			[]string{"point to different zones", "VM group extra-vms, rule extra-on-b", "VM group site-a-vms"}},
		{"host in two zones", "  hostGroups:\n    site-a-hosts: zone-a\n    site-b-hosts: zone-b\n    also-b-hosts: zone-b\n", twoGroupsHost,
			[]string{"host groups also-b-hosts, site-a-hosts", "different zones"}},
		{"zone not a label value", "  hostGroupPattern: ^(.+)-hosts$\n", s.vms[2],
			[]string{`host group "bad zone!-hosts" gives zone "bad zone!"`, "not a valid label value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := start(t, ctx, s.f, zoneAndRegion+s.hostGroupZones(tc.entry), nil)
			var ge *topology.GroupError
			poll.True(t, "the inventory to see the extra groups", func() bool {
				_, err := st.resolve(t, ctx, tc.vm)
				return errors.As(err, &ge)
			})
			if !errors.Is(ge, topology.ErrTopology) {
				t.Errorf("GroupError is not ErrTopology")
			}
			for _, w := range append(tc.want, s.clusterName(), tc.vm.Name) {
				if !strings.Contains(ge.Error(), w) {
					t.Errorf("error %q does not mention %q", ge, w)
				}
			}
		})
	}
}

// TestHostGroupsOverStatic: a hostGroupZones entry takes precedence over
// staticTopology for the clusters it matches; the other clusters keep the
// static values, and the entry without a region leaves the static region.
func TestHostGroupsOverStatic(t *testing.T) {
	s, ctx := startStretched(t)
	st := start(t, ctx, s.f, zoneAndRegion+s.hostGroupZones("  hostGroups:\n    site-a-hosts: zone-a\n    site-b-hosts: zone-b\n"),
		map[string][]string{"vc-s": {"staticTopology:", "  zone: static-zone", "  region: static-region"}})
	for _, vm := range append(append([]vcsim.VM{}, s.vms[:2]...), s.other...) {
		got, err := st.resolve(t, ctx, vm)
		if err != nil {
			t.Fatalf("%s: %v", vm.Name, err)
		}
		wantZone := "static-zone"
		if site, ok := s.site[vm.Name]; ok {
			wantZone = "zone-" + site
		}
		if got.Zone == nil || got.Zone.Value != wantZone || got.Region == nil || got.Region.Value != "static-region" {
			t.Errorf("%s: zone %+v region %+v, want %s and static-region", vm.Name, got.Zone, got.Region, wantZone)
		}
	}
}

// TestHostGroupNoZone: a VM of a stretched cluster in no VM group, on a
// host in no zone host group (a freshly added ESXi host), has no zone
// from its entry. Without another zone source that is an error (the Node
// stays uninitialized and is retried), never a Node without a zone; with
// a zone tag category, the tags give it; and once the host joins a zone
// group, it resolves.
func TestHostGroupNoZone(t *testing.T) {
	s, ctx := startStretched(t)
	must.OK(t, s.v.Relocate(ctx, s.loose.Ref, s.hosts[2])) // site b, whose host group the entry does not map
	entry := s.hostGroupZones("  hostGroups:\n    site-a-hosts: zone-a\n")

	st := start(t, ctx, s.f, "labels:\n  region: k8s-region\n"+entry, nil)
	var ge *topology.GroupError
	poll.True(t, "the VM on the unmapped host", func() bool {
		_, err := st.resolve(t, ctx, s.loose)
		return errors.As(err, &ge)
	})
	for _, w := range []string{"no zone host group", "no staticTopology or zone tag category", s.loose.Name, "hostGroupZones[0]"} {
		if !strings.Contains(ge.Error(), w) {
			t.Errorf("error %q does not mention %q", ge, w)
		}
	}
	// A VM of the same cluster on a mapped host still resolves.
	if got, err := st.resolve(t, ctx, s.vms[0]); err != nil || got.Zone == nil || got.Zone.Value != "zone-a" {
		t.Errorf("%s on site a: %+v, %v", s.vms[0].Name, got, err)
	}

	// With a zone category, the cluster's tag gives the zone.
	tagged := start(t, ctx, s.f, zoneAndRegion+entry, nil)
	if got, err := tagged.resolve(t, ctx, s.loose); err != nil || got.Zone == nil || got.Zone.Value != "zone-"+s.loose.Cluster {
		t.Errorf("with labels.zone: %+v, %v; want the cluster's tag", got, err)
	}

	// The VM moves to a host of a mapped group: resolved.
	must.OK(t, s.v.Relocate(ctx, s.loose.Ref, s.hosts[1]))
	poll.True(t, "the VM on a mapped host", func() bool {
		got, err := st.resolve(t, ctx, s.loose)
		return err == nil && got.Zone != nil && got.Zone.Value == "zone-a"
	})
}
