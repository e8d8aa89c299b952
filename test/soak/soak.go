package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// Settings of the soak's cluster.
const (
	loginBackoff   = 3 * time.Minute  // the default, and the least the config allows
	sessionTimeout = 30 * time.Second // vcsim: idle sessions (of killed replicas) expire after 30-60 s
	settleWithin   = 30 * time.Second
	replicas       = 3
	// observer is the replica no fault kills: it runs the whole soak, so
	// that its goroutine and memory growth is checked in every run. It
	// competes for the lease less often (a longer retry period), so the
	// leader killed is mostly another replica and fail-overs go on.
	observer = replicas - 1
	// quietEnd: no fault that changes a replica's role or restarts it in
	// the last this of the faults, so that the observer keeps one role for
	// warmUp plus the minute its growth is measured over.
	quietEnd = 2 * time.Minute
)

// soak is the system under test and what the soak knows to be true.
type soak struct {
	cp     *controlplane.ControlPlane
	kube   kubernetes.Interface
	fleet  *vcsim.Fleet
	binary string
	work   string
	rnd    *rand.Rand
	truth  *truth

	mu        sync.Mutex
	ccms      [replicas]*ccmproc.Process
	started   [replicas]int // processes started per slot
	killedAt  []time.Time
	faultsEnd time.Time // when inject stops
	removed   string    // vCenter left out of the config, if any
	failures  []string  // invariant violations
	faults    map[string]int
	checks    map[string]int
	stopInf   context.CancelFunc
	reverts   []revert        // pending undos (the inject loop's own)
	busy      map[string]bool // what pending faults hold: a vCenter's front or Secret, a VM, the replicas
	procs     map[*ccmproc.Process]*usage
}

func newSoak(ctx context.Context, cp *controlplane.ControlPlane, binary, work string, rnd *rand.Rand) (*soak, error) {
	kube, err := cp.Client()
	if err != nil {
		return nil, err
	}
	fleet, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1"}, Clusters: 2, Hosts: 2, VMs: 3},
		vcsim.Spec{Name: "vc-b", Datacenters: []string{"dc-2"}, Clusters: 2, Hosts: 2, VMs: 3},
		vcsim.Spec{Name: "vc-c", Datacenters: []string{"dc-3"}, Clusters: 1, Hosts: 2, VMs: 3})
	if err != nil {
		return nil, err
	}
	s := &soak{cp: cp, kube: kube, fleet: fleet, binary: binary, work: work, rnd: rnd, truth: newTruth(fleet),
		faults: map[string]int{}, checks: map[string]int{}, busy: map[string]bool{}, procs: map[*ccmproc.Process]*usage{}}
	for _, v := range fleet.VCenters {
		if err := v.SetSessionTimeout(ctx, sessionTimeout); err != nil {
			s.close()
			return nil, err
		}
		if err := s.setSecret(ctx, v, v.CurrentPassword(), true); err != nil {
			s.close()
			return nil, err
		}
	}
	if err := s.fleet.TagZones(ctx); err != nil {
		s.close()
		return nil, err
	}
	if err := s.truth.stretch(ctx, "vc-c"); err != nil {
		s.close()
		return nil, err
	}
	if err := s.writeConfig(""); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *soak) close() {
	if s.stopInf != nil {
		s.stopInf()
	}
	s.mu.Lock()
	for _, p := range s.ccms {
		if p != nil {
			p.Stop()
		}
	}
	s.mu.Unlock()
	s.fleet.Close()
}

func secretName(vc string) string { return "creds-" + vc }

// setSecret writes the credential Secret of a vCenter (reference key
// format: <server>.username and .password); without password, the key is
// removed.
func (s *soak) setSecret(ctx context.Context, v *vcsim.VCenter, password string, create bool) error {
	data := map[string][]byte{v.Server() + ".username": []byte(v.User)}
	if password != "" {
		data[v.Server()+".password"] = []byte(password)
	}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName(v.Name), Namespace: "kube-system"}, Data: data}
	var err error
	if create {
		_, err = s.kube.CoreV1().Secrets("kube-system").Create(ctx, sec, metav1.CreateOptions{})
	} else {
		_, err = s.kube.CoreV1().Secrets("kube-system").Update(ctx, sec, metav1.UpdateOptions{})
	}
	return err
}

func (s *soak) configPath() string { return filepath.Join(s.work, "vsphere.yaml") }

