//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// replaceConfig swaps the cloud-config file as the kubelet swaps a
// ConfigMap volume: never half written.
func (h *harness) replaceConfig(t *testing.T, text string) {
	t.Helper()
	writeAtomic(t, h.cfgPath, []byte(text))
}

// writeAtomic replaces path by a rename: never half written.
func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	must.OK(t, os.WriteFile(tmp, b, 0o600))
	must.OK(t, os.Rename(tmp, path))
}

// supervised is one replica under a kubelet-like supervisor: its process
// is started again, one second after it exits, until stop.
type supervised struct {
	pod  string
	done chan struct{}
	quit chan struct{}

	mu     sync.Mutex
	procs  []*ccm
	exits  []time.Time
	starts []time.Time
	err    error
}

// supervise runs a replica as the Pod pod (POD_NAME, POD_NAMESPACE).
func (h *harness) supervise(pod string, flags ...string) *supervised {
	s := &supervised{pod: pod, done: make(chan struct{}), quit: make(chan struct{})}
	env := append([]string{"POD_NAME=" + pod, "POD_NAMESPACE=kube-system"}, h.ccmEnv...)
	go func() {
		defer close(s.done)
		for {
			c, err := h.launch(env, flags...)
			s.mu.Lock()
			s.err = err
			if err == nil {
				s.procs = append(s.procs, c)
				s.starts = append(s.starts, time.Now())
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
			select {
			case <-c.Done():
			case <-s.quit:
				return
			}
			s.mu.Lock()
			s.exits = append(s.exits, time.Now())
			s.mu.Unlock()
			select {
			case <-time.After(time.Second):
			case <-s.quit:
				return
			}
		}
	}()
	return s
}

// stop ends the supervision; the processes are stopped by the test's
// cleanup.
func (s *supervised) stop() {
	close(s.quit)
	<-s.done
}

// current is the replica's latest process, and how many were started.
func (s *supervised) current() (*ccm, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.procs) == 0 {
		return nil, 0
	}
	return s.procs[len(s.procs)-1], len(s.procs)
}

// leaderGaps follows the leader lease, every 100 ms, until stop: the
// longest time without a valid holder (none, released, or expired by its
// own renew time and duration).
type leaderGaps struct {
	done chan struct{}
	quit chan struct{}
	max  time.Duration
}

