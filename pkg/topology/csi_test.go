package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestCSIParity: vSphere CSI reads tags only on the host chain, lets a
// higher tag win until every category has one, and fails a Node with a
// category missing. make parity runs CSI's own code on such layouts; this
// is the same rule on the resolver's own fleet. With labels.csiCompatible
// the CCM applies exactly what the CSI view computes.
func TestCSIParity(t *testing.T) {
	f, ctx := startFleet(t)
	tagStretched(t, ctx, f) // zone-<cluster> on clusters, <vc>-<dc> on datacenters
	a, b, c := f.VCenter("vc-a"), f.VCenter("vc-b"), f.VCenter("vc-c")
	// vc-a dc-1: a host tagged under its tagged cluster.
	hostUnderCluster := a.VMs[0]
	must.OK(t, a.Tag(ctx, "k8s-zone", "zone-host", hostUnderCluster.HostRef))
	// vc-a dc-2: a host with the region, under a cluster with the zone.
	var regionOnHost vcsim.VM
	for _, vm := range a.VMs {
		if vm.Datacenter == "dc-2" {
			regionOnHost = vm
			break
		}
	}
	must.OK(t, a.Tag(ctx, "k8s-region", "region-host", regionOnHost.HostRef))
	// vc-b: zones on VMs too, and no region anywhere.
	for _, vm := range b.VMs {
		must.OK(t, b.Tag(ctx, "k8s-zone", "vm-zone-"+vm.Name, vm.Ref))
	}
	must.OK(t, b.Untag(ctx, "k8s-region", "vc-b-dc-1", b.Datacenter("dc-1")))
	// vc-c: the host has a zone; its cluster a zone and the region, which
	// completes the set: CSI's zone depends on vCenter's tag order.
	must.OK(t, c.Tag(ctx, "k8s-zone", "zone-host", c.VMs[0].HostRef))
	must.OK(t, c.Tag(ctx, "k8s-region", "region-cluster", c.VMs[0].ClusterRef))

	type want struct{ zone, region, err string }
	expect := func(vm vcsim.VM) want {
		switch {
		case vm.VCenter == "vc-a" && vm.HostRef == hostUnderCluster.HostRef:
			return want{zone: "zone-" + vm.Cluster, region: "vc-a-dc-1"} // the cluster's, over the host's
		case vm.VCenter == "vc-a" && vm.HostRef == regionOnHost.HostRef:
			return want{zone: "zone-" + vm.Cluster, region: "region-host"}
		case vm.VCenter == "vc-a":
			return want{zone: "zone-" + vm.Cluster, region: "vc-a-" + vm.Datacenter}
		case vm.VCenter == "vc-b":
			return want{err: `finds no tag of categories ["k8s-region"]`}
		default:
			return want{err: `category k8s-zone is "zone-host" or "zone-vc-c-dc-1-c0" depending on the order`}
		}
	}
	check := func(t *testing.T, vm vcsim.VM, what string, got topology.Result, err error) {
		t.Helper()
		w := expect(vm)
		if w.err != "" {
			if err == nil || !strings.Contains(err.Error(), w.err) || !errors.Is(err, topology.ErrTopology) {
				t.Errorf("%s: %s: %+v, %v; want an error with %q", vm.Name, what, got, err, w.err)
			}
			return
		}
		if err != nil || got.Zone == nil || got.Region == nil || got.Zone.Value != w.zone || got.Region.Value != w.region {
			t.Errorf("%s: %s: zone %+v, region %+v, %v; want %s, %s", vm.Name, what, got.Zone, got.Region, err, w.zone, w.region)
		}
	}

	t.Run("view", func(t *testing.T) {
		s := start(t, ctx, f, zoneAndRegion, nil)
		for _, vm := range f.VMs() {
			found, err := s.inv.FindByUUID(ctx, vm.UUID)
			must.OK(t, err)
			csi, err := s.res.CSI(ctx, found)
			check(t, vm, "CSI view", csi, err)
			applied, aerr := s.res.Resolve(ctx, found)
			if vm.VCenter == "vc-a" {
				// By default the CCM walks as the reference CCM, which walks
				// the host chain as CSI does: no difference.
				if diffs := topology.CSIDifferences(applied, csi); aerr != nil || len(diffs) != 0 {
					t.Errorf("%s: differences %q, %v", vm.Name, diffs, aerr)
				}
			}
		}
	})
	t.Run("zone only", func(t *testing.T) {
		// As vSphere CSI with topology-categories = "k8s-zone": the higher
		// tag wins only while a category is missing, so the nearest does.
		s := start(t, ctx, f, "labels:\n  zone: k8s-zone\n", nil)
		found, err := s.inv.FindByUUID(ctx, hostUnderCluster.UUID)
		must.OK(t, err)
		if got, err := s.res.CSI(ctx, found); err != nil || got.Zone == nil || got.Zone.Value != "zone-host" || got.Region != nil {
			t.Errorf("CSI view with labels.zone only: %+v, %v", got, err)
		}
	})
	t.Run("csiCompatible", func(t *testing.T) {
		s := start(t, ctx, f, zoneAndRegion+"  csiCompatible: true\n", nil)
		for _, vm := range f.VMs() {
			got, err := s.resolve(t, ctx, vm)
			check(t, vm, "csiCompatible", got, err)
		}
	})
}
