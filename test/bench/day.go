package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/memlimit"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/refwire"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// dayOptions size the day scenario.
type dayOptions struct {
	vcenters, vmsPer, nodes int
	// duration is how long each CCM lives through the churn once its
	// Nodes are initialized; window the length of each measured round.
	duration, window time.Duration
	// settle is how long the last changes get to show on the Nodes once
	// the churn ends (a status period and a little).
	settle time.Duration
	seed   uint64
	// initTimeout bounds each CCM\'s initialization of the Nodes.
	initTimeout time.Duration
	latency     time.Duration
	// reference is the reference CCM's binary: "" builds it (hack/refnode's
	// module, the reference's newest source), "none" leaves it out.
	reference string
	// referenceKept: the reference starts on the Nodes this CCM
	// initialized (a cluster switched to it) instead of initializing
	// them: it cannot initialize thousands of Nodes of this fleet within
	// the init timeout, and its steady state is what is measured.
	referenceKept bool
	memLimit      int64
	pinned        bool
}

// dayWindow is what one round of the churn cost.
type dayWindow struct {
	length  time.Duration
	cpu     time.Duration
	methods map[string]int64 // vSphere requests the vCenters answered, by method
	writes  map[string]int   // the CCM's API writes by verb and resource
	// nodeWrites are the CCM's successful Node writes; nodeChanges the
	// Node changes the API server sent watchers that this process did not
	// make (so the CCM's): a write that changes nothing sends none.
	nodeWrites, nodeChanges int
}

// dayRun is one CCM's run.
type dayRun struct {
	name  string
	nodes int
	init  time.Duration
	// initialized is how many Nodes it initialized (fewer than nodes when
	// it ran out of -day-init-timeout: then it had no churn).
	initialized int
	// kept: it started on the Nodes the CCM before it initialized.
	kept    bool
	windows []dayWindow
	// delays are, by kind of change, from the change in vSphere to the
	// Node showing it; unseen counts those never shown by the end.
	delays map[string][]time.Duration
	unseen map[string]int
	// rss samples (MB) and when; goroutines at start and end.
	rss          []float64
	rssAt        []time.Duration
	goroutines   [2]float64
	done         map[string]int // churn operations made
	relists      int            // Node watches lost (changes missed)
	measuresTrue bool           // answers follow vSphere (not the zero-cost CCM's fixed answers)
}

