package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// siteOutage is how long the lost vCenter stays away after the CCM
// starts: long enough for its reconnect back-off to reach its cap (8 s).
const siteOutage = 30 * time.Second

// site measures a site that is down while the CCM starts: 3 vCenters x 10
// Nodes; the time until the healthy vCenters' Nodes are initialized with
// vc-b black-holed, against all healthy; and the time from vc-b's return
// (black-holed, then refusing connections) to its Nodes initialized.
func site(ctx context.Context, e env) ([]report, error) {
	fleet, cfgPath, err := smallFleet(ctx, e, "site")
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	b := fleet.VCenter("vc-b")
	healthy := append(append([]vcsim.VM(nil), fleet.VCenter("vc-a").VMs...), fleet.VCenter("vc-c").VMs...)

	// run starts the CCM with vc-b in mode, times the healthy Nodes, then
	// (unless vc-b is up) brings vc-b back after siteOutage and times its Nodes.
	run := func(mode vcsim.FrontMode) (healthyInit, returned time.Duration, err error) {
		if err := b.SetMode(mode); err != nil {
			return 0, 0, err
		}
		defer func() { _ = b.SetMode(vcsim.Up) }()
		if err := registerAll(ctx, e.kube, fleet.VMs()); err != nil {
			return 0, 0, err
		}
		defer func() { _ = deleteNodes(ctx, e.kube) }()
		p, err := ccmproc.Start(e.cp, e.ccm, cfgPath, filepath.Join(e.work, "site-"+mode.String()+".log"), map[string]string{"--v": "2"})
		if err != nil {
			return 0, 0, err
		}
		defer p.Stop()
		start := time.Now()
		times, err := initTimes(ctx, e.kube, healthy, start, 5*time.Minute)
		if err != nil {
			return 0, 0, err
		}
		healthyInit = quantile(times, 1)
		fmt.Printf("vc-b %s at start: the other vCenters' %d Nodes initialized %s after the CCM started (p50 %s)\n",
			mode, len(healthy), seconds(healthyInit), seconds(quantile(times, 0.5)))
		if mode == vcsim.Up {
			return healthyInit, 0, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(time.Until(start.Add(siteOutage))):
		}
		if err := b.SetMode(vcsim.Up); err != nil {
			return 0, 0, err
		}
		back := time.Now()
		times, err = initTimes(ctx, e.kube, b.VMs, back, 5*time.Minute)
		if err != nil {
			return 0, 0, err
		}
		returned = quantile(times, 1)
		fmt.Printf("vc-b %s for %v: its %d Nodes initialized %s after it returned (p50 %s)\n",
			mode, siteOutage, len(b.VMs), seconds(returned), seconds(quantile(times, 0.5)))
		return healthyInit, returned, nil
	}

	allUp, _, err := run(vcsim.Up)
	if err != nil {
		return nil, fmt.Errorf("all healthy: %w", err)
	}
	hungInit, hungBack, err := run(vcsim.Hung)
	if err != nil {
		return nil, fmt.Errorf("vc-b black-holed: %w", err)
	}
	_, downBack, err := run(vcsim.Down)
	if err != nil {
		return nil, fmt.Errorf("vc-b refusing: %w", err)
	}
	return []report{
		{"site: healthy Nodes initialized, vc-b black-holed at start / all healthy",
			fmt.Sprintf("%.2f", hungInit.Seconds()/allUp.Seconds()), fmt.Sprintf("<= 1.5 (%s / %s)", seconds(hungInit), seconds(allUp))},
		{"site: vc-b back after black-holed 30 s: its Nodes initialized after", seconds(hungBack), "<= 20 s"},
		{"site: vc-b back after refusing 30 s: its Nodes initialized after", seconds(downBack), "<= 20 s"},
	}, nil
}
