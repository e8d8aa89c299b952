package provider_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestHostGroupZonesCostNoRequests: zones from DRS host groups come from
// the inventory's own collector: once synced, InstanceMetadata of every
// Node of a stretched cluster makes no vSphere request, however often it
// is called (the count may include the inventory's own long poll).
func TestHostGroupZonesCostNoRequests(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-s", Hosts: 2, VMs: 4})
	must.OK(t, err)
	defer f.Close()
	v := f.VCenter("vc-s")
	cluster := v.VMs[0].ClusterRef
	hosts := v.ClusterHosts(cluster)
	sites := []vcsim.Site{{Name: "site-a", Hosts: hosts[:1]}, {Name: "site-b", Hosts: hosts[1:]}}
	for i, vm := range v.VMs {
		must.OK(t, v.Relocate(ctx, vm.Ref, hosts[i%2]))
		sites[i%2].VMs = append(sites[i%2].VMs, vm.Ref)
	}
	must.OK(t, v.Stretch(ctx, cluster, sites...))
	text := f.Config(fmt.Sprintf("labels:\n  zone: k8s-zone\nhostGroupZones:\n- cluster: %q\n  hostGroupPattern: ^(site-[ab])-hosts$\n  region: metro\n", v.VMs[0].Cluster), nil)
	cfg, _, err := config.Parse("hg.yaml", []byte(text), config.Options{})
	must.OK(t, err)
	var counter vcsim.Counter
	p, err := provider.New(cfg, provider.Options{VCenter: vcenter.Options{WrapTransport: counter.Wrap}})
	must.OK(t, err)
	must.OK(t, p.Start(ctx, nil))
	defer p.Close()
	must.OK(t, p.WaitForSync(ctx))
	check := func() {
		for i, vm := range v.VMs {
			md, err := p.InstanceMetadata(ctx, node(vm))
			must.OK(t, err)
			if want := map[int]string{0: "site-a", 1: "site-b"}[i%2]; md.Zone != want || md.Region != "metro" {
				t.Fatalf("%s: zone %q region %q, want %s and metro", vm.Name, md.Zone, md.Region, want)
			}
		}
	}
	check() // the first lookups may wait for the details of a just-read vCenter
	before := counter.Snapshot()
	const passes = 50
	for range passes {
		check()
	}
	// The inventory's own long poll may start once more while the loop
	// runs (the poll that brought the first details returns and is
	// renewed); a request per lookup would be 200.
	if d := counter.Snapshot().Sub(before); d.Total() > 2 {
		t.Errorf("%d vSphere requests for %d lookups of host-group zones, want none beyond the inventory's long poll", d.Total(), passes*len(v.VMs))
	}
}
