package provider_test

import (
	"errors"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"

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

// TestLabelValuePolicy: a datacenter whose name is not a label value
// ("Metro DC (A)") is labelled with the name made valid, at
// initialization and in the labels Observe keeps current, with or
// without labels.placement; the deletion rules read that label as the
// configured datacenter (before, the label was dropped without placement,
// and with it the sanitized label held every deletion as "not
// configured").
func TestLabelValuePolicy(t *testing.T) {
	for _, head := range []string{"", "labels:\n  placement: [datacenter, vcenter]\n"} {
		t.Run(fmt.Sprintf("placement=%v", head != ""), func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-a", Datacenters: []string{"Metro DC (A)"}, Hosts: 1, VMs: 1})
			must.OK(t, err)
			t.Cleanup(f.Close)
			cfg, _, err := config.Parse("test.yaml", []byte(f.Config(head, map[string][]string{"vc-a": {`datacenters: ["Metro DC (A)"]`}})), config.Options{})
			must.OK(t, err)
			p, err := provider.New(cfg, provider.Options{})
			must.OK(t, err)
			must.OK(t, p.Start(ctx, nil))
			t.Cleanup(p.Close)
			must.OK(t, p.WaitForSync(ctx))

			vm := f.VCenter("vc-a").VMs[0]
			n := node(vm)
			md, err := p.InstanceMetadata(ctx, n)
			must.OK(t, err)
			if got := md.AdditionalLabels[provider.LabelDatacenter]; got != "Metro-DC--A" {
				t.Fatalf("datacenter label = %q, want Metro-DC--A (labels %v)", got, md.AdditionalLabels)
			}
			n.Labels, n.Spec.ProviderID = md.AdditionalLabels, md.ProviderID
			must.OK(t, p.InScope(n))
			obs, err := p.Observe(ctx, n)
			must.OK(t, err)
			if len(obs.PlacementLabels) != 0 {
				t.Errorf("labels to patch right after initialization: %+v", obs.PlacementLabels)
			}
			other := n.DeepCopy()
			other.Labels[provider.LabelDatacenter] = provider.LabelValue("Metro DC (B)")
			var nc *provider.NotConfiguredError
			if err := p.InScope(other); !errors.As(err, &nc) || nc.Datacenter != "Metro-DC--B" {
				t.Errorf("a Node labelled with another datacenter: InScope = %v, want NotConfiguredError for Metro-DC--B", err)
			}
		})
	}
}

// TestInScopeNamesMadeEqual: two configured vCenters whose names are made
// the same label value ("vc 1" and "vc-1") are both candidates for a Node
// labelled vc-1: it is in scope if its datacenter is in either.
func TestInScopeNamesMadeEqual(t *testing.T) {
	text := "vcenter:\n" +
		"  \"vc 1\":\n    server: vc1.example.com\n    user: u\n    password: p\n    insecureFlag: true\n    datacenters: [dc-a]\n" +
		"  vc-1:\n    server: vc-1.example.com\n    user: u\n    password: p\n    insecureFlag: true\n    datacenters: [dc-b]\n"
	cfg, _, err := config.Parse("test.yaml", []byte(text), config.Options{})
	must.OK(t, err)
	p, err := provider.New(cfg, provider.Options{})
	must.OK(t, err)
	for dc, in := range map[string]bool{"dc-a": true, "dc-b": true, "dc-c": false} {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{provider.LabelVCenter: "vc-1", provider.LabelDatacenter: dc}}}
		var nc *provider.NotConfiguredError
		if err := p.InScope(n); in != (err == nil) || (!in && (!errors.As(err, &nc) || nc.Datacenter != dc)) {
			t.Errorf("datacenter %s: InScope = %v, want in scope %v", dc, err, in)
		}
	}
}
