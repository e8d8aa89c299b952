package main

import (
	"context"
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

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/memlimit"
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
	// runs is the number of rounds; pinned puts the simulators and the
	// registration (this process) on CPU 0 and the API server, etcd and
	// the CCM on the other CPUs; baseline is another CCM binary measured
	// in the same rounds.
	runs     int
	pinned   bool
	baseline string
	// latency delays every SOAP call of the simulators (Model.DelayConfig),
	// as a real vCenter answers in tens of milliseconds at best.
	latency time.Duration
	// memLimit is the memory limit of the CCMs' container, in bytes (0:
	// none), given to both CCMs as the binary would derive it from the
	// cgroup (GOMEMLIMIT, which any Go binary honours: it then keeps
	// GOGC=100). The zero-cost CCM runs without. Before 2026-11-28 the
	// baseline ran without a limit, so at GOGC=50 (pkg/memlimit): about
	// 40 MB less peak RSS, and more CPU, than under the limit.
	memLimit int64
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
	// apiWrites are the API server's writes during initialization by verb
	// and resource, everyone's (the registering kubelets' too).
	apiWrites map[string]float64
	// marks are the times by which the first Node, a tenth, a quarter,
	// three quarters and nine tenths of the Nodes were initialized.
	marks [5]time.Duration
}

