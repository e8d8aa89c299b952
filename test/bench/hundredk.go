package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// hundredKOptions size the scenario.
type hundredKOptions struct {
	vcenters, vmsPer, nodes int
	profile                 bool // CPU and block profiles of the CCM during initialization
	// cold registers the Nodes as soon as the CCM is healthy, while it
	// reads its inventories (a new cluster coming up with its CCM), instead
	// of after.
	cold bool
}

// hundredKRun is what one CCM's run measured.
type hundredKRun struct {
	p50, p100   time.Duration
	requests    ccmproc.Counts // during initialization
	methods     map[string]float64
	cpu         map[string]time.Duration
	wall        time.Duration
	peakRSSKB   int64
	heapInuseMB float64
	// readCPU is the CPU the simulators and the CCM used while the CCM
	// read its inventories and tags, before any Node (warm runs only).
	readCPU map[string]time.Duration
}

// hundredK initializes nodes Nodes among vcenters x vmsPer VMs (the
// simulators in this process), registered right after the CCM is
// healthy, with the fast controller flags, first with the CCM, then with
// the zero-cost provider through the same API server; it reports the
// ratio, the requests and logins per Node, and the CPU each process used
// during initialization: the CCM, the API server, etcd, and this process
// (the simulated vCenters, and the registration and polling of Nodes,
// which the zero-cost run measures alone).
func hundredK(ctx context.Context, e env, o hundredKOptions, zero string) ([]report, error) {
	const clusters = 10
	perCluster := max(o.vmsPer/clusters, 1)
	fmt.Printf("building %d simulated vCenters x %d VMs ...\n", o.vcenters, perCluster*clusters)
	start := time.Now()
	var specs []vcsim.Spec
	for i := range o.vcenters {
		specs = append(specs, vcsim.Spec{Name: fmt.Sprintf("vc-%02d", i), Clusters: clusters, Hosts: 2, VMs: 1, Copies: perCluster - 1})
	}
	fleet, err := vcsim.Start(ctx, specs...)
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	if err := fleet.TagZones(ctx); err != nil {
		return nil, err
	}
	var chosen []vcsim.VM
	perVC := max(o.nodes/o.vcenters, 1)
	for _, v := range fleet.VCenters {
		step := max(len(v.VMs)/perVC, 1)
		for i, n := 0, 0; i < len(v.VMs) && n < perVC; i, n = i+step, n+1 {
			chosen = append(chosen, v.VMs[i])
		}
	}
	fmt.Printf("simulated %d VMs in %v; %d of them are Nodes\n", len(fleet.VMs()), time.Since(start).Round(time.Second), len(chosen))
	cfgPath := filepath.Join(e.work, "hundredk.yaml")
	if err := fleet.WriteConfig(cfgPath, vcsim.ZoneLabels, nil); err != nil {
		return nil, err
	}
	answers := map[string]any{}
	for _, vm := range chosen {
		answers[vm.Name] = map[string]string{"providerID": "vsphere://" + vm.UUID, "instanceType": "vsphere-vm.cpu-1.mem-0gb.os-unknown",
			"internalIP": vm.IPv4, "zone": "zone-" + vm.Cluster, "region": "region-" + vm.Datacenter}
	}
	answersPath := filepath.Join(e.work, "hundredk-answers.json")
	b, _ := json.Marshal(answers)
	if err := os.WriteFile(answersPath, b, 0o600); err != nil {
		return nil, err
	}

	ours, err := runHundredK(ctx, e, chosen, e.ccm, cfgPath, o.profile, o.cold)
	if err != nil {
		return nil, fmt.Errorf("vsphere CCM: %w", err)
	}
	if err := deleteNodes(ctx, e.kube); err != nil {
		return nil, err
	}
	floor, err := runHundredK(ctx, e, chosen, zero, "--answers="+answersPath, false, o.cold)
	if err != nil {
		return nil, fmt.Errorf("zero-cost CCM: %w", err)
	}

	n := float64(len(chosen))
	fmt.Printf("\n%d Nodes among %d VMs in %d vCenters; --concurrent-node-syncs=8 --kube-api-qps=200 --kube-api-burst=400\n",
		len(chosen), len(fleet.VMs()), o.vcenters)
	fmt.Printf("%-58s %14s %14s\n", "", "vsphere CCM", "zero-cost")
	fmt.Printf("%-58s %14s %14s\n", "every Node initialized (p100)", seconds(ours.p100), seconds(floor.p100))
	fmt.Printf("%-58s %14s %14s\n", "half of them (p50)", seconds(ours.p50), seconds(floor.p50))
	fmt.Printf("%-58s %14.3f\n", "vSphere requests per Node (SOAP+REST, long polls too)", (ours.requests.SOAP+ours.requests.REST)/n)
	fmt.Printf("%-58s %14.3f\n", "  of which inventory long polls", ours.requests.Polls/n)
	fmt.Printf("%-58s %14.0f\n", "REST logins during initialization", ours.requests.RESTLogins)
	for _, m := range slices.Sorted(maps.Keys(ours.methods)) {
		fmt.Printf("%-58s %14.0f\n", "  requests: "+m, ours.methods[m])
	}
	for _, proc := range []string{"ccm", "kube-apiserver", "etcd", "bench (simulators, Node writes)"} {
		fmt.Printf("%-58s %14s %14s\n", "CPU: "+proc, seconds(ours.cpu[proc]), seconds(floor.cpu[proc]))
	}
	sims := ours.cpu["bench (simulators, Node writes)"] - floor.cpu["bench (simulators, Node writes)"]
	fmt.Printf("%-58s %14s\n", "CPU: simulated vCenters (bench, ours - zero-cost)", seconds(sims))
	fmt.Printf("%-58s %14s %14s\n", "CPU: all, during initialization (2 cores)", seconds(sum(ours.cpu)), seconds(sum(floor.cpu)))
	fmt.Printf("%-58s %12.1fMB %12.1fMB\n", "peak RSS of the CCM process", float64(ours.peakRSSKB)/1024, float64(floor.peakRSSKB)/1024)
	fmt.Printf("%-58s %12.1fMB\n", "Go heap in use after initialization", ours.heapInuseMB)
	r100, r50 := ours.p100.Seconds()/floor.p100.Seconds(), ours.p50.Seconds()/floor.p50.Seconds()
	// What the CCM's own work allows: the zero-cost run's time plus the
	// CPU the CCM used beyond the zero-cost CCM's, spread over 2 cores.
	own := (ours.cpu["ccm"] - floor.cpu["ccm"]) / 2
	fmt.Printf("%-58s %14.2f %14.2f\n", "ratio ours / zero-cost (p100, p50)", r100, r50)
	fmt.Printf("%-58s %14.2f\n", "ratio if only the CCM's extra CPU were added (p100)", (floor.p100+own).Seconds()/floor.p100.Seconds())
	// The harness's share: the simulators' CPU runs on the same 2 cores.
	// A run whose cores were busy nearly all along took the CPU it used
	// over 2 cores; without the simulators' CPU it could not have taken
	// less than the zero-cost run.
	fmt.Printf("%-58s %14.2f %14.2f\n", "cores busy during initialization (of 2)", sum(ours.cpu).Seconds()/ours.p100.Seconds(), sum(floor.cpu).Seconds()/floor.p100.Seconds())
	withoutSims := max(floor.p100, (sum(ours.cpu)-sims)/2)
	fmt.Printf("%-58s %14.2f\n", "ratio if the simulators' CPU were on other cores (CPU / 2)", withoutSims.Seconds()/floor.p100.Seconds())
	if ours.readCPU != nil {
		fmt.Printf("%-58s %14s %14s\n", "CPU of the first reads, before any Node (simulators, CCM)", seconds(ours.readCPU["simulators"]), seconds(ours.readCPU["ccm"]))
	}
	return []report{
		{fmt.Sprintf("100k: %d Nodes of %d VMs in %d vCenters, ours / zero-cost (p100)", len(chosen), len(fleet.VMs()), o.vcenters), fmt.Sprintf("%.2f", r100), "<= 1.05"},
		{"100k: ours / zero-cost (p50)", fmt.Sprintf("%.2f", r50), ""},
		{"100k: vSphere requests per Node beyond long polls", fmt.Sprintf("%.3f", (ours.requests.SOAP-ours.requests.Polls+ours.requests.REST)/n), ""},
		{"100k: REST logins during initialization", fmt.Sprintf("%.0f", ours.requests.RESTLogins), "0"},
		{"100k: CPU of the CCM / simulators / API server / etcd", fmt.Sprintf("%s / %s / %s / %s", seconds(ours.cpu["ccm"]), seconds(sims),
			seconds(ours.cpu["kube-apiserver"]), seconds(ours.cpu["etcd"])), ""},
		{"100k: peak RSS of the CCM", fmt.Sprintf("%.1f MB", float64(ours.peakRSSKB)/1024), "<= 256 MB"},
	}, nil
}

