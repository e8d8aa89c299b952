package provider_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// BenchmarkInstanceMetadata measures InstanceMetadata over 3 vCenters x 2
// datacenters with BENCH_VMS VMs in total (default 2000), zones on
// clusters and regions on datacenters. It reports vSphere requests per
// call (counted on the wire) and REST logins after start. Memory is not
// measured here: the simulators share the process (their property
// collectors keep a copy of every object they report); the bench's bigvc
// scenario measures the CCM process. Building the simulated inventory
// takes about a minute.
func BenchmarkInstanceMetadata(b *testing.B) {
	total := 2000
	if s := os.Getenv("BENCH_VMS"); s != "" {
		total, _ = strconv.Atoi(s)
	}
	perCluster := max(total/(3*2), 1)
	ctx := klog.NewContext(context.Background(), logr.Discard())
	var specs []vcsim.Spec
	for _, name := range []string{"vc-a", "vc-b", "vc-c"} {
		specs = append(specs, vcsim.Spec{Name: name, Datacenters: []string{"dc-1", "dc-2"}, Hosts: 2, VMs: perCluster})
	}
	build := time.Now()
	f, err := vcsim.Start(ctx, specs...)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.TagZones(ctx); err != nil {
		b.Fatal(err)
	}
	vms := f.VMs()
	b.Logf("simulated %d VMs in %v", len(vms), time.Since(build).Round(time.Second))

	cfg, _, err := config.Parse("bench.yaml", []byte(f.Config("labels:\n  zone: k8s-zone\n  region: k8s-region\n", nil)), config.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var counter vcsim.Counter
	p, err := provider.New(cfg, provider.Options{VCenter: vcenter.Options{WrapTransport: counter.Wrap}})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(ctx, nil); err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.WaitForSync(ctx); err != nil {
		b.Fatal(err)
	}
	atStart := counter.Snapshot()

	// run measures call over every VM in turn, its Node with or without
	// a providerID, and reports the requests it made.
	run := func(name string, withProviderID bool, call func(b *testing.B, vm vcsim.VM, n *v1.Node)) {
		b.Run(fmt.Sprintf("%s/vms=%d", name, len(vms)), func(b *testing.B) {
			start := counter.Snapshot()
			for i := 0; b.Loop(); i++ {
				vm := vms[i%len(vms)]
				n := node(vm)
				if withProviderID {
					n.Spec.ProviderID = "vsphere://" + vm.UUID
				}
				call(b, vm, n)
			}
			d := counter.Snapshot().Sub(start)
			b.ReportMetric(float64(d.Total())/float64(b.N), "requests/op")
			b.ReportMetric(float64(counter.Snapshot().Sub(atStart).RESTLogins), "rest-logins-after-start")
		})
	}
	metadata := func(b *testing.B, vm vcsim.VM, n *v1.Node) {
		md, err := p.InstanceMetadata(ctx, n)
		if err != nil {
			b.Fatal(err)
		}
		if md.Zone != "zone-"+vm.Cluster {
			b.Fatalf("%s: zone %s", vm.Name, md.Zone)
		}
	}
	run("first-lookup-by-systemUUID", false, metadata)
	run("steady-by-providerID", true, metadata)
	// The framework's node lifecycle controller asks these of every Node
	// that is not Ready, every --node-monitor-period.
	run("lifecycle-by-providerID", true, func(b *testing.B, vm vcsim.VM, n *v1.Node) {
		if ok, err := p.InstanceExists(ctx, n); err != nil || !ok {
			b.Fatalf("%s: exists %v, %v", vm.Name, ok, err)
		}
		if off, err := p.InstanceShutdown(ctx, n); err != nil || off {
			b.Fatalf("%s: shutdown %v, %v", vm.Name, off, err)
		}
	})
	// The node-topology controller observes a Node on each of its
	// changes, and every Node on an inventory change.
	run("observe-by-providerID", true, func(b *testing.B, vm vcsim.VM, n *v1.Node) {
		o, err := p.Observe(ctx, n)
		if err != nil {
			b.Fatal(err)
		}
		if o.Topology.Zone == nil || o.Topology.Zone.Value != "zone-"+vm.Cluster {
			b.Fatalf("%s: zone %v", vm.Name, o.Topology.Zone)
		}
	})
	b.Logf("start-up: %d SOAP + %d REST requests, %d REST logins for %d VMs", atStart.SOAP, atStart.REST, atStart.RESTLogins, len(vms))
}