func (h *harness) followLease(name string) *leaderGaps {
	g := &leaderGaps{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(g.done)
		var since time.Time // first moment without a valid holder
		for {
			l, err := h.kube.CoordinationV1().Leases("kube-system").Get(h.ctx, name, metav1.GetOptions{})
			now := time.Now()
			valid := err == nil && l.Spec.HolderIdentity != nil && !strings.HasPrefix(*l.Spec.HolderIdentity, "released-by-") &&
				l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil &&
				l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second).After(now)
			switch {
			case !valid && since.IsZero():
				since = now
			case valid && !since.IsZero():
				g.max = max(g.max, now.Sub(since))
				since = time.Time{}
			}
			select {
			case <-g.quit:
				if !since.IsZero() {
					g.max = max(g.max, time.Since(since))
				}
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return g
}

func (g *leaderGaps) stop() time.Duration {
	close(g.quit)
	<-g.done
	return g.max
}

// TestConfigChangeInTurn: two replicas with leader election at the
// framework's default timing (15 s lease, 2 s retry), the binary as the
// Deployment runs it (POD_NAME and POD_NAMESPACE from the downward API, the
// shipped RBAC), each under a kubelet-like supervisor that restarts it
// when it exits.
//   - A CA bundle replaced with garbage, then with a CA that did not sign
//     the vCenter's certificate, is refused by both (a CloudConfigRefused
//     event each); nothing restarts and the leader goes on initializing.
//   - A config edited in place and read while half written is refused,
//     never acted on.
//   - A valid change restarts each replica once: the standby first; the
//     leader only once the standby runs the new config. At no moment is
//     the cluster without a leader for more than one lease duration, and
//     exactly one new process takes the lease (one cold read). A Node
//     registered afterwards gets the new config's labels.
func TestConfigChangeInTurn(t *testing.T) {
	// Not parallel: leader election at its default timing, measured.
	h := setup(t)
	// vc-a's CA bundle in a file of its own, to be replaced.
	caPath := filepath.Join(h.work, "ca.pem")
	goodCA, err := os.ReadFile(h.fleet.CAFile)
	must.OK(t, err)
	must.OK(t, os.WriteFile(caPath, goodCA, 0o600))
	text, err := os.ReadFile(h.cfgPath)
	must.OK(t, err)
	good := strings.Replace(string(text), "caFile: "+h.fleet.CAFile, "caFile: "+caPath, 1)
	h.replaceConfig(t, good)
	for _, name := range []string{"vsphere-ccm-a", "vsphere-ccm-b"} {
		_, err := h.kube.CoreV1().Pods("kube-system").Create(h.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{ServiceAccountName: "vsphere-cloud-controller-manager", AutomountServiceAccountToken: new(false), Containers: []v1.Container{{Name: "ccm", Image: "ccm"}}}}, metav1.CreateOptions{})
		must.OK(t, err)
	}
	flags := []string{"--leader-elect=true", "--config-restart-min-uptime=10s", "--config-restart-jitter=3s"}
	replicas := []*supervised{h.supervise("vsphere-ccm-a", flags...), h.supervise("vsphere-ccm-b", flags...)}
	defer func() {
		for _, r := range replicas {
			r.stop()
		}
	}()
	vms := h.fleet.VMs()
	h.register(t, vms[0], false)
	h.waitInitialized(t, vms[0])
	var leader, standby *supervised
	poll.NoError(t, "one leader", 60*time.Second, func() error {
		for i, r := range replicas {
			if c, _ := r.current(); c != nil && strings.Contains(c.LogText(), leaseAcquired) {
				leader, standby = r, replicas[1-i]
				return nil
			}
		}
		return errNotYet
	})

	// Bad CA bundles: refused by both, nothing restarts.
	other, err := vcsim.OtherCA()
	must.OK(t, err)
	for _, bad := range []struct {
		content []byte
		why     string
	}{
		{[]byte("-----BEGIN CERTIFICATE-----\nMIIB"), "ends inside a PEM block"},
		{other, "TLS certificate not trusted"},
	} {
		writeAtomic(t, caPath, bad.content)
		for _, r := range replicas {
			h.waitPodEvent(t, r.pod, "CloudConfigRefused", bad.why)
		}
	}
	writeAtomic(t, caPath, goodCA)
	h.register(t, vms[1], false)
	h.waitInitialized(t, vms[1])

	// Edited in place: a half-written file is refused, not acted on.
	changed := strings.Replace(good, "  region: k8s-region\n", "  region: k8s-region\n  additional:\n    - {category: k8s-zone, label: example.com/site}\n", 1)
	if changed == good {
		t.Fatal("the config has no labels.region line to extend")
	}
	half := changed[:strings.Index(changed, "vcenter:")+len("vcenter:\n  vc-a:\n    serv")]
	must.OK(t, os.WriteFile(h.cfgPath, []byte(half), 0o600))
	for _, r := range replicas {
		h.waitPodEvent(t, r.pod, "CloudConfigRefused", h.cfgPath)
	}
	for _, r := range replicas {
		if _, n := r.current(); n != 1 {
			t.Fatalf("%s restarted on a refused config", r.pod)
		}
	}

	// The valid change, written in place too.
	gaps := h.followLease("cloud-controller-manager")
	edited := time.Now()
	must.OK(t, os.WriteFile(h.cfgPath, []byte(changed), 0o600))
	var newLeader *ccm
	poll.NoError(t, "both replicas restarted, one leading", 3*time.Minute, func() error {
		for _, r := range replicas {
			if _, n := r.current(); n < 2 {
				return fmt.Errorf("%s not restarted yet", r.pod)
			}
		}
		for _, r := range replicas {
			if c, _ := r.current(); strings.Contains(c.LogText(), leaseAcquired) {
				newLeader = c
				return nil
			}
		}
		return errors.New("no new leader yet")
	})
	h.register(t, vms[2], false)
	h.waitInitialized(t, vms[2])
	worst := gaps.stop()
	t.Logf("the change was applied by both replicas; the longest time without a valid leader lease: %.1fs (lease duration 15s, default timing)", worst.Seconds())
	if worst > 15*time.Second {
		t.Errorf("the cluster was without a leader for %v, more than one lease duration", worst)
	}
	n, err := h.node(vms[2].Name)
	must.OK(t, err)
	if n.Labels["example.com/site"] != "zone-"+vms[2].Cluster {
		t.Errorf("labels of a Node initialized after the change: %v", n.Labels)
	}
	// Each restarted once, the standby first, the leader only after the
	// standby's new process had started.
	leader.mu.Lock()
	standby.mu.Lock()
	if len(leader.starts) != 2 || len(standby.starts) != 2 {
		t.Errorf("starts: leader %d, standby %d; want 2 each", len(leader.starts), len(standby.starts))
	} else if !standby.exits[0].Before(leader.exits[0]) || !standby.starts[1].Before(leader.exits[0]) {
		t.Errorf("the leader exited at %v, the standby exited at %v and started again at %v: the leader must go last",
			leader.exits[0].Sub(edited), standby.exits[0].Sub(edited), standby.starts[1].Sub(edited))
	}
	leaderOld := leader.procs[0]
	fresh := []*ccm{leader.procs[1], standby.procs[1]}
	leader.mu.Unlock()
	standby.mu.Unlock()
	// One cold read: one new process took the lease. Which one is a race
	// of their electors' retries (the old leader's new process often wins
	// it: it reads the released lease as it starts).
	took := 0
	for _, c := range fresh {
		if strings.Contains(c.LogText(), leaseAcquired) {
			took++
		}
	}
	if took != 1 || !slices.Contains(fresh, newLeader) {
		t.Errorf("%d new processes took the lease, want 1", took)
	}
	t.Logf("the lease went to %s (%s's new process)", newLeader, map[bool]string{true: leader.pod, false: standby.pod}[newLeader == fresh[0]])
	if !strings.Contains(leaderOld.LogText(), "standby vsphere-ccm-") || !strings.Contains(leaderOld.LogText(), "Released the leader lease") {
		t.Errorf("the old leader did not log going with a standby on the new config and releasing the lease")
	}
	h.waitPodEvent(t, leader.pod, "CloudConfigChanged", "labels")
}

// waitPodEvent waits for an event with reason on the Pod whose message
// contains text.
func (h *harness) waitPodEvent(t *testing.T, pod, reason, text string) {
	t.Helper()
	poll.NoError(t, reason+" event on Pod "+pod, 60*time.Second, func() error {
		evs, err := h.kube.CoreV1().Events("kube-system").List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && strings.Contains(e.Message, text) {
				return nil
			}
		}
		return errors.New("not yet")
	})
}