// writeConfig writes the cloud config, leaving out the vCenter without
// (if not empty). Credentials come from one Secret per vCenter.
func (s *soak) writeConfig(without string) error {
	per := map[string][]string{}
	for _, v := range s.fleet.VCenters {
		per[v.Name] = []string{"secretName: " + secretName(v.Name), "secretNamespace: kube-system"}
	}
	// Tags have no change notification: the CCM re-reads them every
	// tagRefreshInterval (default 5m). The settle window is 30 s, so a
	// zone tag changed after the last refresh must be re-read within it.
	text := s.fleet.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 10s\n  tagRefreshInterval: 10s\n"+
		"labels:\n  zone: k8s-zone\n  region: k8s-region\n  onDrift: relabel\n", per) +
		fmt.Sprintf("hostGroupZones:\n- cluster: %s\n  hostGroups:\n    site-a-hosts: zone-site-a\n    site-b-hosts: zone-site-b\n",
			s.fleet.VCenter("vc-c").VMs[0].Cluster)
	var out []string
	skip := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "    user: "), strings.HasPrefix(line, "    password: "):
			continue // from the Secrets only
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "    ") && strings.HasSuffix(line, ":"):
			skip = without != "" && line == "  "+without+":"
		case !strings.HasPrefix(line, " "):
			skip = false
		}
		if !skip {
			out = append(out, line)
		}
	}
	s.removed = without
	// Replaced as the kubelet replaces a ConfigMap volume: running replicas
	// follow the file and must never read it half written.
	tmp := s.configPath() + ".new"
	if err := os.WriteFile(tmp, []byte(strings.Join(out, "\n")), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.configPath())
}

// startCCM starts the replica of a slot.
func (s *soak) startCCM(slot int) error {
	s.mu.Lock()
	s.started[slot]++
	n := s.started[slot]
	s.mu.Unlock()
	retry := "2s"
	if slot == observer {
		retry = "4s" // at most renewDeadline/1.2
	}
	p, err := ccmproc.Start(s.cp, s.binary, s.configPath(), filepath.Join(s.work, fmt.Sprintf("ccm-%d-%d.log", slot, n)), map[string]string{
		"--v": "2", "--leader-elect": "true", "--leader-elect-lease-duration": "8s", "--leader-elect-renew-deadline": "6s",
		"--leader-elect-retry-period": retry, "--node-status-update-frequency": "5s", "--node-monitor-period": "2s"})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ccms[slot] = p
	s.procs[p] = &usage{started: time.Now()}
	s.mu.Unlock()
	return nil
}

// start registers the Nodes, starts the replicas and the deletion watch,
// and waits until every Node is initialized.
func (s *soak) start(ctx context.Context) error {
	if err := s.watchDeletions(ctx); err != nil {
		return err
	}
	for _, n := range s.truth.nodes() {
		if err := controlplane.RegisterNode(ctx, s.kube, n.name, strings.ToUpper(n.uuid)); err != nil {
			return err
		}
	}
	// The first replica leads before the others start: a killable one, so
	// that the first leader kill is a fail-over.
	for i := range replicas {
		if err := s.startCCM(i); err != nil {
			return err
		}
		if i == 0 {
			if err := s.waitLeader(ctx, 0); err != nil {
				return err
			}
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := s.labelsTrue(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Nodes not initialized within 2 minutes: %w", err)
		}
		for _, p := range s.ccms {
			if p.Exited() {
				log, _ := os.ReadFile(p.LogPath())
				return fmt.Errorf("CCM %s exited at start:\n%s", p, log)
			}
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	s.sampleResources("start")
	return nil
}

// watchDeletions checks every Node deletion against the truth: a Node
// may be deleted only when its VM exists nowhere.
func (s *soak) watchDeletions(ctx context.Context) error {
	ictx, cancel := context.WithCancel(ctx)
	s.stopInf = cancel
	factory := informers.NewSharedInformerFactory(s.kube, 0)
	inf := factory.Core().V1().Nodes().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		n, ok := obj.(*v1.Node)
		if !ok {
			return
		}
		s.count(s.checks, "Node deletions checked")
		if where, exists := s.truth.exists(n.Name); exists {
			s.fail("Node %s deleted while its VM exists (%s)", n.Name, where)
		}
	}})
	if err != nil {
		return err
	}
	factory.Start(ictx.Done())
	if !cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) {
		return errors.New("node informer not synced")
	}
	return nil
}

func (s *soak) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Printf("VIOLATION %s: %s\n", time.Now().UTC().Format("15:04:05.000"), msg)
	s.mu.Lock()
	s.failures = append(s.failures, msg)
	s.mu.Unlock()
}

func (s *soak) count(m map[string]int, what string) {
	s.mu.Lock()
	m[what]++
	s.mu.Unlock()
}

func (s *soak) countOf(m map[string]int, what string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m[what]
}

func (s *soak) violations() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) == 0 {
		return nil
	}
	return fmt.Errorf("%d invariant violations:\n  %s", len(s.failures), strings.Join(s.failures, "\n  "))
}

