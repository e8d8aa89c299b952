// Command bench measures the CCM at scale through the real controllers and
// a real API server: N nodes over 3 simulated vCenters x 2 datacenters.
// It reports the time until every node is initialized, vSphere requests per
// node at initialization and per status-update pass, REST logins after
// start and the CCM's peak RSS, then runs the same with a zero-cost
// provider (answers from memory) and prints the ratio.
//
//	make bench N=1000
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

type result struct {
	initTime       time.Duration
	initRequests   [2]float64 // soap, rest per node
	passRequests   [2]float64 // per node per status pass
	restLogins     float64
	peakRSSKB      int64
	statusInterval time.Duration
}

func main() {
	n := flag.Int("n", 1000, "number of nodes")
	ccm := flag.String("ccm", "bin/vsphere-cloud-controller-manager", "the CCM binary")
	zero := flag.String("zerocost", "bin/zerocost", "the zero-cost CCM binary")
	status := flag.Duration("status-interval", 20*time.Second, "--node-status-update-frequency for both runs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n, *ccm, *zero, *status); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, ccm, zero string, statusInterval time.Duration) error {
	root, _ := os.Getwd()
	work, err := os.MkdirTemp("", "vsphere-ccm-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin, err := controlplane.Binaries(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, bin, filepath.Join(work, "cp"))
	if err != nil {
		return err
	}
	defer cp.Stop()
	// Register nodes as fast as many kubelets would, not at client-go's
	// default 5 requests per second.
	cp.Config.QPS, cp.Config.Burst = 500, 1000
	kube, err := cp.Client()
	if err != nil {
		return err
	}

	perCluster := max(n/6, 1)
	fmt.Printf("building 3 simulated vCenters x 2 datacenters with %d VMs ...\n", perCluster*6)
	start := time.Now()
	var specs []vcsim.Spec
	for _, name := range []string{"vc-a", "vc-b", "vc-c"} {
		specs = append(specs, vcsim.Spec{Name: name, Datacenters: []string{"dc-1", "dc-2"}, Hosts: 2, VMs: perCluster})
	}
	fleet, err := vcsim.Start(ctx, specs...)
	if err != nil {
		return err
	}
	defer fleet.Close()
	answers := map[string]any{}
	for _, v := range fleet.VCenters {
		for _, vm := range v.VMs {
			if err := v.Tag(ctx, "k8s-zone", "zone-"+vm.Cluster, vm.ClusterRef); err != nil {
				return err
			}
			if err := v.Tag(ctx, "k8s-region", "region-"+vm.Datacenter, v.Datacenter(vm.Datacenter)); err != nil {
				return err
			}
			answers[vm.Name] = map[string]string{"providerID": "vsphere://" + vm.UUID, "instanceType": "vsphere-vm.cpu-1.mem-0gb.os-unknown",
				"internalIP": vm.IPv4, "zone": "zone-" + vm.Cluster, "region": "region-" + vm.Datacenter}
		}
	}
	vms := fleet.VMs()
	fmt.Printf("simulated %d VMs in %v\n", len(vms), time.Since(start).Round(time.Second))
	cfgPath := filepath.Join(work, "vsphere.yaml")
	if err := os.WriteFile(cfgPath, []byte(fleet.Config("labels:\n  zone: k8s-zone\n  region: k8s-region\n", nil)), 0o600); err != nil {
		return err
	}
	answersPath := filepath.Join(work, "answers.json")
	b, _ := json.Marshal(answers)
	if err := os.WriteFile(answersPath, b, 0o600); err != nil {
		return err
	}

	ours, err := measure(ctx, cp, kube, vms, ccm, cfgPath, statusInterval, work, true)
	if err != nil {
		return fmt.Errorf("vsphere CCM: %w", err)
	}
	if err := deleteNodes(ctx, kube); err != nil {
		return err
	}
	floor, err := measure(ctx, cp, kube, vms, zero, "--answers="+answersPath, statusInterval, work, false)
	if err != nil {
		return fmt.Errorf("zero-cost CCM: %w", err)
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
	fmt.Printf("%-52s %12.2f   (target <= 1.3 at N=1000)\n", "ratio ours / zero-cost (initialization time)", ours.initTime.Seconds()/floor.initTime.Seconds())
	return nil
}

// measure runs one CCM binary, registers every node, and measures.
func measure(ctx context.Context, cp *controlplane.ControlPlane, kube kubernetes.Interface, vms []vcsim.VM,
	binary, configArg string, statusInterval time.Duration, work string, scrape bool) (result, error) {
	var r result
	args, err := cp.CCMArgs("")
	if err != nil {
		return r, err
	}
	serving := ""
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--cloud-config="):
			if strings.HasPrefix(configArg, "--") {
				args[i] = configArg
			} else {
				args[i] = "--cloud-config=" + configArg
			}
		case strings.HasPrefix(a, "--node-status-update-frequency="):
			args[i] = "--node-status-update-frequency=" + statusInterval.String()
		case strings.HasPrefix(a, "--v="):
			args[i] = "--v=1"
		case strings.HasPrefix(a, "--concurrent-node-syncs="):
			// Both CCMs: enough workers and API budget that the provider, not
			// client-side throttling, decides the time.
			args[i] = "--concurrent-node-syncs=8"
			args = append(args, "--kube-api-qps=200", "--kube-api-burst=400")
		case strings.HasPrefix(a, "--secure-port="):
			serving = "https://127.0.0.1:" + strings.TrimPrefix(a, "--secure-port=")
		}
	}
	logf, err := os.Create(filepath.Join(work, filepath.Base(binary)+".log"))
	if err != nil {
		return r, err
	}
	defer logf.Close()
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return r, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	if err := waitHealthy(ctx, serving); err != nil {
		return r, fmt.Errorf("%w (log %s)", err, logf.Name())
	}
	var before counts
	if scrape {
		// The baseline is taken once the provider has logged in, synced its
		// inventories and filled its tag caches: what follows is per node.
		if err := waitStarted(ctx, serving); err != nil {
			return r, err
		}
		if before, err = scrapeCounts(serving); err != nil {
			return r, err
		}
	}
	fmt.Printf("%s: registering %d nodes ...\n", filepath.Base(binary), len(vms))
	start := time.Now()
	if err := registerAll(ctx, kube, vms); err != nil {
		return r, err
	}
	initialized := func(n *v1.Node) bool {
		return n.Spec.ProviderID != "" && n.Labels["topology.kubernetes.io/zone"] != ""
	}
	if err := controlplane.WaitForNodes(ctx, kube, len(vms), 15*time.Minute, initialized); err != nil {
		return r, err
	}
	r.initTime = time.Since(start)
	fmt.Printf("%s: all initialized in %v\n", filepath.Base(binary), r.initTime.Round(time.Millisecond))
	if scrape {
		after, err := scrapeCounts(serving)
		if err != nil {
			return r, err
		}
		nn := float64(len(vms))
		r.initRequests = [2]float64{(after.soap - before.soap) / nn, (after.rest - before.rest) / nn}
		// Two full status passes, to average the long polls and refreshes in between.
		window := 2 * statusInterval
		fmt.Printf("%s: measuring %v of status passes ...\n", filepath.Base(binary), window)
		time.Sleep(window)
		later, err := scrapeCounts(serving)
		if err != nil {
			return r, err
		}
		r.passRequests = [2]float64{(later.soap - after.soap) / nn / 2, (later.rest - after.rest) / nn / 2}
		r.restLogins = later.restLogins - before.restLogins
	}
	r.peakRSSKB = peakRSS(cmd.Process.Pid)
	return r, nil
}

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
		time.Sleep(200 * time.Millisecond)
	}
}

