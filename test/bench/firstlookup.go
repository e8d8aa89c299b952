package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
)

// defaultControllerFlags are the framework's defaults, where the control
// plane's CCM flags (tuned for tests) differ.
var defaultControllerFlags = map[string]string{
	"--concurrent-node-syncs": "1", "--node-status-update-frequency": "5m0s", "--node-monitor-period": "5s"}

// firstLookup measures the first lookups in a vCenter too big to keep every
// VM's details (above the inventory's eager limit of 5,000): nodes Nodes
// among small and big VMs, default controller flags, no added latency; the
// time from the CCM's start until every Node is initialized. Each Node's
// first lookup reads its VM's details directly, so the big vCenter costs
// only its longer identity read, not a wait per Node.
func firstLookup(ctx context.Context, e env, small, big, nodes int) ([]report, error) {
	var times, spread [2]time.Duration // all initialized; first to last
	for i, vms := range []int{small, big} {
		fleet, chosen, cfgPath, err := bigFleet(ctx, e, vms, nodes, 0, "global: {}\n")
		if err != nil {
			return nil, err
		}
		all := len(fleet.VMs())
		if err := registerAll(ctx, e.kube, chosen); err != nil {
			fleet.Close()
			return nil, err
		}
		set := map[string]string{}
		for k, v := range defaultControllerFlags {
			set[k] = v
		}
		p, err := ccmproc.Start(e.cp, e.ccm, cfgPath, filepath.Join(e.work, fmt.Sprintf("firstlookup-%d.log", all)), set)
		if err != nil {
			fleet.Close()
			return nil, err
		}
		start := time.Now()
		ts, err := initTimes(ctx, e.kube, chosen, start, 10*time.Minute)
		p.Stop()
		fleet.Close()
		if err != nil {
			return nil, fmt.Errorf("%d VMs: %w (log %s)", all, err, p.LogPath())
		}
		times[i] = quantile(ts, 1)
		spread[i] = times[i] - quantile(ts, 0)
		fmt.Printf("%d VMs: %d Nodes initialized %s after the CCM started (first %s)\n", all, len(chosen), seconds(times[i]), seconds(quantile(ts, 0)))
		if err := deleteNodes(ctx, e.kube); err != nil {
			return nil, err
		}
	}
	return []report{
		{fmt.Sprintf("firstlookup: %d Nodes of %d VMs initialized, default flags", nodes, small), seconds(times[0]), ""},
		{fmt.Sprintf("firstlookup: %d Nodes of %d VMs initialized, default flags", nodes, big), seconds(times[1]), ""},
		{fmt.Sprintf("firstlookup: ratio %d VMs / %d VMs", big, small), fmt.Sprintf("%.2f", times[1].Seconds()/times[0].Seconds()), "<= 1.2"},
		// The first Node waits for the vCenter's first read (its ancestry
		// gives the zone); from then on each Node's lookup is one read.
		{fmt.Sprintf("firstlookup: ratio %d / %d VMs, first to last Node", big, small), fmt.Sprintf("%.2f", spread[1].Seconds()/spread[0].Seconds()), ""},
	}, nil
}
