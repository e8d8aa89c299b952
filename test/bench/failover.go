package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// Leader election as shipped (the defaults of the controller manager).
const (
	leaseDuration = 15 * time.Second
	leaseAcquired = "Successfully acquired lease"
)

// failover runs two replicas with leader election; once the leader has
// initialized the first Nodes it is killed with SIGKILL (no lease release,
// no logout) and Nodes registered right after are timed.
func failover(ctx context.Context, e env) ([]report, error) {
	fleet, cfgPath, err := smallFleet(ctx, e, "failover")
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	var first, later []vcsim.VM
	for _, v := range fleet.VCenters {
		first = append(first, v.VMs[:5]...)
		later = append(later, v.VMs[5:]...)
	}
	le := map[string]string{"--v": "2", "--leader-elect": "true", "--leader-elect-lease-duration": leaseDuration.String()}
	var replicas []*ccmproc.Process
	for i := range 2 {
		p, err := ccmproc.Start(e.cp, e.ccm, cfgPath, filepath.Join(e.work, fmt.Sprintf("failover-%d.log", i)), le)
		if err != nil {
			return nil, err
		}
		defer p.Stop()
		replicas = append(replicas, p)
	}
	if err := registerAll(ctx, e.kube, first); err != nil {
		return nil, err
	}
	if _, err := initTimes(ctx, e.kube, first, time.Now(), 2*time.Minute); err != nil {
		return nil, err
	}
	var leader *ccmproc.Process
	for _, p := range replicas {
		if p.LogContains(leaseAcquired) {
			leader = p
		}
	}
	if leader == nil {
		return nil, fmt.Errorf("no replica logged %q", leaseAcquired)
	}
	sessions := ""
	for _, v := range fleet.VCenters {
		n, err := v.CountSessions(ctx)
		if err != nil {
			return nil, err
		}
		sessions += fmt.Sprintf(" %s:%d", v.Name, n)
	}
	fmt.Printf("leader %s; SOAP sessions of the CCM per vCenter (both replicas running):%s\n", leader, sessions)

	killed := time.Now()
	leader.Kill()
	if err := registerAll(ctx, e.kube, later); err != nil {
		return nil, err
	}
	times, err := initTimes(ctx, e.kube, later, killed, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	took := quantile(times, 1)
	fmt.Printf("leader killed: %d Nodes registered right after initialized %s later (lease duration %v)\n", len(later), seconds(took), leaseDuration)
	return []report{
		{fmt.Sprintf("failover: leader killed -> new Nodes initialized (lease %v)", leaseDuration), seconds(took), fmt.Sprintf("<= %v", leaseDuration+10*time.Second)},
		{"failover: CCM SOAP sessions per vCenter, leader + standby", sessions, "1 each (standby: 0)"},
	}, nil
}
