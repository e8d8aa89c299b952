//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestNodesInitialized: every Node (half of them reporting the byte-swapped
// SMBIOS UUID) gets providerID, addresses, instance type, zone and region
// from its vCenter, at the highest verbosity without a password in the log;
// the verbosity cannot be raised at run time (no /debug/flags/v, even when
// profiling is asked for and the path is allowed to anyone).
func TestNodesInitialized(t *testing.T) {
	t.Parallel()
	h := setup(t)
	c := h.startCCM("--v=10", "--profiling=true", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/flags/v")
	h.registerAll(t)
	h.waitInitialized(t, h.fleet.VMs()...)
	log := c.LogText()
	if !strings.Contains(log, "-v=10 lowered to 7") {
		t.Errorf("no warning about the verbosity cap in the CCM log")
	}
	if !strings.Contains(log, "--profiling=true ignored") {
		t.Errorf("no warning about --profiling in the CCM log")
	}
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPut, c.Serving()+"/debug/flags/v", strings.NewReader("10"))
	must.OK(t, err)
	res, err := c.Do(req)
	must.OK(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("PUT /debug/flags/v: %s, want 404 Not Found", res.Status)
	}
}

// TestGhostNode: a Node whose VM exists in no vCenter gets a VMNotFound
// event, never a guess; it was never initialized (no vsphere://
// providerID: bare metal or another cloud's machine in a hybrid cluster),
// so it is not this provider's to delete, and it is kept, as the reference
// keeps it.
func TestGhostNode(t *testing.T) {
	t.Parallel()
	h := setup(t)
	c := h.startCCM()
	must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, "ghost-node", "4299FFFF-0000-4000-8000-000000000000"))
	h.waitEvent(t, "ghost-node", "VMNotFound", "ghost-node")
	n, err := h.node("ghost-node")
	must.OK(t, err)
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletNotReady"}}
	_, err = h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)
	// Sync point: two lifecycle verdicts on it, every vCenter healthy.
	poll.True(t, "two lifecycle passes", func() bool {
		return c.metric(t, `vsphere_ccm_vm_absence_verdicts_total{verdict="unproven"}`) >= 2
	})
	if _, err := h.node("ghost-node"); err != nil {
		t.Fatalf("a Node without a vsphere:// providerID was deleted: %v", err)
	}
	h.waitEvent(t, "ghost-node", "VMNotFound", "absence is not proven", "no vsphere:// providerID")
}

// TestPowerOff: a powered-off VM's Node gets the shutdown taint and loses
// it when the VM is back and the kubelet reports Ready.
func TestPowerOff(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.startCCM()
	b := h.fleet.VCenter("vc-b")
	vm := b.VMs[0]
	h.register(t, vm, false)
	h.waitInitialized(t, vm)
	obj := object.NewVirtualMachine(b.Admin(), vm.Ref)
	task, err := obj.PowerOff(h.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(h.ctx))
	poll.NoError(t, "shutdown taint", 30*time.Second, func() error {
		n, err := h.node(vm.Name)
		if err != nil || !hasTaint(n, shutdownTaint) {
			return fmt.Errorf("no shutdown taint (%v)", err)
		}
		return nil
	})
	task, err = obj.PowerOn(h.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(h.ctx))
	// The kubelet reports Ready again.
	n, err := h.node(vm.Name)
	must.OK(t, err)
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
	_, err = h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)
	poll.NoError(t, "shutdown taint removed", 30*time.Second, func() error {
		n, err := h.node(vm.Name)
		if err != nil || hasTaint(n, shutdownTaint) {
			return fmt.Errorf("still tainted (%v)", err)
		}
		return nil
	})
}

// TestDestroyedVM: the Node of a destroyed VM is deleted (absence proven
// by BIOS UUID in every vCenter).
func TestDestroyedVM(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.startCCM()
	vm := initializedThenDestroyed(t, h)
	poll.NoError(t, "node deleted", 30*time.Second, func() error {
		if _, err := h.node(vm.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node still there (%v)", err)
		}
		return nil
	})
}

// initializedThenDestroyed registers the Node of vc-c's first VM, waits
// until the running CCM has initialized it, then destroys the VM.
func initializedThenDestroyed(t *testing.T, h *harness) vcsim.VM {
	t.Helper()
	c := h.fleet.VCenter("vc-c")
	vm := c.VMs[0]
	h.register(t, vm, false)
	h.waitInitialized(t, vm)
	destroy(t, h, c, vm)
	return vm
}

// destroy powers a VM off and destroys it, as an administrator would.
func destroy(t *testing.T, h *harness, v *vcsim.VCenter, vm vcsim.VM) {
	t.Helper()
	obj := object.NewVirtualMachine(v.Admin(), vm.Ref)
	task, err := obj.PowerOff(h.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(h.ctx))
	task, err = obj.Destroy(h.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(h.ctx))
}

