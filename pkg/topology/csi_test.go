package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// TestCSIParity: vSphere CSI reads tags only on the host chain. A zone
// from a cluster tag is the same for both; one from a VM tag is a
// difference (CSI finds none); a host tag under a VM tag is what CSI
// finds. With labels.csiCompatible the CCM resolves exactly as CSI does.
func TestCSIParity(t *testing.T) {
	f, ctx := startFleet(t)
	tagZonesOnClustersAndVMs(t, ctx, f)
	b := f.VCenter("vc-b")
	hostTagged := b.VMs[0]
	must.OK(t, b.Tag(ctx, "k8s-zone", "host-zone", hostTagged.HostRef))

	t.Run("full chain", func(t *testing.T) {
		s := start(t, ctx, f, "labels:\n  zone: k8s-zone\n", map[string][]string{"vc-c": {"staticTopology:", "  zone: static-zone"}})
		for _, vm := range f.VMs() {
			found, err := s.inv.FindByUUID(ctx, vm.UUID)
			must.OK(t, err)
			applied, err := s.res.Resolve(ctx, found)
			must.OK(t, err)
			csi, err := s.res.CSI(ctx, found)
			must.OK(t, err)
			diffs := topology.CSIDifferences(applied, csi)
			switch {
			case vm.VCenter == "vc-a":
				if len(diffs) != 0 || applied.Zone.Source != topology.SourceHostTag {
					t.Errorf("%s (cluster tag): differences %q, source %s", vm.Name, diffs, applied.Zone.Source)
				}
			case vm.VCenter == "vc-b" && vm.HostRef == hostTagged.HostRef:
				// The host tag is nearer than the VM's own: both find it.
				if len(diffs) != 0 || applied.Zone.Value != "host-zone" {
					t.Errorf("%s (host tag): zone %+v, differences %q", vm.Name, applied.Zone, diffs)
				}
			case vm.VCenter == "vc-b":
				if applied.Zone.Source != topology.SourceVMTag || csi.Zone != nil || len(diffs) != 1 ||
					!strings.Contains(diffs[0], "vSphere CSI finds no tag") || !strings.Contains(diffs[0], "on VM "+vm.Name) {
					t.Errorf("%s (VM tag): applied %+v, CSI %+v, differences %q", vm.Name, applied.Zone, csi.Zone, diffs)
				}
			case vm.VCenter == "vc-c":
				if applied.Zone.Source != topology.SourceStatic || len(diffs) != 1 || !strings.Contains(diffs[0], "staticTopology") {
					t.Errorf("%s (static): applied %+v, differences %q", vm.Name, applied.Zone, diffs)
				}
			}
		}
	})
	t.Run("csiCompatible", func(t *testing.T) {
		s := start(t, ctx, f, "labels:\n  zone: k8s-zone\n  csiCompatible: true\n", nil)
		for _, vm := range b.VMs {
			found, err := s.inv.FindByUUID(ctx, vm.UUID)
			must.OK(t, err)
			got, err := s.res.Resolve(ctx, found)
			if vm.HostRef == hostTagged.HostRef {
				if err != nil || got.Zone.Value != "host-zone" {
					t.Errorf("%s: %+v, %v; want host-zone", vm.Name, got.Zone, err)
				}
				continue
			}
			var me *topology.MissingTagError
			if !errors.As(err, &me) || strings.Contains(err.Error(), "VM "+vm.Name+" (") {
				t.Errorf("%s: err %v, want a MissingTagError that did not check the VM", vm.Name, err)
			}
		}
	})
}
