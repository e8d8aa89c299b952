// Command bench measures the CCM through the real controllers and a real
// API server, in scenarios:
//
//   - scale: N nodes over 3 simulated vCenters x 2 datacenters: the time
//     until every node is initialized, vSphere requests per node at
//     initialization and per status-update pass, REST logins after start
//     and peak RSS, next to a zero-cost provider (answers from memory).
//
//   - site: 3 vCenters x 10 nodes; the healthy vCenters' nodes initialized
//     with one vCenter black-holed at start versus all healthy, and the
//     seconds from that vCenter's return (black-holed, then refusing) to
//     its nodes initialized, with the reconnect back-off at its cap.
//
//   - failover: two replicas with leader election; the leader is killed
//     with SIGKILL and a Node registered afterwards is timed.
//
//   - bigvc: one vCenter with 40,000 VMs of which 100 are Nodes, every SOAP
//     call slowed so that the whole first read cannot fit in requestTimeout:
//     time to sync and peak RSS.
//
//   - hundredk: 5,000 Nodes among 10 simulated vCenters x 10,000 VMs
//     (-hk-vcenters, -hk-vms, -hk-nodes), the fast controller flags, next
//     to the zero-cost provider: the ratio (p50, p100), requests per Node,
//     logins, the CPU of each process and the CCM's RSS; -hk-profile adds
//     the CCM's CPU and block profiles. Minutes; make bench runs it.
//
//   - csr: N Nodes with serving certificate approval on; every kubelet asks
//     for a serving certificate at once: creation-to-approval times, the
//     CCM's CPU and the vSphere requests made per request beyond the
//     inventory's long polls; -csr-cold asks at registration, while the
//     Nodes initialize (the requests wait and are retried).
//
//   - day: the steady state. 5,000 Nodes among 10 simulated vCenters x
//     10,000 VMs initialized, then 30 minutes (-day-duration; -day-duration
//     24h for a day) of seeded churn (VMs powered off and on, created and
//     destroyed; Node VMs moved, some across zones, readdressed, destroyed;
//     tags edited) at the framework's default status period, for this CCM,
//     the reference CCM (built from hack/refnode's module) and the
//     zero-cost provider in turn: per hour, median [range] over rounds
//     (-day-window), CPU, the vSphere requests the simulators answered by
//     method, API writes by kind and those that changed nothing, the delay
//     from a change to the Node, RSS and its slope, goroutines.
//
//   - firstlookup: 50 Nodes among 2,000 and among 20,000 VMs (above the
//     inventory's eager limit: details are read at each Node's first
//     lookup), default controller flags: the time until every Node is
//     initialized, and its ratio.
//
//     make bench N=1000
//     go run ./test/bench -scenarios site,failover
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
)

// env is what every scenario gets.
type env struct {
	cp   *controlplane.ControlPlane
	kube kubernetes.Interface
	work string
	ccm  string // the CCM binary
	// pinCCM, if set, are the CPUs each CCM process is pinned to.
	pinCCM []int
}

// report is one line of the final summary.
type report struct{ measure, value, target string }