// day initializes nodes Nodes among vcenters x vmsPer VMs, then lives
// through o.duration of churn (churnRates, seeded) with the framework's
// default status period (5 minutes) and node monitor period (5 seconds),
// for this CCM, the reference CCM and the zero-cost provider in turn, on
// the same fleet and the same seeded churn. It reports per hour, median
// [range] over rounds of o.window: the CCM's CPU, the vSphere requests its
// vCenters answered by method (counted by the simulators, so the same for
// any CCM), its API server writes by kind and its Node writes that changed
// nothing, the delay from a change in vSphere to the Node (new address,
// VM destroyed), RSS and its slope, goroutines. Nothing is modelled.
func day(ctx context.Context, e env, o dayOptions, zero string) ([]report, error) {
	fleet, chosen, err := spreadFleet(ctx, o.vcenters, o.vmsPer, o.nodes, o.latency)
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	for _, v := range fleet.VCenters {
		v.CountMethods()
	}
	vms := len(fleet.VMs())
	cfgPath := filepath.Join(e.work, "day.yaml")
	if err := fleet.WriteConfig(cfgPath, vcsim.ZoneLabels, nil); err != nil {
		return nil, err
	}
	answersPath := filepath.Join(e.work, "day-answers.json")
	if err := writeAnswers(answersPath, chosen); err != nil {
		return nil, err
	}
	type ccm struct {
		name, binary, config string
		flags                map[string]string
		memLimit             int64
		truth                bool
		keeps                bool // starts on the Nodes the CCM before it initialized
	}
	ccms := []ccm{{name: "vsphere CCM", binary: e.ccm, config: cfgPath, memLimit: o.memLimit, truth: true}}
	switch o.reference {
	case "none":
	case "":
		root, _ := os.Getwd()
		fmt.Println("building the reference CCM (hack/refnode's module, the reference's newest source) ...")
		bin, err := refwire.Build(ctx, root, "k8s.io/cloud-provider-vsphere/cmd/vsphere-cloud-controller-manager", e.work, "reference-ccm")
		if err != nil {
			return nil, err
		}
		o.reference = bin
		fallthrough
	default:
		ccms = append(ccms, ccm{name: "reference CCM", binary: o.reference, config: cfgPath,
			flags: map[string]string{"--cloud-provider": "vsphere"}, memLimit: o.memLimit, truth: true, keeps: o.referenceKept})
	}
	ccms = append(ccms, ccm{name: "zero-cost", binary: zero, config: "--answers=" + answersPath})
	undo, pinned, err := pinApart(&e, o.pinned)
	if err != nil {
		return nil, err
	}
	defer undo()
	rates := defaultChurn(vms, len(chosen))
	fmt.Printf("churn per minute: %+v (seed %d)\n", rates, o.seed)

	alive := chosen
	left := false // the CCM before left its Nodes initialized
	var runs []dayRun
	for i, c := range ccms {
		fmt.Printf("\n-- %s: %d Nodes, then %v of churn in rounds of %v\n", c.name, len(alive), o.duration, o.window)
		flags := map[string]string{
			"--v": "1", "--concurrent-node-syncs": "8", "--kube-api-qps": "200", "--kube-api-burst": "400",
			// The framework's defaults (the control plane's CCM flags are
			// the fast ones the e2e tests use).
			"--node-status-update-frequency": "5m", "--node-monitor-period": "5s",
		}
		maps.Copy(flags, c.flags)
		ch := newChurn(fleet, e.kube, alive, chosen, rates, o.seed, i)
		r, err := runDay(ctx, e, c.name, c.binary, c.config, flags, c.memLimit, ch, o, len(fleet.VCenters), c.keeps && left)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		r.measuresTrue = c.truth
		runs = append(runs, r)
		printDay([]dayRun{r}, len(fleet.VMs()), o, "this CCM's run alone") // kept if a later run fails
		alive = ch.Nodes()
		// The next CCM starts on these Nodes, as initialized, if it keeps
		// them and every one was.
		if left = i+1 < len(ccms) && ccms[i+1].keeps && r.initialized == r.nodes; left {
			continue
		}
		if err := deleteNodes(ctx, e.kube); err != nil {
			return nil, err
		}
	}
	mode := fmt.Sprintf("%v per SOAP call", o.latency)
	if pinned {
		mode += ", pinned"
	}
	if o.memLimit > 0 {
		mode += fmt.Sprintf(", the CCMs under a %d MiB memory limit", o.memLimit>>20)
	}
	printDay(runs, vms, o, mode)
	ours := runs[0]
	label := fmt.Sprintf("day (%d Nodes of %d VMs, %v of churn, %s)", len(chosen), vms, o.duration, mode)
	reports := []report{
		{label + ": CPU of the CCM, s per hour", perHour(ours, func(w dayWindow) float64 { return w.cpu.Seconds() }).format("%.1f"), "a small fraction of the reference's"},
		{"day: vSphere requests per hour beyond long polls", perHour(ours, beyondPolls).format("%.0f"), "independent of the number of Nodes"},
		{"day: Node writes per hour that changed nothing", fmt.Sprintf("%.0f", noOpWrites(ours)), "0"},
		{"day: RSS slope, MB per hour", fmt.Sprintf("%.1f", rssSlope(ours)), "0 within noise"},
	}
	if len(runs) == 3 {
		ref := runs[1]
		reports = append(reports,
			report{"day: reference CCM, CPU s per hour", perHour(ref, func(w dayWindow) float64 { return w.cpu.Seconds() }).format("%.1f"), ""},
			report{"day: reference CCM, vSphere requests per hour beyond long polls", perHour(ref, beyondPolls).format("%.0f"), ""})
	}
	return reports, nil
}