// TestSkipNodeDeletion: with SKIP_NODE_DELETION set (as the reference reads
// it), the binary keeps the Node of a destroyed VM: the lifecycle
// controller asks about it again and again, and it stays.
func TestSkipNodeDeletion(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.ccmEnv = []string{"SKIP_NODE_DELETION=true"}
	ccm := h.startCCM()
	vm := initializedThenDestroyed(t, h)
	keptTwice(t, h, ccm, vm, "the Node is kept because SKIP_NODE_DELETION is set")
}

// keptTwice waits until the CCM has logged kept twice (two passes of the
// lifecycle controller after vm was gone: the sync point), then checks
// that vm's Node is still there.
func keptTwice(t *testing.T, h *harness, proc *ccm, vm vcsim.VM, kept string) {
	t.Helper()
	poll.NoError(t, "the Node kept twice", time.Minute, func() error {
		if n := strings.Count(proc.LogText(), kept); n < 2 {
			return fmt.Errorf("%d times: %w", n, errNotYet)
		}
		return nil
	})
	n, err := h.node(vm.Name)
	if err != nil || n.DeletionTimestamp != nil {
		t.Fatalf("the Node of the destroyed VM: %v (%v); want it kept", n, err)
	}
}

// TestDeletionDelayKeepsTheNode: with nodes.deletionDelay, the Node of a
// destroyed VM is kept while the delay runs: the real lifecycle
// controller asks again and again, and each answer is a DeletionDelayed
// error (and one event), never a deletion.
func TestDeletionDelayKeepsTheNode(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.configTail = "nodes:\n  deletionDelay: 1h\n"
	h.writeConfig(nil)
	ccm := h.startCCM()
	vm := initializedThenDestroyed(t, h)
	h.waitEvent(t, vm.Name, provider.ReasonDeletionDelayed, "its VM is gone", "nodes.deletionDelay 1h0m0s")
	keptTwice(t, h, ccm, vm, "the Node is kept until nodes.deletionDelay has passed")
}

// TestAbsenceNeedsProof: NotReady Nodes whose VMs cannot be found are
// deleted only on proof. One was initialized (its providerID names a BIOS
// UUID no VM has any more, its record a VM reference no VM has), the other never was (no providerID; only its
// name could find a VM). While vc-b is down neither is deleted; once it is
// back the first is (its absence is proven by BIOS UUID in every
// vCenter), the second never is (not this provider's Node; a miss by name
// is no proof).
func TestAbsenceNeedsProof(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b := h.fleet.VCenter("vc-b")
	must.OK(t, b.SetMode(vcsim.Down))
	c := h.startCCM()
	const byUUID, byName = "uuid-unknown", "name-only"
	must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, byUUID, "4299EEEE-0000-4000-8000-000000000000"))
	must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, byName, ""))
	n, err := h.node(byUUID)
	must.OK(t, err)
	n.Spec.ProviderID = "vsphere://4299eeee-0000-4000-8000-000000000000"
	// Initialized by this CCM: the record of its VM, a reference no VM has now.
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[provider.LabelVCenter], n.Labels[provider.LabelVM] = "vc-a", "vm-999999"
	_, err = h.kube.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)
	for _, name := range []string{byUUID, byName} {
		n, err := h.node(name)
		must.OK(t, err)
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletNotReady"}}
		_, err = h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{})
		must.OK(t, err)
	}
	// Asked, the CCM says "cannot tell" and why.
	for _, name := range []string{byUUID, byName} {
		h.waitEvent(t, name, "VCenterUnreachable", `vCenter "vc-b"`)
	}
	for _, name := range []string{byUUID, byName} {
		if _, err := h.node(name); err != nil {
			t.Fatalf("%s deleted without proof: %v", name, err)
		}
	}

	must.OK(t, b.SetMode(vcsim.Up))
	poll.NoError(t, byUUID+" deleted once every vCenter answered", 60*time.Second, func() error {
		if _, err := h.node(byUUID); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	h.waitEvent(t, byName, "VMNotFound", "absence is not proven", "no vsphere:// providerID")
	// Sync point: two verdicts on the name-only Node with every vCenter
	// healthy; it must still be there.
	poll.True(t, "two lifecycle passes", func() bool {
		return c.metric(t, `vsphere_ccm_vm_absence_verdicts_total{verdict="unproven"}`) >= 2
	})
	if _, err := h.node(byName); err != nil {
		t.Fatalf("%s deleted on name evidence: %v", byName, err)
	}
	if got := c.metric(t, `vsphere_ccm_vm_absence_verdicts_total{verdict="gone"}`); got != 1 {
		t.Errorf("%v gone verdicts, want 1 (%s)", got, byUUID)
	}
}
