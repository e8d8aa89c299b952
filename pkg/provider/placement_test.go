package provider_test

import (
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// TestPlacementLabels: labels.placement sets the host, cluster and
// datacenter labels at initialization, and after a vMotion Observe lists
// the labels to patch (the node-topology controller patches them).
func TestPlacementLabels(t *testing.T) {
	e := stretched(t, "labels:\n  zone: k8s-zone\n  region: k8s-region\n  placement: [host, cluster, datacenter]\n", nil)
	b := e.fleet.VCenter("vc-b")
	vm := b.VMs[0]
	n := node(vm)
	md, err := e.p.InstanceMetadata(e.ctx, n)
	must.OK(t, err)
	if md.AdditionalLabels[provider.LabelHost] != provider.LabelValue(vm.Host) || md.AdditionalLabels[provider.LabelCluster] != provider.LabelValue(vm.Cluster) ||
		md.AdditionalLabels[provider.LabelDatacenter] != vm.Datacenter {
		t.Fatalf("placement labels at initialization: %v (VM on %s in %s)", md.AdditionalLabels, vm.Host, vm.Cluster)
	}
	// Initialized with those labels, as the framework writes them.
	n.Labels = md.AdditionalLabels
	n.Spec.ProviderID = md.ProviderID
	obs, err := e.p.Observe(e.ctx, n)
	must.OK(t, err)
	if len(obs.PlacementLabels) != 0 {
		t.Fatalf("placement drift before any move: %+v", obs.PlacementLabels)
	}
	to, ok := b.OtherHost(vm)
	if !ok {
		t.Fatal("vc-b's cluster has one host only")
	}
	must.OK(t, b.Relocate(e.ctx, vm.Ref, to))
	poll.True(t, "the host label to patch", func() bool {
		obs, err = e.p.Observe(e.ctx, n)
		return err == nil && len(obs.PlacementLabels) == 1 && obs.PlacementLabels[0].Label == provider.LabelHost &&
			obs.PlacementLabels[0].Now != "" && obs.PlacementLabels[0].Now != n.Labels[provider.LabelHost]
	})
}
