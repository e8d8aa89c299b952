package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

type scaleResult struct {
	initTime     time.Duration
	initRequests [2]float64 // soap, rest per node
	passRequests [2]float64 // per node per status pass
	restLogins   float64
	peakRSSKB    int64
}

// scale initializes n nodes over 3 vCenters x 2 datacenters with the CCM,
// then with the zero-cost provider, through the same API server.
func scale(ctx context.Context, e env, n int, zero string, statusInterval time.Duration) ([]report, error) {
	perCluster := max(n/6, 1)
	fmt.Printf("building 3 simulated vCenters x 2 datacenters with %d VMs ...\n", perCluster*6)
	start := time.Now()
	fleet, err := vcsim.Start(ctx, sixDatacenters(perCluster)...)
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	answers := map[string]any{}
	if err := fleet.TagZones(ctx); err != nil {
		return nil, err
	}
	for _, vm := range fleet.VMs() {
		answers[vm.Name] = map[string]string{"providerID": "vsphere://" + vm.UUID, "instanceType": "vsphere-vm.cpu-1.mem-0gb.os-unknown",
			"internalIP": vm.IPv4, "zone": "zone-" + vm.Cluster, "region": "region-" + vm.Datacenter}
	}
	vms := fleet.VMs()
	fmt.Printf("simulated %d VMs in %v\n", len(vms), time.Since(start).Round(time.Second))
	cfgPath := filepath.Join(e.work, "scale.yaml")
	if err := fleet.WriteConfig(cfgPath, vcsim.ZoneLabels, nil); err != nil {
		return nil, err
	}
	answersPath := filepath.Join(e.work, "answers.json")
	b, _ := json.Marshal(answers)
	if err := os.WriteFile(answersPath, b, 0o600); err != nil {
		return nil, err
	}

	ours, err := measureScale(ctx, e, vms, e.ccm, cfgPath, statusInterval, true)
	if err != nil {
		return nil, fmt.Errorf("vsphere CCM: %w", err)
	}
	if err := deleteNodes(ctx, e.kube); err != nil {
		return nil, err
	}
	floor, err := measureScale(ctx, e, vms, zero, "--answers="+answersPath, statusInterval, false)
	if err != nil {
		return nil, fmt.Errorf("zero-cost CCM: %w", err)
	}

	fmt.Printf("\nnodes: %d over 3 vCenters x 2 datacenters; --node-status-update-frequency=%v, --concurrent-node-syncs=8, --kube-api-qps=200\n", len(vms), statusInterval)
	fmt.Printf("%-52s %12s %12s\n", "", "vsphere CCM", "zero-cost")
	fmt.Printf("%-52s %12v %12v\n", "time until every node is initialized", ours.initTime.Round(time.Millisecond), floor.initTime.Round(time.Millisecond))
	fmt.Printf("%-52s %12.3f\n", "vSphere SOAP requests per node at initialization", ours.initRequests[0])
	fmt.Printf("%-52s %12.3f\n", "vSphere REST requests per node at initialization", ours.initRequests[1])
	fmt.Printf("%-52s %12.4f\n", "vSphere SOAP requests per node per status pass", ours.passRequests[0])
	fmt.Printf("%-52s %12.4f\n", "vSphere REST requests per node per status pass", ours.passRequests[1])
	fmt.Printf("%-52s %12.0f\n", "REST logins after start", ours.restLogins)
	fmt.Printf("%-52s %10.1fMB %10.1fMB\n", "peak RSS of the CCM process", float64(ours.peakRSSKB)/1024, float64(floor.peakRSSKB)/1024)
	ratio := ours.initTime.Seconds() / floor.initTime.Seconds()
	fmt.Printf("%-52s %12.2f   (target <= 1.3 at N=1000)\n", "ratio ours / zero-cost (initialization time)", ratio)
	return []report{
		{fmt.Sprintf("scale: init time of %d nodes, ours / zero-cost", len(vms)), fmt.Sprintf("%.2f", ratio), "<= 1.3 at N=1000"},
		{"scale: vSphere requests per node at initialization", fmt.Sprintf("%.3f", ours.initRequests[0]+ours.initRequests[1]), "<= 1"},
		{"scale: vSphere requests per node per status pass", fmt.Sprintf("%.4f", ours.passRequests[0]+ours.passRequests[1]), "<= 0.05"},
	}, nil
}

// measureScale runs one CCM binary, registers every node, and measures.
func measureScale(ctx context.Context, e env, vms []vcsim.VM, binary, configArg string, statusInterval time.Duration, scrape bool) (scaleResult, error) {
	var r scaleResult
	// Both CCMs: enough workers and API budget that the provider, not
	// client-side throttling, decides the time.
	p, err := ccmproc.Start(e.cp, binary, configArg, filepath.Join(e.work, filepath.Base(binary)+".log"), map[string]string{
		"--node-status-update-frequency": statusInterval.String(), "--v": "1", "--concurrent-node-syncs": "8",
		"--kube-api-qps": "200", "--kube-api-burst": "400",
	})
	if err != nil {
		return r, err
	}
	defer p.Stop()
	if err := p.WaitHealthy(ctx); err != nil {
		return r, err
	}
	var before ccmproc.Counts
	if scrape {
		// The baseline is taken once the provider has logged in, synced its
		// inventories and filled its tag caches: what follows is per node.
		if err := p.WaitStarted(ctx, 3, 5*time.Minute); err != nil {
			return r, err
		}
		if before, err = p.ScrapeCounts(); err != nil {
			return r, err
		}
	}
	fmt.Printf("%s: registering %d nodes ...\n", filepath.Base(binary), len(vms))
	start := time.Now()
	if err := registerAll(ctx, e.kube, vms); err != nil {
		return r, err
	}
	if err := controlplane.WaitForNodes(ctx, e.kube, len(vms), 15*time.Minute, initialized); err != nil {
		return r, err
	}
	r.initTime = time.Since(start)
	fmt.Printf("%s: all initialized in %v\n", filepath.Base(binary), r.initTime.Round(time.Millisecond))
	if scrape {
		after, err := p.ScrapeCounts()
		if err != nil {
			return r, err
		}
		nn := float64(len(vms))
		r.initRequests = [2]float64{(after.SOAP - before.SOAP) / nn, (after.REST - before.REST) / nn}
		// Two full status passes, to average the long polls and refreshes in between.
		window := 2 * statusInterval
		fmt.Printf("%s: measuring %v of status passes ...\n", filepath.Base(binary), window)
		time.Sleep(window)
		later, err := p.ScrapeCounts()
		if err != nil {
			return r, err
		}
		r.passRequests = [2]float64{(later.SOAP - after.SOAP) / nn / 2, (later.REST - after.REST) / nn / 2}
		r.restLogins = later.RESTLogins - before.RESTLogins
	}
	r.peakRSSKB = p.PeakRSS()
	return r, nil
}

// sixDatacenters are the specs of 3 vCenters x 2 datacenters with
// perCluster VMs in each datacenter's cluster.
func sixDatacenters(perCluster int) []vcsim.Spec {
	var specs []vcsim.Spec
	for _, name := range []string{"vc-a", "vc-b", "vc-c"} {
		specs = append(specs, vcsim.Spec{Name: name, Datacenters: []string{"dc-1", "dc-2"}, Hosts: 2, VMs: perCluster})
	}
	return specs
}