// hundredK initializes nodes Nodes among vcenters x vmsPer VMs (the
// simulators in this process), registered after the CCM has read its
// inventories (or, cold, as soon as it is healthy), with the fast
// controller flags: in each of o.runs rounds the CCM and the baseline CCM
// if any (taking turns to run first: with an odd number of rounds the CCM
// runs first once more), then the zero-cost provider, through
// the same API server. It
// reports what each round measured, then the median and range over the
// rounds of the ratio to the zero-cost provider (p100, p50), the CCM's CPU
// (seconds, per VM, per Node) and its peak RSS. Pinned (the default with 2
// CPUs or more), this process (the simulated vCenters and the registering
// kubelets) runs on CPU 0 and the API server, etcd and the CCMs on the
// others, as a real vCenter runs on its own hardware. Nothing is modelled.
func hundredK(ctx context.Context, e env, o hundredKOptions, zero string) ([]report, error) {
	fleet, chosen, err := spreadFleet(ctx, o.vcenters, o.vmsPer, o.nodes, o.latency)
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	vms := len(fleet.VMs())
	cfgPath := filepath.Join(e.work, "hundredk.yaml")
	if err := fleet.WriteConfig(cfgPath, vcsim.ZoneLabels, nil); err != nil {
		return nil, err
	}
	answersPath := filepath.Join(e.work, "hundredk-answers.json")
	if err := writeAnswers(answersPath, chosen); err != nil {
		return nil, err
	}
	undo, pinned, err := pinApart(&e, o.pinned)
	if err != nil {
		return nil, err
	}
	defer undo()

	type round struct{ ours, base, floor hundredKRun }
	var rounds []round
	for i := range max(o.runs, 1) {
		fmt.Printf("\n-- round %d of %d\n", i+1, max(o.runs, 1))
		var r round
		ours := func() (err error) {
			if r.ours, err = runHundredK(ctx, e, chosen, e.ccm, cfgPath, o.profile && i == 0, o.cold, o.memLimit); err != nil {
				return fmt.Errorf("vsphere CCM: %w", err)
			}
			return deleteNodes(ctx, e.kube)
		}
		base := func() (err error) {
			if r.base, err = runHundredK(ctx, e, chosen, o.baseline, cfgPath, false, o.cold, o.memLimit); err != nil {
				return fmt.Errorf("baseline CCM: %w", err)
			}
			return deleteNodes(ctx, e.kube)
		}
		order := []func() error{ours}
		if o.baseline != "" {
			// The two take turns to run first, so that neither always
			// meets the simulators (and the API server) in the same state.
			if order = append(order, base); i%2 == 1 {
				order[0], order[1] = base, ours
				fmt.Println("(this round: the baseline CCM first)")
			}
		}
		for _, run := range order {
			if err := run(); err != nil {
				return nil, err
			}
		}
		if r.floor, err = runHundredK(ctx, e, chosen, zero, "--answers="+answersPath, false, o.cold, 0); err != nil {
			return nil, fmt.Errorf("zero-cost CCM: %w", err)
		}
		if err := deleteNodes(ctx, e.kube); err != nil {
			return nil, err
		}
		printHundredKRound(r.ours, r.base, r.floor, o.baseline != "", len(chosen), vms)
		rounds = append(rounds, r)
	}

	mode := "warm"
	if o.cold {
		mode = "cold"
	}
	if pinned {
		mode += ", pinned"
	}
	if o.latency > 0 {
		mode += fmt.Sprintf(", %v per SOAP call", o.latency)
	}
	if o.memLimit > 0 {
		mode += fmt.Sprintf(", the CCMs under a %d MiB memory limit (GOMEMLIMIT %d MiB)", o.memLimit>>20, memlimit.SoftLimit(o.memLimit)>>20)
	}
	n := float64(len(chosen))
	fmt.Printf("\n%d Nodes among %d VMs in %d vCenters (%s), %d rounds: median [min, max]\n", len(chosen), vms, o.vcenters, mode, len(rounds))
	fmt.Printf("%-52s %26s %26s\n", "", "vsphere CCM", "baseline CCM")
	stat := func(label string, f func(hundredKRun, hundredKRun) float64, format string) (ours, base spread) {
		for _, r := range rounds {
			ours = append(ours, f(r.ours, r.floor))
			if o.baseline != "" {
				base = append(base, f(r.base, r.floor))
			}
		}
		b := ""
		if o.baseline != "" {
			b = base.format(format)
		}
		fmt.Printf("%-52s %26s %26s\n", label, ours.format(format), b)
		return ours, base
	}
	r100, _ := stat("ratio to zero-cost, p100", func(x, f hundredKRun) float64 { return x.p100.Seconds() / f.p100.Seconds() }, "%.2f")
	r50, _ := stat("ratio to zero-cost, p50", func(x, f hundredKRun) float64 { return x.p50.Seconds() / f.p50.Seconds() }, "%.2f")
	cpu, _ := stat("CPU of the CCM, s", func(x, _ hundredKRun) float64 { return x.cpu["ccm"].Seconds() }, "%.1f")
	perVM, _ := stat("CPU of the CCM per VM, us", func(x, _ hundredKRun) float64 { return x.cpu["ccm"].Seconds() * 1e6 / float64(vms) }, "%.0f")
	perNode, _ := stat("CPU of the CCM per Node, ms", func(x, _ hundredKRun) float64 { return x.cpu["ccm"].Seconds() * 1e3 / n }, "%.2f")
	reqs, _ := stat("vSphere requests per Node, beyond long polls", func(x, _ hundredKRun) float64 {
		return (x.requests.SOAP - x.requests.Polls + x.requests.REST) / n
	}, "%.3f")
	writesN, _ := stat("API server writes per Node (everyone's)", func(x, _ hundredKRun) float64 { return sum(x.apiWrites) / n }, "%.2f")
	rss, _ := stat("peak RSS of the CCM, MB", func(x, _ hundredKRun) float64 { return float64(x.peakRSSKB) / 1024 }, "%.1f")
	var floorCPU, floorWrites spread
	for _, r := range rounds {
		floorCPU = append(floorCPU, r.floor.cpu["ccm"].Seconds())
		floorWrites = append(floorWrites, sum(r.floor.apiWrites)/n)
	}
	fmt.Printf("%-52s %26s\n", "CPU of the zero-cost CCM, s", floorCPU.format("%.1f"))
	fmt.Printf("%-52s %26s\n", "API server writes per Node, zero-cost", floorWrites.format("%.2f"))

	label := fmt.Sprintf("100k (%s): %d Nodes of %d VMs in %d vCenters", mode, len(chosen), vms, o.vcenters)
	return []report{
		{label + ", ratio to zero-cost p100, median [range]", r100.format("%.2f"), "<= 1.05 warm, <= 1.2 cold (pinned)"},
		{"100k: ratio to zero-cost p50, median [range]", r50.format("%.2f"), ""},
		{"100k: CPU of the CCM, s", cpu.format("%.1f"), "half of the previous code's"},
		{"100k: CPU of the CCM per VM, us / per Node, ms", perVM.format("%.0f") + " / " + perNode.format("%.2f"), ""},
		{"100k: vSphere requests per Node beyond long polls", reqs.format("%.3f"), "<= 0.05"},
		{"100k: peak RSS of the CCM, MB", rss.format("%.1f"), "<= 256"},
		{"100k: API server writes per Node (zero-cost: " + floorWrites.format("%.2f") + ")", writesN.format("%.2f"), ""},
	}, nil
}