func sum(m map[string]time.Duration) time.Duration {
	var t time.Duration
	for _, d := range m {
		t += d
	}
	return t
}

// runHundredK runs one CCM binary, waits until it is healthy and (unless
// cold) its inventories are read, registers every Node, and measures.
func runHundredK(ctx context.Context, e env, vms []vcsim.VM, binary, configArg string, profile, cold bool) (hundredKRun, error) {
	var r hundredKRun
	var env []string
	debugAddr := ""
	if profile {
		port, err := freePort()
		if err != nil {
			return r, err
		}
		debugAddr = "127.0.0.1:" + strconv.Itoa(port)
		env = append(env, "VSPHERE_CCM_DEBUG_ADDR="+debugAddr)
	}
	name := filepath.Base(binary)
	p, err := ccmproc.StartEnv(e.cp, binary, configArg, filepath.Join(e.work, "hundredk-"+name+".log"), map[string]string{
		"--v": "1", "--concurrent-node-syncs": "8", "--kube-api-qps": "200", "--kube-api-burst": "400",
	}, env)
	if err != nil {
		return r, err
	}
	defer p.Stop()
	if err := p.WaitHealthy(ctx); err != nil {
		return r, err
	}
	var before ccmproc.Counts
	var methods0 map[string]float64
	if cold {
		// Counted from here: the logins and the inventories' reads too.
		var err error
		if before, err = p.ScrapeCounts(); err != nil {
			return r, err
		}
		if methods0, err = p.ScrapeMethods(); err != nil {
			return r, err
		}
	}
	if !cold && configArg != "" && !strings.HasPrefix(configArg, "--") {
		synced := time.Now()
		sims0, _ := controlplane.CPUTime(os.Getpid())
		ccm0, _ := controlplane.CPUTime(p.PID())
		if err := p.WaitStarted(ctx, len(distinctVCenters(vms)), 10*time.Minute); err != nil {
			return r, err
		}
		sims1, _ := controlplane.CPUTime(os.Getpid())
		ccm1, _ := controlplane.CPUTime(p.PID())
		r.readCPU = map[string]time.Duration{"simulators": sims1 - sims0, "ccm": ccm1 - ccm0}
		fmt.Printf("%s: inventories and tags of %d vCenters read %v after healthy (CPU: simulators %v, CCM %v); RSS %.1f MB\n", name, len(distinctVCenters(vms)),
			time.Since(synced).Round(100*time.Millisecond), r.readCPU["simulators"].Round(100*time.Millisecond), r.readCPU["ccm"].Round(100*time.Millisecond),
			float64(p.Status("VmRSS"))/1024)
		if before, err = p.ScrapeCounts(); err != nil {
			return r, err
		}
		if methods0, err = p.ScrapeMethods(); err != nil {
			return r, err
		}
	}
	pids := e.cp.PIDs()
	procs := map[string]int{"ccm": p.PID(), "kube-apiserver": pids["kube-apiserver"], "etcd": pids["etcd"], "bench (simulators, Node writes)": os.Getpid()}
	cpu0 := map[string]time.Duration{}
	for k, pid := range procs {
		cpu0[k], _ = controlplane.CPUTime(pid)
	}
	var profiles chan error
	if profile {
		profiles = make(chan error, 1)
		go func() { profiles <- captureProfiles(ctx, debugAddr, e.work, binary) }()
		// And this process's: the simulated vCenters' work.
		f, err := os.Create(filepath.Join(e.work, "bench-cpu.pprof"))
		if err != nil {
			return r, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return r, err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
			exe, _ := os.Executable()
			top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=40", exe, f.Name()).CombinedOutput()
			if err != nil {
				fmt.Printf("bench profile: %v\n", err)
			}
			fmt.Printf("\n--- bench (simulated vCenters) cpu profile during initialization (%s) ---\n%s\n", f.Name(), top)
		}()
	}
	fmt.Printf("%s: registering %d Nodes ...\n", name, len(vms))
	start := time.Now()
	go func() { _ = registerAll(ctx, e.kube, vms) }()
	times, err := watchInitTimes(ctx, e.kube, vms, start, 20*time.Minute)
	if err != nil {
		return r, err
	}
	r.wall = time.Since(start)
	r.p50, r.p100 = quantile(times, 0.5), quantile(times, 1)
	r.cpu = map[string]time.Duration{}
	for k, pid := range procs {
		c, _ := controlplane.CPUTime(pid)
		r.cpu[k] = c - cpu0[k]
	}
	fmt.Printf("%s: all initialized in %v (p50 %v)\n", name, r.p100.Round(time.Millisecond), r.p50.Round(time.Millisecond))
	if configArg != "" && !strings.HasPrefix(configArg, "--") {
		after, err := p.ScrapeCounts()
		if err != nil {
			return r, err
		}
		r.requests = ccmproc.Counts{SOAP: after.SOAP - before.SOAP, REST: after.REST - before.REST,
			RESTLogins: after.RESTLogins - before.RESTLogins, Polls: after.Polls - before.Polls}
		r.heapInuseMB = p.Gauge("go_memstats_heap_inuse_bytes") / (1 << 20)
		methods, err := p.ScrapeMethods()
		if err != nil {
			return r, err
		}
		r.methods = map[string]float64{}
		for m, v := range methods {
			if d := v - methods0[m]; d > 0 {
				r.methods[m] = d
			}
		}
	}
	if profiles != nil {
		if err := <-profiles; err != nil {
			fmt.Printf("%s: profiles: %v\n", name, err)
		}
	}
	r.peakRSSKB = p.PeakRSS()
	return r, nil
}