// runDay runs one CCM through initialization and the churn; kept: it
// starts on the Nodes the CCM before it initialized (a switched
// cluster), which ch's Node VMs are.
func runDay(ctx context.Context, e env, name, binary, config string, flags map[string]string, memLimit int64, ch *churn, o dayOptions, vcenters int, kept bool) (dayRun, error) {
	r := dayRun{name: name, delays: map[string][]time.Duration{}, unseen: map[string]int{}}
	var envs []string
	if memLimit > 0 {
		envs = append(envs, "GOMEMLIMIT="+strconv.FormatInt(memlimit.SoftLimit(memLimit), 10))
	}
	logName := "day-" + strings.ReplaceAll(name, " ", "-") + ".log"
	p, err := ccmproc.StartEnv(e.cp, binary, config, filepath.Join(e.work, logName), flags, envs)
	if err != nil {
		return r, err
	}
	defer func() {
		if !p.StopWithin(30 * time.Second) {
			fmt.Printf("%s did not exit within 30 s of SIGTERM: killed\n", name)
		}
	}()
	if len(e.pinCCM) > 0 {
		if err := pin(p.PID(), e.pinCCM...); err != nil {
			return r, err
		}
	}
	if err := p.WaitHealthy(ctx); err != nil {
		return r, fmt.Errorf("%w\n%s", err, tail(p.LogText(), 3000))
	}
	if binary == e.ccm {
		if err := p.WaitStarted(ctx, vcenters, 20*time.Minute); err != nil {
			return r, err
		}
	}
	nodes := ch.Nodes()
	r.nodes = len(nodes)
	if kept {
		r.initialized, r.kept = len(nodes), true
		fmt.Printf("%s: starts on the %d Nodes the CCM before it initialized (a switched cluster)\n", name, len(nodes))
	} else if err := initializeDay(ctx, e, p, name, nodes, o, &r); err != nil || r.initialized < r.nodes {
		return r, err
	}

	// Counted from a quiet moment: the CCM has made no Node write for 5
	// seconds (its last writes of the initialization done), so that no
	// write is counted whose change the watcher's list already holds.
	agent := filepath.Base(binary) + "/"
	auditAt, err := quietNodes(ctx, e, agent, 5*time.Second, 2*time.Minute)
	if err != nil {
		return r, err
	}
	watcher, err := watchNodes(ctx, e.kube)
	if err != nil {
		return r, err
	}
	defer watcher.stop()
	ch.sink = watcher.expect
	// soft ends the churn after o.duration (a minute under way is
	// finished); hard cancels it when this returns, which waits for it.
	soft, stopSoft := context.WithTimeout(ctx, o.duration)
	defer stopSoft()
	hard, stopHard := context.WithCancel(ctx)
	churnErr := make(chan error, 1)
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		churnErr <- ch.run(soft, hard)
	}()
	defer func() {
		stopHard()
		<-churned
	}()

	began := time.Now()
	sample := func() {
		r.rss = append(r.rss, float64(p.Status("VmRSS"))/1024)
		r.rssAt = append(r.rssAt, time.Since(began))
	}
	sample()
	r.goroutines[0] = p.Gauge("go_goroutines")
	cpu0, err := cpuOf(p)
	if err != nil {
		return r, fmt.Errorf("the CCM's CPU time: %w", err)
	}
	methods0 := fleetMethods(ch.fleet)
	_, bench0 := ch.take() // before the watcher's count: a bench write counted here is seen there
	changes0 := watcher.changes()
	last := time.Now()
	windowT := time.NewTicker(o.window)
	defer windowT.Stop()
	rssT := time.NewTicker(30 * time.Second)
	defer rssT.Stop()
	ended := false
	for !ended {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case err := <-churnErr:
			if err != nil {
				return r, fmt.Errorf("churn: %w", err)
			}
			ended = true
		case <-rssT.C:
			sample()
			continue
		case <-windowT.C:
		case <-p.Done():
			return r, fmt.Errorf("the CCM exited during the churn (code %d)\n%s", p.ExitCode(), tail(p.LogText(), 3000))
		}
		now := time.Now()
		w := dayWindow{length: now.Sub(last), writes: map[string]int{}}
		last = now
		cpu1, err := cpuOf(p)
		if err != nil {
			return r, fmt.Errorf("the CCM's CPU time: %w", err)
		}
		w.cpu, cpu0 = cpu1-cpu0, cpu1
		methods1 := fleetMethods(ch.fleet)
		w.methods = map[string]int64{}
		for m, n := range methods1 {
			if d := n - methods0[m]; d > 0 {
				w.methods[m] = d
			}
		}
		methods0 = methods1
		var ws []writeRecord
		ws, auditAt, err = auditWrites(e, auditAt, agent)
		if err != nil {
			return r, err
		}
		for _, x := range ws {
			w.writes[x.kind]++
			if x.node && x.ok {
				w.nodeWrites++
			}
		}
		_, bench1 := ch.take()
		changes1 := watcher.changes()
		w.nodeChanges = changes1 - changes0 - (bench1 - bench0)
		changes0, bench0 = changes1, bench1
		if w.length < o.window/2 { // a last short round is not a round
			continue
		}
		r.windows = append(r.windows, w)
		fmt.Printf("%s: round %d: CPU %.1f s, %d vSphere requests, %d API writes (%d Node writes, %d Node changes), RSS %.1f MB\n",
			name, len(r.windows), w.cpu.Seconds(), sumInt(w.methods), sumInt(w.writes), w.nodeWrites, w.nodeChanges, r.rss[len(r.rss)-1])
	}
	sample()
	r.goroutines[1] = p.Gauge("go_goroutines")
	// The last changes get a status period (and a little) to show.
	if binary != "" && !strings.HasPrefix(config, "--") {
		deadline := time.Now().Add(o.settle)
		for watcher.pendingCount() > 0 && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return r, ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	if err := ch.restore(ctx); err != nil {
		return r, err
	}
	r.delays, r.unseen = watcher.results()
	r.relists = watcher.relistCount()
	r.done, _ = ch.take()
	return r, nil
}

