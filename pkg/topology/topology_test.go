package topology_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// fleet: vc-a with dc-1 (2 clusters) and dc-2, vc-b and vc-c with one each.
func startFleet(t *testing.T) (*vcsim.Fleet, context.Context) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	f, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1", "dc-2"}, Clusters: 2, Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-b", Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-c", Hosts: 1, VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, ctx
}

// tagStretched tags regions on datacenters and zones on clusters.
func tagStretched(t *testing.T, ctx context.Context, f *vcsim.Fleet) {
	t.Helper()
	for _, v := range f.VCenters {
		dcs := map[string]types.ManagedObjectReference{}
		clusters := map[string]types.ManagedObjectReference{}
		for _, vm := range v.VMs {
			clusters[vm.Cluster] = vm.ClusterRef
			dcs[vm.Datacenter] = v.Datacenter(vm.Datacenter)
		}
		for name, ref := range dcs {
			must.OK(t, v.Tag(ctx, "k8s-region", v.Name+"-"+name, ref))
		}
		for name, ref := range clusters {
			must.OK(t, v.Tag(ctx, "k8s-zone", "zone-"+name, ref))
		}
	}
}

type stack struct {
	inv *inventory.Inventory
	res *topology.Resolver
}

// start connects to the fleet with the given head (labels:) and per-vCenter lines.
func start(t *testing.T, ctx context.Context, f *vcsim.Fleet, head string, per map[string][]string, opts ...topology.ResolverOptions) stack {
	t.Helper()
	cfg, _, err := config.Parse("test.yaml", []byte(f.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 3s\n"+head, per)), config.Options{})
	must.OK(t, err)
	creds := credentials.New(cfg, credentials.Options{})
	must.OK(t, creds.StartAndWait(ctx))
	pool, err := vcenter.NewPool(cfg, vcenter.Options{Credentials: creds})
	must.OK(t, err)
	pool.Start(ctx)
	t.Cleanup(pool.Close)
	var ic []inventory.Client
	var tc []topology.Client
	for _, c := range pool.Clients() {
		ic = append(ic, c)
		tc = append(tc, c)
	}
	inv := inventory.New(ic, inventory.Options{MaxWait: time.Second, ClusterGroups: len(cfg.HostGroupZones) > 0})
	rctx, cancel := context.WithCancel(ctx)
	inv.Start(rctx)
	t.Cleanup(func() { cancel(); inv.Wait() }) // before the pool and the simulators close
	must.OK(t, inv.WaitForSync(ctx))
	var o topology.ResolverOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	res := topology.NewResolver(cfg, inv, tc, o)
	res.Start(rctx)
	t.Cleanup(func() { cancel(); res.Wait() }) // loops and the refreshes lookups started end before the simulators close
	must.OK(t, res.WaitForSync(ctx))
	return stack{inv, res}
}

func (s stack) resolve(t *testing.T, ctx context.Context, vm vcsim.VM) (topology.Result, error) {
	t.Helper()
	found, err := s.inv.FindByUUID(ctx, vm.UUID)
	must.OK(t, err)
	return s.res.Resolve(ctx, found)
}

const zoneAndRegion = "labels:\n  zone: k8s-zone\n  region: k8s-region\n"

func TestStretched(t *testing.T) {
	f, ctx := startFleet(t)
	tagStretched(t, ctx, f)
	// A host tag under its tagged cluster: the cluster's zone wins, as in
	// the reference CCM's lookup (a higher tag replaces a lower one until
	// both categories are found); an extra category becomes a label.
	a := f.VCenter("vc-a")
	override := a.VMs[0]
	must.OK(t, a.Tag(ctx, "k8s-zone", "zone-host-override", override.HostRef))
	must.OK(t, a.Tag(ctx, "rack", "r42", override.ClusterRef))
	s := start(t, ctx, f, zoneAndRegion+"  additional:\n  - category: rack\n    label: example.com/rack\n", nil)

	for _, vm := range f.VMs() {
		got, err := s.resolve(t, ctx, vm)
		if err != nil {
			t.Errorf("%s: %v", vm.Name, err)
			continue
		}
		wantZone, wantFrom := "zone-"+vm.Cluster, "on cluster "+vm.Cluster
		if got.Zone == nil || got.Zone.Value != wantZone || !strings.Contains(got.Zone.From, wantFrom) {
			t.Errorf("%s: zone %+v, want %s from %q", vm.Name, got.Zone, wantZone, wantFrom)
		}
		wantRegion := vm.VCenter + "-" + vm.Datacenter
		if got.Region == nil || got.Region.Value != wantRegion || !strings.Contains(got.Region.From, "on datacenter "+vm.Datacenter) {
			t.Errorf("%s: region %+v, want %s", vm.Name, got.Region, wantRegion)
		}
		rack, ok := got.Labels["example.com/rack"]
		if wantRack := vm.ClusterRef == override.ClusterRef && vm.VCenter == "vc-a"; ok != wantRack || (ok && rack.Value != "r42") {
			t.Errorf("%s: rack label %+v (present %v, want %v)", vm.Name, rack, ok, wantRack)
		}
	}
}

// tagZonesOnClustersAndVMs tags zones on vc-a's clusters (zone-<cluster>)
// and on vc-b's VMs only (vm-zone-<vm>); vc-c gets no tag.
func tagZonesOnClustersAndVMs(t *testing.T, ctx context.Context, f *vcsim.Fleet) {
	t.Helper()
	a, b := f.VCenter("vc-a"), f.VCenter("vc-b")
	for _, vm := range a.VMs {
		must.OK(t, a.Tag(ctx, "k8s-zone", "zone-"+vm.Cluster, vm.ClusterRef))
	}
	for _, vm := range b.VMs {
		must.OK(t, b.Tag(ctx, "k8s-zone", "vm-zone-"+vm.Name, vm.Ref))
	}
}

func TestZoneOnlyStaticAndVMFallback(t *testing.T) {
	f, ctx := startFleet(t)
	// vc-a: zones on clusters; vc-b: only VMs are tagged.
	tagZonesOnClustersAndVMs(t, ctx, f)
	// vc-c: no tags, static zone.
	s := start(t, ctx, f, "labels:\n  zone: k8s-zone\n", map[string][]string{
		"vc-c": {"staticTopology:", "  zone: static-zone", "  datacenters:", "    dc-1:", "      region: static-region"},
	})
	for _, vm := range f.VMs() {
		got, err := s.resolve(t, ctx, vm)
		if err != nil {
			t.Fatalf("%s: %v", vm.Name, err)
		}
		want := map[string]string{"vc-a": "zone-" + vm.Cluster, "vc-b": "vm-zone-" + vm.Name, "vc-c": "static-zone"}[vm.VCenter]
		if got.Zone == nil || got.Zone.Value != want {
			t.Errorf("%s: zone %+v, want %s", vm.Name, got.Zone, want)
		}
		if vm.VCenter == "vc-c" {
			if got.Region == nil || got.Region.Value != "static-region" || !strings.Contains(got.Region.From, "datacenter dc-1") {
				t.Errorf("%s: region %+v, want static-region from the datacenter entry", vm.Name, got.Region)
			}
		} else if got.Region != nil {
			t.Errorf("%s: region %+v, want none (zone-only config)", vm.Name, got.Region)
		}
	}
}

func TestTagErrors(t *testing.T) {
	f, ctx := startFleet(t)
	a, b := f.VCenter("vc-a"), f.VCenter("vc-b")
	conflictVM, invalidVM := a.VMs[0], b.VMs[0]
	must.OK(t, a.Tag(ctx, "k8s-zone", "zone-1", conflictVM.ClusterRef))
	must.OK(t, a.Tag(ctx, "k8s-zone", "zone-2", conflictVM.ClusterRef)) // the simulator does not enforce cardinality
	must.OK(t, b.Tag(ctx, "k8s-zone", "not a valid label!", invalidVM.ClusterRef))
	s := start(t, ctx, f, "labels:\n  zone: k8s-zone\n", nil)

	_, err := s.resolve(t, ctx, conflictVM)
	var ce *topology.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, topology.ErrTopology) {
		t.Fatalf("conflict: %v", err)
	}
	for _, want := range []string{"cluster " + conflictVM.Cluster, "zone-1, zone-2", "k8s-zone", "detach"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not contain %q", err, want)
		}
	}
	_, err = s.resolve(t, ctx, invalidVM)
	var ie *topology.InvalidTagError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), `"not a valid label!"`) || !strings.Contains(err.Error(), "cluster "+invalidVM.Cluster) {
		t.Fatalf("invalid tag: %v", err)
	}
	// vc-c has the category (created in vc-a/vc-b only): no category at all.
	_, err = s.resolve(t, ctx, f.VCenter("vc-c").VMs[0])
	var me *topology.MissingTagError
	if !errors.As(err, &me) || !me.NoCategory || !strings.Contains(err.Error(), `no tag category "k8s-zone"`) {
		t.Fatalf("missing category: %v", err)
	}
	// A VM of vc-a in dc-2: the category exists, no tag anywhere on its chain.
	var untagged vcsim.VM
	for _, vm := range a.VMs {
		if vm.Datacenter == "dc-2" {
			untagged = vm
		}
	}
	_, err = s.resolve(t, ctx, untagged)
	if !errors.As(err, &me) || me.NoCategory || !strings.Contains(err.Error(), "host "+untagged.Host) || !strings.Contains(err.Error(), "datacenter dc-2") {
		t.Fatalf("missing tag: %v", err)
	}
}

