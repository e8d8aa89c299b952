package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// spreadFleet starts vcenters simulated vCenters of 10 clusters x 2 hosts and
// vmsPer VMs each (copies, fast to make), every SOAP call delayed by
// latency, their clusters and datacenters tagged with zones and regions,
// and picks nodes of the VMs, spread evenly over every vCenter and cluster.
func spreadFleet(ctx context.Context, vcenters, vmsPer, nodes int, latency time.Duration) (*vcsim.Fleet, []vcsim.VM, error) {
	const clusters = 10
	perCluster := max(vmsPer/clusters, 1)
	fmt.Printf("building %d simulated vCenters x %d VMs ...\n", vcenters, perCluster*clusters)
	start := time.Now()
	var specs []vcsim.Spec
	for i := range vcenters {
		specs = append(specs, vcsim.Spec{Name: fmt.Sprintf("vc-%02d", i), Clusters: clusters, Hosts: 2, VMs: 1, Copies: perCluster - 1,
			Latency: latency})
	}
	fleet, err := vcsim.Start(ctx, specs...)
	if err != nil {
		return nil, nil, err
	}
	if err := fleet.TagZones(ctx); err != nil {
		fleet.Close()
		return nil, nil, err
	}
	var chosen []vcsim.VM
	perVC := max(nodes/vcenters, 1)
	for _, v := range fleet.VCenters {
		step := max(len(v.VMs)/perVC, 1)
		for i, n := 0, 0; i < len(v.VMs) && n < perVC; i, n = i+step, n+1 {
			chosen = append(chosen, v.VMs[i])
		}
	}
	fmt.Printf("simulated %d VMs in %v; %d of them are Nodes\n", len(fleet.VMs()), time.Since(start).Round(time.Second), len(chosen))
	return fleet, chosen, nil
}

// writeAnswers writes what the zero-cost provider answers for vms (as
// the fleet made them) to path.
func writeAnswers(path string, vms []vcsim.VM) error {
	answers := map[string]any{}
	for _, vm := range vms {
		answers[vm.Name] = map[string]string{"providerID": "vsphere://" + vm.UUID, "instanceType": "vsphere-vm.cpu-1.mem-0gb.os-unknown",
			"internalIP": vm.IPv4, "zone": "zone-" + vm.Cluster, "region": "region-" + vm.Datacenter}
	}
	b, err := json.Marshal(answers)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// pinApart puts this process (the simulated vCenters, the kubelets'
// writes) on CPU 0 and the API server and etcd on the others, and sets
// e.pinCCM so that the CCMs started go there too, as on separate
// machines. It returns the undo, and false when not asked (on) or with
// fewer than 2 CPUs.
func pinApart(e *env, on bool) (func(), bool, error) {
	if !on || runtime.NumCPU() < 2 {
		return func() {}, false, nil
	}
	others := make([]int, 0, runtime.NumCPU()-1)
	for c := 1; c < runtime.NumCPU(); c++ {
		others = append(others, c)
	}
	for _, pid := range e.cp.PIDs() {
		if err := pin(pid, others...); err != nil {
			return nil, false, err
		}
	}
	if err := pin(os.Getpid(), 0); err != nil {
		return nil, false, err
	}
	e.pinCCM = others
	fmt.Printf("pinned: simulators and registration on CPU 0; API server, etcd and CCM on CPU %v\n", others)
	return func() {
		_ = pin(os.Getpid())
		for _, pid := range e.cp.PIDs() {
			_ = pin(pid)
		}
		e.pinCCM = nil
	}, true, nil
}