// cpuOf is the CPU the process has used.
func cpuOf(p *ccmproc.Process) (time.Duration, error) { return controlplane.CPUTime(p.PID()) }

func fleetMethods(f *vcsim.Fleet) map[string]int64 {
	out := map[string]int64{}
	for _, v := range f.VCenters {
		for m, n := range v.Methods() {
			out[m] += n
		}
	}
	return out
}

// writeRecord is one of the CCM's API writes.
type writeRecord struct {
	kind     string // "patch nodes/status"
	node, ok bool
}

// auditWrites reads the API server's audit log from offset at and returns
// the writes made by clients whose User-Agent starts with agent (the
// binary's name: client-go's default).
func auditWrites(e env, at int64, agent string) ([]writeRecord, int64, error) {
	ws, next, err := e.cp.WritesFrom(at)
	if err != nil {
		return nil, at, err
	}
	var out []writeRecord
	for _, w := range ws {
		if !strings.HasPrefix(w.UserAgent, agent) {
			continue
		}
		res := w.Resource
		if w.Subresource != "" {
			res += "/" + w.Subresource
		}
		out = append(out, writeRecord{kind: w.Verb + " " + res, node: w.Resource == "nodes", ok: w.Code >= 200 && w.Code < 300})
	}
	return out, next, nil
}

// quietNodes waits until the CCM (its User-Agent starting with agent)
// has written no Node for quiet, at most timeout, and returns the audit
// log's offset.
func quietNodes(ctx context.Context, e env, agent string, quiet, timeout time.Duration) (int64, error) {
	_, at, err := e.cp.WritesFrom(0)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(timeout)
	since := time.Now()
	for time.Since(since) < quiet && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
		var ws []writeRecord
		if ws, at, err = auditWrites(e, at, agent); err != nil {
			return 0, err
		}
		if slices.ContainsFunc(ws, func(w writeRecord) bool { return w.node }) {
			since = time.Now()
		}
	}
	if time.Since(since) < quiet {
		fmt.Printf("the CCM still wrote Nodes %v after they were initialized: counting from now anyway\n", timeout)
	}
	return at, nil
}

// registerReady registers every Node as its kubelet would, Ready.
func registerReady(ctx context.Context, kube kubernetes.Interface, vms []vcsim.VM) error {
	if err := registerAll(ctx, kube, vms); err != nil {
		return err
	}
	var wg sync.WaitGroup
	work := make(chan string)
	errs := make(chan error, len(vms))
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				errs <- setNodeReady(ctx, kube, name)
			}
		}()
	}
	for _, vm := range vms {
		work <- vm.Name
	}
	close(work)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// setNodeReady sets a Node's Ready condition True, again on a conflict
// with the CCM's writes.
func setNodeReady(ctx context.Context, kube kubernetes.Interface, name string) error {
	for {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		setReady(n, v1.ConditionTrue)
		_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// nodeWatcher counts Node changes and times expected ones.
type nodeWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	n       int                        // MODIFIED and DELETED events
	relists int                        // watches ended by an error, listed again
	addrs   map[string]map[string]bool // each Node's current addresses
	zones   map[string]string          // each Node's zone label
	gone    map[string]bool
	pending []change
	delays  map[string][]time.Duration
}

func watchNodes(ctx context.Context, kube kubernetes.Interface) (*nodeWatcher, error) {
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &nodeWatcher{cancel: cancel, done: make(chan struct{}), addrs: map[string]map[string]bool{}, gone: map[string]bool{}, zones: map[string]string{},
		delays: map[string][]time.Duration{}}
	for i := range list.Items {
		w.see(&list.Items[i])
	}
	go func() {
		defer close(w.done)
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			wi, err := kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					// Too old (410) or another error: list again. Changes
					// missed meanwhile are not counted, and said so.
					w.mu.Lock()
					w.relists++
					w.mu.Unlock()
					if l, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
						rv = l.ResourceVersion
						for i := range l.Items {
							w.see(&l.Items[i])
						}
					}
					break
				}
				n, ok := ev.Object.(*v1.Node)
				if !ok {
					continue
				}
				rv = n.ResourceVersion
				switch ev.Type {
				case watch.Modified:
					w.mu.Lock()
					w.n++
					w.mu.Unlock()
					w.see(n)
				case watch.Deleted:
					w.mu.Lock()
					w.n++
					w.gone[n.Name] = true
					w.mu.Unlock()
					w.settle()
				}
			}
			wi.Stop()
		}
	}()
	return w, nil
}

