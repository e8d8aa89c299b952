package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// drift measures how long after a vMotion to another zone its Node gets
// the TopologyDrift event, with the controller manager's default
// --node-status-update-frequency (5 minutes): the node-topology controller
// must see it from the inventory, not from a status pass.
func drift(ctx context.Context, e env) ([]report, error) {
	fleet, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1"}, Clusters: 2, Hosts: 2, VMs: 10})
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	if err := fleet.TagZones(ctx); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(e.work, "drift.yaml")
	if err := fleet.WriteConfig(cfgPath, vcsim.ZoneLabels, nil); err != nil {
		return nil, err
	}
	p, err := ccmproc.Start(e.cp, e.ccm, cfgPath, filepath.Join(e.work, "drift.log"), map[string]string{"--node-status-update-frequency": "5m"})
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	a := fleet.VCenter("vc-a")
	if err := registerAll(ctx, e.kube, a.VMs); err != nil {
		return nil, err
	}
	if _, err := initTimes(ctx, e.kube, a.VMs, time.Now(), 2*time.Minute); err != nil {
		return nil, err
	}
	// Every VM of cluster c0 moves to a host of cluster c1: another zone.
	var target vcsim.VM
	var movers []vcsim.VM
	for _, vm := range a.VMs {
		if vm.Cluster == "vc-a-dc-1-c1" {
			target = vm
		} else {
			movers = append(movers, vm)
		}
	}
	if target.Name == "" || len(movers) == 0 {
		return nil, fmt.Errorf("drift: the fleet has no two clusters")
	}
	moved := map[string]time.Time{}
	for _, vm := range movers {
		if err := a.Relocate(ctx, vm.Ref, target.HostRef); err != nil {
			return nil, err
		}
		moved[vm.Name] = time.Now()
	}
	var took []time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	for len(moved) > 0 {
		evs, err := e.kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", nodetopology.ReasonTopologyDrift).String()})
		if err != nil {
			return nil, err
		}
		for _, ev := range evs.Items {
			if at, ok := moved[ev.InvolvedObject.Name]; ok {
				took = append(took, time.Since(at)) // seen by this 200 ms poll: an upper bound
				delete(moved, ev.InvolvedObject.Name)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("drift: %d of %d moved VMs without a TopologyDrift event after 2 minutes", len(moved), len(movers))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	slices.Sort(took)
	worst := quantile(took, 1)
	fmt.Printf("drift: %d VMs moved to another zone; TopologyDrift seen after at most %s (median %s; polled every 200 ms)\n",
		len(movers), seconds(worst), seconds(quantile(took, 0.5)))
	return []report{{"drift: vMotion to another zone -> TopologyDrift event (default status frequency)", seconds(worst), "<= 30 s"}}, nil
}