// TestTagAttachedAfterRefresh: a zone tag attached after the cache was
// filled is seen by the next lookup that misses it (the cache is refreshed
// then), at most once per MissRefreshAfter.
func TestTagAttachedAfterRefresh(t *testing.T) {
	f, ctx := startFleet(t)
	tagStretched(t, ctx, f)
	c := f.VCenter("vc-c")
	vm := c.VMs[0]
	must.OK(t, c.Untag(ctx, "k8s-zone", "zone-"+vm.Cluster, vm.ClusterRef))
	eager := start(t, ctx, f, zoneAndRegion, nil, topology.ResolverOptions{MissRefreshAfter: time.Nanosecond})
	lazy := start(t, ctx, f, zoneAndRegion, nil) // 30 s
	var me *topology.MissingTagError
	for _, s := range []stack{eager, lazy} {
		if _, err := s.resolve(t, ctx, vm); !errors.As(err, &me) {
			t.Fatalf("untagged cluster: %v, want a MissingTagError", err)
		}
	}
	must.OK(t, c.Tag(ctx, "k8s-zone", "zone-"+vm.Cluster, vm.ClusterRef))
	if got, err := eager.resolve(t, ctx, vm); err != nil || got.Zone.Value != "zone-"+vm.Cluster {
		t.Errorf("after tagging, with a refresh on a miss: %v, %v", got, err)
	}
	// Refreshed less than 30 s ago: no refresh yet, the miss stands.
	if _, err := lazy.resolve(t, ctx, vm); !errors.As(err, &me) {
		t.Errorf("after tagging, cache refreshed just now: %v, want the miss until the next refresh", err)
	}
	must.OK(t, lazy.res.Cache("vc-c").Refresh(ctx))
	if got, err := lazy.resolve(t, ctx, vm); err != nil || got.Zone.Value != "zone-"+vm.Cluster {
		t.Errorf("after a refresh: %v, %v", got, err)
	}
}

