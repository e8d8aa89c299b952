package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// bigRequestTimeout is the CCM's requestTimeout in the bigvc scenario:
// shorter than the whole first read at the given delay.
const bigRequestTimeout = 10 * time.Second

// bigVC syncs a vCenter with vms VMs, nodes of them Nodes, every SOAP call
// delayed, and reports the time until every Node is initialized and the
// CCM's peak RSS; then the same Nodes in a vCenter that holds only them,
// for the baseline.
func bigVC(ctx context.Context, e env, vms, nodes int, delay time.Duration) ([]report, error) {
	type run struct {
		vms        int
		peakRSSKB  int64
		initTime   time.Duration
		readFloorS float64
	}
	runs := []*run{{vms: nodes}, {vms: vms}}
	for _, r := range runs {
		fleet, chosen, cfgPath, err := bigFleet(ctx, e, r.vms, nodes, delay, fmt.Sprintf("global:\n  requestTimeout: %v\n", bigRequestTimeout))
		if err != nil {
			return nil, err
		}
		all := fleet.VMs()
		// The simulator pages WaitForUpdatesEx at 100 objects: the whole read
		// takes at least pages x delay.
		r.readFloorS = float64((len(all)+99)/100) * delay.Seconds()
		if err := registerAll(ctx, e.kube, chosen); err != nil {
			fleet.Close()
			return nil, err
		}
		p, err := ccmproc.Start(e.cp, e.ccm, cfgPath, filepath.Join(e.work, fmt.Sprintf("bigvc-%d.log", len(all))), map[string]string{
			"--v": "2", "--concurrent-node-syncs": "8", "--kube-api-qps": "200", "--kube-api-burst": "400"})
		if err != nil {
			fleet.Close()
			return nil, err
		}
		start := time.Now()
		times, err := initTimes(ctx, e.kube, chosen, start, 15*time.Minute)
		if err == nil {
			r.initTime = quantile(times, 1)
			// Memory after the sync and a tag refresh, not only at its peak.
			err = p.WaitStarted(ctx, 1, 5*time.Minute)
			r.peakRSSKB = p.PeakRSS()
			fmt.Printf("%d VMs: now RssAnon %.1f MB, RssFile %.1f MB (binary and libraries); Go heap in use %.1f MB, next GC at %.1f MB\n",
				len(all), float64(p.Status("RssAnon"))/1024, float64(p.Status("RssFile"))/1024,
				p.Gauge("go_memstats_heap_inuse_bytes")/(1<<20), p.Gauge("go_memstats_next_gc_bytes")/(1<<20))
		}
		p.Stop()
		fleet.Close()
		if err != nil {
			return nil, fmt.Errorf("%d VMs: %w (log %s)", len(all), err, p.LogPath())
		}
		r.vms = len(all)
		fmt.Printf("%d VMs: %d Nodes initialized %s after the CCM started (the read alone takes >= %.1f s; requestTimeout %v); peak RSS %.1f MB\n",
			len(all), len(chosen), seconds(r.initTime), r.readFloorS, bigRequestTimeout, float64(r.peakRSSKB)/1024)
		if err := deleteNodes(ctx, e.kube); err != nil {
			return nil, err
		}
	}
	small, big := runs[0], runs[1]
	return []report{
		{fmt.Sprintf("bigvc: %d Nodes of %d VMs initialized (read >= %.0f s, requestTimeout %v)", nodes, big.vms, big.readFloorS, bigRequestTimeout), seconds(big.initTime), "syncs"},
		{fmt.Sprintf("bigvc: peak RSS with %d VMs", big.vms), fmt.Sprintf("%.1f MB", float64(big.peakRSSKB)/1024), "<= 100 MB"},
		{fmt.Sprintf("bigvc: peak RSS with %d VMs (only the Nodes)", small.vms), fmt.Sprintf("%.1f MB", float64(small.peakRSSKB)/1024), ""},
	}, nil
}

// bigFleet starts a tagged simulated vCenter with about vms VMs in 10
// clusters, every SOAP call delayed, and writes its cloud config (global
// first, then zone and region labels) in the work directory; chosen are
// nodes VMs spread over it.
func bigFleet(ctx context.Context, e env, vms, nodes int, delay time.Duration, global string) (*vcsim.Fleet, []vcsim.VM, string, error) {
	const clusters = 10
	perCluster := max(vms/clusters, 1)
	fmt.Printf("building a simulated vCenter with %d VMs in %d clusters, %v per SOAP call ...\n", perCluster*clusters, clusters, delay)
	start := time.Now()
	fleet, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-big", Clusters: clusters, Hosts: 2, VMs: 1, Copies: perCluster - 1, Latency: delay})
	if err != nil {
		return nil, nil, "", err
	}
	if err := fleet.TagZones(ctx); err != nil {
		fleet.Close()
		return nil, nil, "", err
	}
	all := fleet.VMs()
	step := max(len(all)/nodes, 1)
	var chosen []vcsim.VM
	for i := 0; i < len(all) && len(chosen) < nodes; i += step {
		chosen = append(chosen, all[i])
	}
	fmt.Printf("simulated %d VMs in %v; %d of them are Nodes\n", len(all), time.Since(start).Round(time.Second), len(chosen))
	cfgPath := filepath.Join(e.work, fmt.Sprintf("big-%d.yaml", len(all)))
	if err := fleet.WriteConfig(cfgPath, global+vcsim.ZoneLabels, nil); err != nil {
		fleet.Close()
		return nil, nil, "", err
	}
	return fleet, chosen, cfgPath, nil
}
