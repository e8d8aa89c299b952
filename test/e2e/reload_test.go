//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// replaceConfig swaps the cloud-config file as the kubelet swaps a
// ConfigMap volume: never half written.
func (h *harness) replaceConfig(t *testing.T, text string) {
	t.Helper()
	tmp := h.cfgPath + ".new"
	must.OK(t, os.WriteFile(tmp, []byte(text), 0o600))
	must.OK(t, os.Rename(tmp, h.cfgPath))
}

// TestConfigReload: two replicas with leader election, the binary as the
// Deployment runs it (POD_NAME and POD_NAMESPACE from the downward API, a
// 60 s lease). An invalid edit of the cloud-config is refused by both (an
// event on the Pod, vsphere_ccm_config_refused 1) and the leader keeps
// initializing Nodes on its running config. A valid edit stops both: each
// exits 0, and the leader releases the lease (held by released-by-<it>
// for one second, instead of by it for 60 s), after closing its vCenter
// connections.
// Restarted, as the kubelet restarts a container, a replica takes the lease
// at once and initializes Nodes with the new config.
func TestConfigReload(t *testing.T) {
	t.Parallel()
	h := setup(t)
	pod, err := h.kube.CoreV1().Pods("kube-system").Create(h.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vsphere-ccm-0"},
		Spec: v1.PodSpec{ServiceAccountName: "vsphere-cloud-controller-manager", AutomountServiceAccountToken: new(false), Containers: []v1.Container{{Name: "ccm", Image: "ccm"}}}}, metav1.CreateOptions{})
	must.OK(t, err)
	h.ccmEnv = []string{"POD_NAME=" + pod.Name, "POD_NAMESPACE=kube-system"}
	le := []string{"--leader-elect=true", "--leader-elect-lease-duration=60s",
		"--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=1s"}
	replicas := []*ccm{h.startCCM(le...), h.startCCM(le...)}
	vms := h.fleet.VMs()
	h.register(t, vms[0], false)
	h.waitInitialized(t, vms[0])
	var leader *ccm
	poll.NoError(t, "one leader", 30*time.Second, func() error {
		for _, r := range replicas {
			if strings.Contains(r.LogText(), leaseAcquired) {
				leader = r
				return nil
			}
		}
		return errNotYet
	})
	good, err := os.ReadFile(h.cfgPath)
	must.OK(t, err)

	// An invalid edit: refused, and the running config keeps serving.
	h.replaceConfig(t, strings.Replace(string(good), "zone: k8s-zone", "zoen: k8s-zone", 1))
	h.waitPodEvent(t, pod.Name, "CloudConfigRefused", `unknown key "zoen"`)
	poll.NoError(t, "config_refused 1", 30*time.Second, func() error {
		if v := leader.Gauge("vsphere_ccm_config_refused"); v != 1 {
			return fmt.Errorf("vsphere_ccm_config_refused %v", v)
		}
		return nil
	})
	h.register(t, vms[1], false)
	h.waitInitialized(t, vms[1])
	for _, r := range replicas {
		if r.Exited() {
			t.Fatalf("%s exited on an invalid config", r)
		}
	}

	// A valid edit: both stop, exit 0, the lease is released.
	changed := strings.Replace(string(good), "  region: k8s-region\n", "  region: k8s-region\n  additional:\n    - {category: k8s-zone, label: example.com/site}\n", 1)
	if changed == string(good) {
		t.Fatal("the config has no labels.region line to extend")
	}
	h.replaceConfig(t, changed)
	for _, r := range replicas {
		select {
		case <-r.Done():
		case <-h.ctx.Done():
			t.Fatal("a replica did not stop after the valid change")
		}
		if code := r.ExitCode(); code != 0 {
			t.Errorf("%s exited %d, want 0", r, code)
		}
	}
	h.waitPodEvent(t, pod.Name, "CloudConfigChanged", "labels")
	lease, err := h.kube.CoordinationV1().Leases("kube-system").Get(h.ctx, "cloud-controller-manager", metav1.GetOptions{})
	must.OK(t, err)
	if holder := lease.Spec.HolderIdentity; holder == nil || !strings.HasPrefix(*holder, "released-by-") || *lease.Spec.LeaseDurationSeconds != 1 {
		t.Errorf("the lease after the leader exited: holder %v, duration %v; want released (released-by-<leader>, 1 s)", holder, lease.Spec.LeaseDurationSeconds)
	}
	if !strings.Contains(leader.LogText(), "Released the leader lease") {
		t.Errorf("the leader did not log releasing the lease")
	}

	// Restarted: the new config applies.
	h.startCCM(le...)
	h.register(t, vms[2], false)
	h.waitInitialized(t, vms[2])
	n, err := h.node(vms[2].Name)
	must.OK(t, err)
	if n.Labels["example.com/site"] != "zone-"+vms[2].Cluster {
		t.Errorf("labels of a Node initialized after the restart: %v", n.Labels)
	}
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