func (w *nodeWatcher) see(n *v1.Node) {
	set := map[string]bool{}
	for _, a := range n.Status.Addresses {
		set[a.Address] = true
	}
	w.mu.Lock()
	w.addrs[n.Name] = set
	w.zones[n.Name] = n.Labels[v1.LabelTopologyZone]
	w.mu.Unlock()
	w.settle()
}

// expect adds a change to wait for. A new address or zone of a Node
// supersedes the one still pending; a Node deleted ends what was pending
// for it.
func (w *nodeWatcher) expect(c change) {
	w.mu.Lock()
	w.pending = slices.DeleteFunc(w.pending, func(p change) bool {
		return p.node == c.node && (p.kind == c.kind || c.kind == "deleted")
	})
	w.pending = append(w.pending, c)
	w.mu.Unlock()
	w.settle()
}

// settle records the delay of every pending change the Nodes now show.
func (w *nodeWatcher) settle() {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = slices.DeleteFunc(w.pending, func(c change) bool {
		shown := false
		switch c.kind {
		case "address":
			shown = w.addrs[c.node][c.ip]
		case "zone":
			shown = w.zones[c.node] == c.ip
		case "deleted":
			shown = w.gone[c.node]
		}
		if shown {
			w.delays[c.kind] = append(w.delays[c.kind], now.Sub(c.at))
		}
		return shown
	})
}

func (w *nodeWatcher) pendingCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

func (w *nodeWatcher) changes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// results are the delays by kind and the changes still pending.
func (w *nodeWatcher) results() (map[string][]time.Duration, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	unseen := map[string]int{}
	for _, c := range w.pending {
		unseen[c.kind]++
	}
	out := map[string][]time.Duration{}
	for k, d := range w.delays {
		out[k] = slices.Sorted(slices.Values(d))
	}
	return out, unseen
}

func (w *nodeWatcher) stop() {
	w.cancel()
	<-w.done
}

// restore powers on what the churn left off and detaches its tags.
func (c *churn) restore(ctx context.Context) error {
	var errs []error
	for _, vm := range c.off {
		errs = append(errs, c.power(ctx, vm, true))
	}
	c.off = nil
	for _, tg := range c.tagged {
		errs = append(errs, tg.vc.Untag(ctx, "ops", "maintenance", tg.obj))
	}
	c.tagged = nil
	return errors.Join(errs...)
}

func sumInt[V int | int64](m map[string]V) V {
	var t V
	for _, v := range m {
		t += v
	}
	return t
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// relistCount is how many watches ended by an error.
func (w *nodeWatcher) relistCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.relists
}

// initializeDay registers nodes as kubelets would and waits until the
// CCM has initialized them, or o.initTimeout has passed (measured too:
// how far it got; r.initialized says).
func initializeDay(ctx context.Context, e env, p *ccmproc.Process, name string, nodes []vcsim.VM, o dayOptions, r *dayRun) error {
	start := time.Now()
	registered := make(chan error, 1)
	go func() { registered <- registerReady(ctx, e.kube, nodes) }()
	times, err := watchInitTimes(ctx, e.kube, nodes, start, o.initTimeout)
	if errors.Is(err, errTimeout) && ctx.Err() == nil {
		r.initialized, r.init = len(times), time.Since(start)
		fmt.Printf("%s: %d of %d Nodes initialized in %v; no churn for it\n", name, len(times), len(nodes), r.init.Round(time.Second))
		<-registered
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(p.LogText(), 3000))
	}
	r.initialized = len(times)
	// The kubelets' Ready writes end before anything is counted: they
	// are Node changes this process made.
	if err := <-registered; err != nil {
		return err
	}
	r.init = quantile(times, 1)
	fmt.Printf("%s: %d Nodes initialized in %v\n", name, len(nodes), r.init.Round(100*time.Millisecond))
	return nil
}