// labelsTrue checks that every Node of an existing VM is initialized with
// the zone and region its VM has, and that no Node of a destroyed VM is
// left.
func (s *soak) labelsTrue(ctx context.Context) error {
	list, err := s.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	have := map[string]v1.Node{}
	for _, n := range list.Items {
		have[n.Name] = n
	}
	var errs []error
	for _, want := range s.truth.nodes() {
		n, ok := have[want.name]
		switch {
		case !want.exists && ok:
			errs = append(errs, fmt.Errorf("%s: its VM was destroyed, the Node is still there", want.name))
		case !want.exists:
		case !ok:
			errs = append(errs, fmt.Errorf("%s: missing", want.name))
		case slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == controlplane.UninitializedTaint }):
			errs = append(errs, fmt.Errorf("%s: not initialized", want.name))
		default:
			for label, v := range map[string]string{v1.LabelTopologyZone: want.zone, v1.LabelFailureDomainBetaZone: want.zone,
				v1.LabelTopologyRegion: want.region, v1.LabelFailureDomainBetaRegion: want.region} {
				if n.Labels[label] != v {
					errs = append(errs, fmt.Errorf("%s: %s=%q, its VM has %q", want.name, label, n.Labels[label], v))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// settle reverts every fault, restarts what is down, and waits for the
// labels to equal the truth within settleWithin; then it checks the
// resources of the replicas.
func (s *soak) settle(ctx context.Context) error {
	s.revertAll(ctx)
	for i := range replicas {
		s.mu.Lock()
		p := s.ccms[i]
		s.mu.Unlock()
		if p == nil || p.Exited() {
			if err := s.startCCM(i); err != nil {
				return err
			}
		}
	}
	for i := range replicas {
		if err := s.ccms[i].WaitHealthy(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("soak: faults stopped; every Node must be true within %v\n", settleWithin)
	deadline := time.Now().Add(settleWithin)
	var last error
	for time.Now().Before(deadline) {
		s.count(s.checks, "label checks after the faults")
		if last = s.labelsTrue(ctx); last == nil {
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	if last != nil {
		s.fail("labels not true %v after the faults stopped: %v%s", settleWithin, last, s.whyKept(ctx))
	}
	s.checkLogins()
	s.sampleResources("end")
	s.checkResources()
	return nil
}

// whyKept is, for each Node of a destroyed VM still there, the last word
// of the leader on it (InstanceExists' verdict, or the last line naming
// it), so that a failure is diagnosed from its message alone.
func (s *soak) whyKept(ctx context.Context) string {
	p := s.ccms[s.leader()]
	if p == nil {
		return ""
	}
	list, err := s.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "\n  (Nodes not listed: " + err.Error() + ")"
	}
	present := map[string]bool{}
	for _, n := range list.Items {
		present[n.Name] = true
	}
	log := strings.Split(p.LogText(), "\n")
	var b strings.Builder
	// What the leader's inventories hold, beside the truth.
	if text, err := p.Get("/metrics"); err == nil {
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "vsphere_ccm_inventory_vms{") || strings.HasPrefix(line, "vsphere_ccm_inventory_sync_age_seconds{") ||
				strings.HasPrefix(line, "vsphere_ccm_inventory_full_reads_total{") || strings.HasPrefix(line, "vsphere_ccm_vcenter_up{") {
				fmt.Fprintf(&b, "\n  %s: %s", p, line)
			}
		}
	}
	for _, want := range s.truth.nodes() {
		if want.exists || !present[want.name] {
			continue
		}
		last := -1
		for i := len(log) - 1; i >= 0 && last < 0; i-- {
			if strings.Contains(log[i], `node="`+want.name+`"`) && strings.Contains(log[i], "exists.go") {
				last = i
			}
		}
		if last >= 0 {
			fmt.Fprintf(&b, "\n  %s, last verdict on %s: %s", p, want.name, log[last])
			continue
		}
		for i := len(log) - 1; i >= 0 && last < 0; i-- {
			if strings.Contains(log[i], want.name) {
				last = i
			}
		}
		fmt.Fprintf(&b, "\n  %s gave no verdict on %s (InstanceExists found its VM, or was not asked)", p, want.name)
		if last >= 0 {
			fmt.Fprintf(&b, "; the last line naming it: %s", log[last])
		}
	}
	return b.String()
}

// waitLeader waits until the replica of slot holds the lease.
func (s *soak) waitLeader(ctx context.Context, slot int) error {
	deadline := time.Now().Add(time.Minute)
	for !s.ccms[slot].LogContains("Successfully acquired lease") {
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %d did not acquire the lease within a minute", slot)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