// printHundredKRound prints what one round measured.
func printHundredKRound(ours, base, floor hundredKRun, withBase bool, nodes, vms int) {
	n := float64(nodes)
	cols := []hundredKRun{ours}
	head := []string{"vsphere CCM"}
	if withBase {
		cols, head = append(cols, base), append(head, "baseline CCM")
	}
	cols, head = append(cols, floor), append(head, "zero-cost")
	row := func(label string, f func(hundredKRun) string) {
		fmt.Printf("%-58s", label)
		for _, c := range cols {
			fmt.Printf(" %14s", f(c))
		}
		fmt.Println()
	}
	fmt.Printf("%-58s", "")
	for _, h := range head {
		fmt.Printf(" %14s", h)
	}
	fmt.Println()
	row("every Node initialized (p100)", func(r hundredKRun) string { return seconds(r.p100) })
	row("half of them (p50)", func(r hundredKRun) string { return seconds(r.p50) })
	row("first Node; p10/p25/p75/p90, s", func(r hundredKRun) string {
		q := r.marks
		return fmt.Sprintf("%.1f; %.0f/%.0f/%.0f/%.0f", q[0].Seconds(), q[1].Seconds(), q[2].Seconds(), q[3].Seconds(), q[4].Seconds())
	})
	row("Nodes a second from p25 to p100 (0.75 N / (p100-p25))", func(r hundredKRun) string {
		return fmt.Sprintf("%.0f", 0.75*n/(r.p100-r.marks[2]).Seconds())
	})
	row("ratio to zero-cost (p100)", func(r hundredKRun) string { return fmt.Sprintf("%.2f", r.p100.Seconds()/floor.p100.Seconds()) })
	row("vSphere requests per Node (SOAP+REST, long polls too)", func(r hundredKRun) string {
		return fmt.Sprintf("%.3f", (r.requests.SOAP+r.requests.REST)/n)
	})
	row("  of which inventory long polls", func(r hundredKRun) string { return fmt.Sprintf("%.3f", r.requests.Polls/n) })
	row("REST logins during initialization", func(r hundredKRun) string { return fmt.Sprintf("%.0f", r.requests.RESTLogins) })
	row("API server writes per Node (everyone's)", func(r hundredKRun) string { return fmt.Sprintf("%.2f", sum(r.apiWrites)/n) })
	writes := map[string]bool{}
	for _, c := range cols {
		for k := range c.apiWrites {
			writes[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(writes)) {
		row("  "+k, func(r hundredKRun) string { return fmt.Sprintf("%.2f", r.apiWrites[k]/n) })
	}
	for _, proc := range []string{"ccm", "kube-apiserver", "etcd", "bench (simulators, Node writes)"} {
		row("CPU: "+proc, func(r hundredKRun) string { return seconds(r.cpu[proc]) })
	}
	row("CPU of the CCM per VM / per Node", func(r hundredKRun) string {
		return fmt.Sprintf("%.0fus/%.1fms", r.cpu["ccm"].Seconds()*1e6/float64(vms), r.cpu["ccm"].Seconds()*1e3/n)
	})
	row("peak RSS of the CCM process", func(r hundredKRun) string { return fmt.Sprintf("%.1fMB", float64(r.peakRSSKB)/1024) })
	row("CPU of the first reads, before any Node (CCM)", func(r hundredKRun) string {
		if r.readCPU == nil {
			return "-"
		}
		return seconds(r.readCPU["ccm"])
	})
	for _, m := range slices.Sorted(maps.Keys(ours.methods)) {
		fmt.Printf("%-58s %14.0f\n", "  requests: "+m, ours.methods[m])
	}
}

// spread is one measure over several rounds.
type spread []float64

// format prints the median and the range.
func (s spread) format(f string) string {
	if len(s) == 0 {
		return "-"
	}
	v := slices.Sorted(slices.Values(s))
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return fmt.Sprintf(f+" ["+f+", "+f+"]", med, v[0], v[len(v)-1])
}

func sum[V time.Duration | float64](m map[string]V) V {
	var t V
	for _, d := range m {
		t += d
	}
	return t
}

// runHundredK runs one CCM binary, waits until it is healthy and (unless
// cold) its inventories are read, registers every Node, and measures.
func runHundredK(ctx context.Context, e env, vms []vcsim.VM, binary, configArg string, profile, cold bool, memLimit int64) (hundredKRun, error) {
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
	if memLimit > 0 {
		// What the binary sets itself from a container's cgroup limit
		// (pkg/memlimit: 90 % of it); a process outside a cgroup gets
		// it from the environment.
		env = append(env, "GOMEMLIMIT="+strconv.FormatInt(memlimit.SoftLimit(memLimit), 10))
	}
	name := filepath.Base(binary)
	p, err := ccmproc.StartEnv(e.cp, binary, configArg, filepath.Join(e.work, "hundredk-"+name+".log"), map[string]string{
		"--v": "1", "--concurrent-node-syncs": "8", "--kube-api-qps": "200", "--kube-api-burst": "400",
	}, env)
	if err != nil {
		return r, err
	}
	defer p.Stop()
	if len(e.pinCCM) > 0 {
		if err := pin(p.PID(), e.pinCCM...); err != nil {
			return r, err
		}
	}
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
	api0, err := apiRequests(ctx, e.kube)
	if err != nil {
		return r, err
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
	for i, q := range []float64{0, 0.1, 0.25, 0.75, 0.9} {
		r.marks[i] = quantile(times, q)
	}
	api1, err := apiRequests(ctx, e.kube)
	if err != nil {
		return r, err
	}
	r.apiWrites = apiWrites(api0, api1)
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

// captureProfiles takes a 60-second CPU profile of the CCM from the start
// of the registrations, then its block and mutex profiles and what it
// allocated in the next 20 seconds, into dir, and prints the top of each.
func captureProfiles(ctx context.Context, addr, dir, binary string) error {
	for _, prof := range []struct{ name, path string }{
		{"cpu", "/debug/pprof/profile?seconds=60"}, // about the whole initialization
		{"block", "/debug/pprof/block"},
		{"mutex", "/debug/pprof/mutex"},
		{"allocs", "/debug/pprof/allocs?seconds=20"}, // the 20 s after the CPU profile
	} {
		out := filepath.Join(dir, "ccm-"+prof.name+".pprof")
		cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-proto", "-output", out, "http://"+addr+prof.path)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s profile: %v: %s", prof.name, err, b)
		}
		args := []string{"tool", "pprof", "-top", "-nodecount=25"}
		if prof.name == "allocs" {
			args = append(args, "-sample_index=alloc_space", "-cum") // what was allocated, by caller
		}
		top, err := exec.CommandContext(ctx, "go", append(args, binary, out)...).CombinedOutput()
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
// every 50 ms would load the API server more than the CCMs measured. On a
// timeout it returns the times so far with the error.
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
			slices.Sort(out)
			return out, fmt.Errorf("%w: %d of %d Nodes not initialized: %v", errTimeout, len(want), len(vms), err)
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
			slices.Sort(out)
			return out, fmt.Errorf("%w: %d of %d Nodes not initialized after %v", errTimeout, len(want), len(vms), timeout)
		}
	}
	slices.Sort(out)
	return out, nil
}