func main() {
	scenarios := flag.String("scenarios", "scale", "comma-separated scenarios to run: scale, site, failover, drift, bigvc, firstlookup, csr, hundredk, day")
	n := flag.Int("n", 1000, "scale: number of nodes")
	ccm := flag.String("ccm", "bin/vsphere-cloud-controller-manager", "the CCM binary")
	zero := flag.String("zerocost", "bin/zerocost", "scale: the zero-cost CCM binary")
	status := flag.Duration("status-interval", 20*time.Second, "scale: --node-status-update-frequency for both runs")
	bigVMs := flag.Int("big-vms", 40000, "bigvc: VMs in the vCenter")
	bigNodes := flag.Int("big-nodes", 100, "bigvc: how many of them are Nodes")
	bigDelay := flag.Duration("big-delay", 50*time.Millisecond, "bigvc: delay of every SOAP call")
	hk := hundredKOptions{}
	flag.IntVar(&hk.vcenters, "hk-vcenters", 10, "hundredk: simulated vCenters")
	flag.IntVar(&hk.vmsPer, "hk-vms", 10000, "hundredk: VMs per vCenter")
	flag.IntVar(&hk.nodes, "hk-nodes", 5000, "hundredk: Nodes among them")
	flag.BoolVar(&hk.profile, "hk-profile", false, "hundredk: CPU, block and mutex profiles of the CCM during initialization")
	flag.BoolVar(&hk.cold, "hk-cold", false, "hundredk: register the Nodes as soon as the CCM is healthy, while it reads its inventories")
	flag.IntVar(&hk.runs, "hk-runs", 3, "hundredk: rounds (each: the CCM, the baseline if any, the zero-cost provider); medians and ranges are reported")
	flag.BoolVar(&hk.pinned, "hk-pin", true, "hundredk: the simulated vCenters and the registering kubelets (this process) on CPU 0, the API server, etcd and the CCM on the others, as on separate machines")
	flag.DurationVar(&hk.latency, "hk-latency", 20*time.Millisecond, "hundredk: delay of every SOAP call of the simulated vCenters (Model.DelayConfig)")
	hkMem := flag.String("hk-memlimit", "512Mi", "hundredk and day: the memory limit of the CCMs' container (this CCM, the baseline, the reference), as deploy/base sets it (the binary gives Go 90 % of it: GOMEMLIMIT); 0 for none")
	flag.StringVar(&hk.baseline, "hk-baseline", "", "hundredk: another CCM binary (the previous code) measured in the same rounds")
	do := dayOptions{}
	flag.IntVar(&do.vcenters, "day-vcenters", 10, "day: simulated vCenters")
	flag.IntVar(&do.vmsPer, "day-vms", 10000, "day: VMs per vCenter")
	flag.IntVar(&do.nodes, "day-nodes", 5000, "day: Nodes among them")
	flag.DurationVar(&do.duration, "day-duration", 30*time.Minute, "day: churn each CCM lives through (24h for a day)")
	flag.DurationVar(&do.window, "day-window", 5*time.Minute, "day: length of each measured round")
	flag.DurationVar(&do.settle, "day-settle", 6*time.Minute, "day: how long the last changes get to show on the Nodes once the churn ends")
	flag.DurationVar(&do.initTimeout, "day-init-timeout", 30*time.Minute, "day: how long each CCM gets to initialize the Nodes (one that runs out is reported as far as it got, and has no churn)")
	flag.Uint64Var(&do.seed, "day-seed", 1, "day: seed of the churn")
	flag.StringVar(&do.reference, "day-reference", "", `day: the reference CCM binary ("": build it from hack/refnode's module; "none": leave it out)`)
	flag.BoolVar(&do.referenceKept, "day-reference-kept", true, "day: the reference starts on the Nodes this CCM initialized (a switched cluster) instead of initializing them")
	flag.DurationVar(&do.latency, "day-latency", 20*time.Millisecond, "day: delay of every SOAP call of the simulated vCenters")
	flag.BoolVar(&do.pinned, "day-pin", true, "day: the simulated vCenters and the churn on CPU 0, the API server, etcd and the CCM on the others")
	csrCold := flag.Bool("csr-cold", false, "csr: every kubelet asks as soon as it registers, while the Nodes initialize")
	keep := flag.Bool("keep", false, "keep the work directory (CCM logs, heap profiles) and print its path")
	flag.Parse()
	if q, err := resource.ParseQuantity(*hkMem); err != nil {
		fmt.Fprintf(os.Stderr, "-hk-memlimit %q: %v (a Kubernetes quantity such as 512Mi, or 0)\n", *hkMem, err)
		os.Exit(2)
	} else {
		hk.memLimit = q.Value()
		do.memLimit = q.Value()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := map[string]func(context.Context, env) ([]report, error){
		"scale":    func(ctx context.Context, e env) ([]report, error) { return scale(ctx, e, *n, *zero, *status) },
		"site":     site,
		"failover": failover,
		"drift":    drift,
		"bigvc": func(ctx context.Context, e env) ([]report, error) {
			return bigVC(ctx, e, *bigVMs, *bigNodes, *bigDelay)
		},
		"firstlookup": func(ctx context.Context, e env) ([]report, error) { return firstLookup(ctx, e, 2000, 20000, 50) },
		"csr":         func(ctx context.Context, e env) ([]report, error) { return servingCSRs(ctx, e, *n, *csrCold) },
		"hundredk":    func(ctx context.Context, e env) ([]report, error) { return hundredK(ctx, e, hk, *zero) },
		"day":         func(ctx context.Context, e env) ([]report, error) { return day(ctx, e, do, *zero) },
	}
	var selected []string
	for _, s := range strings.Split(*scenarios, ",") {
		if run[s] == nil {
			fmt.Fprintf(os.Stderr, "bench: unknown scenario %q (scale, site, failover, drift, bigvc, firstlookup, csr, hundredk, day)\n", s)
			os.Exit(2)
		}
		selected = append(selected, s)
	}
	if err := runAll(ctx, *ccm, *keep, selected, run); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func runAll(ctx context.Context, ccm string, keep bool, selected []string, run map[string]func(context.Context, env) ([]report, error)) error {
	root, _ := os.Getwd()
	work, err := os.MkdirTemp("", "vsphere-ccm-bench-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Printf("work directory (kept): %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	// The simulators' own log (vcsim writes through the standard logger,
	// e.g. "open : no such file or directory" for the log of a VM it
	// cloned) goes to the work directory, not between the figures.
	simLog, err := os.Create(filepath.Join(work, "simulators.log"))
	if err != nil {
		return err
	}
	defer simLog.Close()
	log.SetOutput(simLog)
	defer log.SetOutput(os.Stderr)
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
	e := env{cp: cp, kube: kube, work: work, ccm: ccm}
	var all []report
	for _, s := range selected {
		fmt.Printf("\n== scenario %s\n", s)
		reports, err := run[s](ctx, e)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s, err)
		}
		all = append(all, reports...)
		if err := deleteNodes(ctx, kube); err != nil {
			return err
		}
	}
	fmt.Printf("\n%-70s %14s   %s\n", "summary", "measured", "target")
	for _, r := range all {
		fmt.Printf("%-70s %14s   %s\n", r.measure, r.value, r.target)
	}
	return nil
}
