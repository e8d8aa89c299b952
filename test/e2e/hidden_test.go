//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

const noPermissionVerdicts = `vsphere_ccm_vm_absence_verdicts_total{verdict="no_permission"}`

// TestHiddenVMsKept: five NotReady Nodes whose VMs the CCM's user can no
// longer see (their permission removed: gone from views and searches,
// NoPermission on a read of their references) are kept by the real lifecycle controller, by the leader
// that saw them go, by the standby that takes over when the leader is
// killed and never saw them, and by a CCM started afresh; the Nodes of a
// destroyed VM and of a hidden VM destroyed afterwards are deleted as
// before.
func TestHiddenVMsKept(t *testing.T) {
	// Not parallel: its lease is renewed within seconds (as TestLeaderFailover).
	h := setup(t)
	replicas := h.startReplicas()
	a, b, c := h.fleet.VCenter("vc-a"), h.fleet.VCenter("vc-b"), h.fleet.VCenter("vc-c")
	hidden := append(append([]vcsim.VM{}, a.VMs...), b.VMs[0])
	hiddenThenDestroyed, destroyed := b.VMs[1], c.VMs[0]
	all := append(append([]vcsim.VM{}, hidden...), hiddenThenDestroyed, destroyed)
	for _, vm := range all {
		h.register(t, vm, false)
	}
	h.waitInitialized(t, all...)
	for _, vm := range all {
		n, err := h.node(vm.Name)
		must.OK(t, err)
		if n.Labels[provider.LabelVM] != vm.Ref.Value || n.Labels[provider.LabelVCenter] != vm.VCenter {
			t.Fatalf("%s records %s=%q %s=%q; want %s in %s", vm.Name, provider.LabelVCenter, n.Labels[provider.LabelVCenter],
				provider.LabelVM, n.Labels[provider.LabelVM], vm.Ref.Value, vm.VCenter)
		}
		notReady(t, h, vm.Name)
	}
	leader := leaderOf(t, replicas)

	for _, vm := range append(hidden, hiddenThenDestroyed) {
		h.fleet.VCenter(vm.VCenter).Hide(vm.Ref)
	}
	destroy(t, h, c, destroyed)
	destroy(t, h, b, hiddenThenDestroyed)
	for _, vm := range []vcsim.VM{destroyed, hiddenThenDestroyed} {
		poll.NoError(t, vm.Name+"'s Node deleted", time.Minute, func() error {
			if _, err := h.node(vm.Name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	}
	keptBy(t, h, leader, hidden, "the leader that saw them go")
	for _, vm := range hidden {
		h.waitEvent(t, vm.Name, provider.ReasonVMNotVisible, vm.Ref.Value, "System.Read")
	}

	standby := replicas[0]
	if standby == leader {
		standby = replicas[1]
	}
	leader.Kill()
	poll.NoError(t, "the standby takes the lease", time.Minute, func() error {
		if !strings.Contains(standby.LogText(), leaseAcquired) {
			return errNotYet
		}
		return nil
	})
	keptBy(t, h, standby, hidden, "the standby that took over")
	standby.Stop()
	keptBy(t, h, h.startCCM(), hidden, "a CCM started afresh")
}

// keptBy waits until proc has kept each hidden VM's Node twice (two
// lifecycle passes: the sync point), then checks that every one is
// still there.
func keptBy(t *testing.T, h *harness, proc *ccm, hidden []vcsim.VM, who string) {
	t.Helper()
	must.OK(t, proc.WaitHealthy(h.ctx))
	poll.NoError(t, "two passes over the hidden VMs' Nodes by "+who, 2*time.Minute, func() error {
		got, err := proc.Metric(noPermissionVerdicts)
		if err != nil {
			return err
		}
		if got < float64(2*len(hidden)) {
			return fmt.Errorf("%v no_permission verdicts: %w", got, errNotYet)
		}
		return nil
	})
	for _, vm := range hidden {
		if n, err := h.node(vm.Name); err != nil || n.DeletionTimestamp != nil {
			t.Errorf("%s: the Node of hidden VM %s: %v; want it kept", who, vm.Name, err)
		}
	}
}

// notReady reports the Node NotReady, as its kubelet's lease running out
// would.
func notReady(t *testing.T, h *harness, name string) {
	t.Helper()
	n, err := h.node(name)
	must.OK(t, err)
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, LastHeartbeatTime: metav1.Now(),
		LastTransitionTime: metav1.Now(), Reason: "KubeletNotReady"}}
	_, err = h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)
}

// leaderOf waits until exactly one replica holds the lease and returns it.
func leaderOf(t *testing.T, replicas []*ccm) *ccm {
	t.Helper()
	var leader *ccm
	poll.NoError(t, "one leader", 30*time.Second, func() error {
		var won []*ccm
		for _, r := range replicas {
			if strings.Contains(r.LogText(), leaseAcquired) {
				won = append(won, r)
			}
		}
		if len(won) != 1 {
			return fmt.Errorf("%d replicas hold the lease", len(won))
		}
		leader = won[0]
		return nil
	})
	return leader
}