// captureProfiles takes a 30-second CPU profile of the CCM from the start
// of the registrations, then its block and mutex profiles, into dir, and
// prints the top of each.
func captureProfiles(ctx context.Context, addr, dir, binary string) error {
	for _, prof := range []struct{ name, path string }{
		{"cpu", "/debug/pprof/profile?seconds=30"},
		{"block", "/debug/pprof/block"},
		{"mutex", "/debug/pprof/mutex"},
	} {
		out := filepath.Join(dir, "ccm-"+prof.name+".pprof")
		cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-proto", "-output", out, "http://"+addr+prof.path)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s profile: %v: %s", prof.name, err, b)
		}
		top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", binary, out).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s profile top: %v: %s", prof.name, err, top)
		}
		fmt.Printf("\n--- CCM %s profile (%s) ---\n%s\n", prof.name, out, top)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func distinctVCenters(vms []vcsim.VM) map[string]bool {
	out := map[string]bool{}
	for _, vm := range vms {
		out[vm.VCenter] = true
	}
	return out
}

// watchInitTimes is initTimes through a watch: listing thousands of Nodes
// every 50 ms would load the API server more than the CCMs measured.
func watchInitTimes(ctx context.Context, kube kubernetes.Interface, vms []vcsim.VM, since time.Time, timeout time.Duration) ([]time.Duration, error) {
	want := map[string]bool{}
	for _, vm := range vms {
		want[vm.Name] = true
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	see := func(n *v1.Node) {
		if want[n.Name] && initialized(n) {
			delete(want, n.Name)
			out = append(out, time.Since(since))
		}
	}
	for i := range list.Items {
		see(&list.Items[i])
	}
	rv := list.ResourceVersion
	for len(want) > 0 {
		w, err := kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return nil, fmt.Errorf("%w: %d of %d Nodes not initialized: %v", errTimeout, len(want), len(vms), err)
		}
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*v1.Node)
			if !ok {
				continue
			}
			rv = n.ResourceVersion
			see(n)
			if len(want) == 0 {
				break
			}
		}
		w.Stop()
		if ctx.Err() != nil && len(want) > 0 {
			return nil, fmt.Errorf("%w: %d of %d Nodes not initialized after %v", errTimeout, len(want), len(vms), timeout)
		}
	}
	slices.Sort(out)
	return out, nil
}