// TestRefreshIfOlderByClock: a lookup's refresh on a missing tag happens
// only once the cache is older than asked, by the Resolver's clock.
func TestRefreshIfOlderByClock(t *testing.T) {
	f, ctx := startFleet(t)
	clk := clocktesting.NewFakeClock(time.Now())
	s := start(t, ctx, f, zoneAndRegion, nil, topology.ResolverOptions{Clock: clk})
	c := s.res.Cache("vc-b")
	if did, err := c.RefreshIfOlder(ctx, time.Minute); did || err != nil {
		t.Fatalf("refreshed a cache younger than a minute: %v, %v", did, err)
	}
	_, before, _ := c.Status()
	clk.SetTime(clk.Now().Add(time.Minute + time.Second))
	if did, err := c.RefreshIfOlder(ctx, time.Minute); !did || err != nil {
		t.Fatalf("did not refresh a cache older than a minute: %v, %v", did, err)
	}
	if _, after, _ := c.Status(); !after.After(before) {
		t.Errorf("refreshed at %v, before %v: the refresh time is not the clock's", after, before)
	}
}

// TestInstanceTypeFromTag: with labels.instanceType the instance type is
// the tag of that category nearest the VM: on the VM before its cluster
// (the opposite of zones); none anywhere leaves it unset (the provider
// generates one); two tags on one object are a conflict, an invalid label
// value an error.
func TestInstanceTypeFromTag(t *testing.T) {
	f, ctx := startFleet(t)
	tagStretched(t, ctx, f)
	a, b := f.VCenter("vc-a"), f.VCenter("vc-b")
	const cat = "k8s-instance-type"
	onVM, onCluster, conflict := a.VMs[0], a.VMs[1], b.VMs[0]
	// vc-a's first cluster: a default for its VMs; one VM its own.
	must.OK(t, a.Tag(ctx, cat, "cluster-default", onVM.ClusterRef))
	must.OK(t, a.Tag(ctx, cat, "gpu-large", onVM.Ref))
	must.OK(t, b.Tag(ctx, cat, "small", conflict.Ref))
	must.OK(t, b.Tag(ctx, cat, "large", conflict.Ref))
	s := start(t, ctx, f, zoneAndRegion+"  instanceType: "+cat+"\n", nil)

	got, err := s.resolve(t, ctx, onVM)
	must.OK(t, err)
	if got.InstanceType == nil || got.InstanceType.Value != "gpu-large" || !strings.Contains(got.InstanceType.From, "VM "+onVM.Name) {
		t.Errorf("tag on the VM: %+v", got.InstanceType)
	}
	want := ""
	if onCluster.ClusterRef == onVM.ClusterRef {
		want = "cluster-default"
	}
	got, err = s.resolve(t, ctx, onCluster)
	must.OK(t, err)
	switch {
	case want == "" && got.InstanceType != nil:
		t.Errorf("no tag on the VM's chain: %+v, want none", got.InstanceType)
	case want != "" && (got.InstanceType == nil || got.InstanceType.Value != want):
		t.Errorf("tag on the cluster: %+v, want %s", got.InstanceType, want)
	}
	got, err = s.resolve(t, ctx, f.VCenter("vc-c").VMs[0])
	must.OK(t, err)
	if got.InstanceType != nil || got.Zone == nil {
		t.Errorf("vc-c, no instance type tag: %+v (zone %+v)", got.InstanceType, got.Zone)
	}
	_, err = s.resolve(t, ctx, conflict)
	var ce *topology.ConflictError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), cat) {
		t.Errorf("two instance type tags on one VM: %v, want a ConflictError", err)
	}
}
