package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// initialized is the benchmarks' test for an initialized Node.
var errTimeout = errors.New("timed out")

func initialized(n *v1.Node) bool {
	return n.Spec.ProviderID != "" && n.Labels["topology.kubernetes.io/zone"] != ""
}

// registerAll registers a Node per VM, 16 at a time, as many kubelets would.
func registerAll(ctx context.Context, kube kubernetes.Interface, vms []vcsim.VM) error {
	work := make(chan vcsim.VM)
	errs := make(chan error, len(vms))
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for vm := range work {
				if err := controlplane.RegisterNode(ctx, kube, vm.Name, strings.ToUpper(vm.UUID)); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, vm := range vms {
		work <- vm
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

func deleteNodes(ctx context.Context, kube kubernetes.Interface) error {
	if err := kube.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	for {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// initTimes waits until every VM's Node is initialized and returns, per
// VM, how long after since it was first seen initialized (polled every
// 50 ms).
func initTimes(ctx context.Context, kube kubernetes.Interface, vms []vcsim.VM, since time.Time, timeout time.Duration) ([]time.Duration, error) {
	want := map[string]bool{}
	for _, vm := range vms {
		want[vm.Name] = true
	}
	var out []time.Duration
	deadline := time.Now().Add(timeout)
	for len(want) > 0 {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		now := time.Since(since)
		for i := range list.Items {
			n := &list.Items[i]
			if want[n.Name] && initialized(n) {
				delete(want, n.Name)
				out = append(out, now)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %d of %d nodes not initialized after %v", errTimeout, len(want), len(vms), timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	slices.Sort(out)
	return out, nil
}

// quantile of sorted durations (q in [0,1]).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// smallFleet starts 3 tagged vCenters with 10 VMs each and writes their
// cloud config as <name>.yaml in the work directory.
func smallFleet(ctx context.Context, e env, name string) (*vcsim.Fleet, string, error) {
	fleet, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 10},
		vcsim.Spec{Name: "vc-b", Hosts: 1, VMs: 10},
		vcsim.Spec{Name: "vc-c", Hosts: 1, VMs: 10})
	if err != nil {
		return nil, "", err
	}
	cfgPath := filepath.Join(e.work, name+".yaml")
	if err := fleet.TagZones(ctx); err != nil {
		fleet.Close()
		return nil, "", err
	}
	if err := fleet.WriteConfig(cfgPath, vcsim.ZoneLabels, nil); err != nil {
		fleet.Close()
		return nil, "", err
	}
	return fleet, cfgPath, nil
}