var insecure = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the benchmark CCM's self-signed serving certificate

func waitHealthy(ctx context.Context, serving string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := insecure.Get(serving + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("the CCM did not become healthy within 2 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitStarted waits until /metrics shows every vCenter up, its inventory
// filled and its tag cache refreshed.
func waitStarted(ctx context.Context, serving string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		res, err := insecure.Get(serving + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			ready := 0
			for _, line := range strings.Split(string(b), "\n") {
				for _, prefix := range []string{"vsphere_ccm_vcenter_up{", "vsphere_ccm_inventory_vms{", "vsphere_ccm_tag_cache_age_seconds{"} {
					if strings.HasPrefix(line, prefix) && !strings.HasSuffix(line, " 0") && !strings.HasSuffix(line, " -1") {
						ready++
					}
				}
			}
			if ready == 9 { // 3 series x 3 vCenters
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("the provider did not report every vCenter started within 5 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type counts struct{ soap, rest, restLogins float64 }

// scrapeCounts sums vsphere_ccm_vcenter_requests_total by API from /metrics.
func scrapeCounts(serving string) (counts, error) {
	var c counts
	res, err := insecure.Get(serving + "/metrics")
	if err != nil {
		return c, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, provider.MetricRequestsTotal+"{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.Contains(line, `api="soap"`):
			c.soap += v
		case strings.Contains(line, `api="rest"`):
			c.rest += v
			if strings.Contains(line, `method="session:post"`) {
				c.restLogins += v
			}
		}
	}
	return c, sc.Err()
}

func peakRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
