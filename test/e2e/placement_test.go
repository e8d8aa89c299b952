//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestHostSpreadFollowsVMotion: with labels.placement the ESXi host label
// is kept current, so the real kube-scheduler's host anti-affinity follows
// a vMotion. Two Nodes' VMs start on one host: a Pod that must not share a
// host with another stays Pending (the scheduler says why). The second VM
// is moved to the other host: the CCM patches its Node's host label within
// seconds and the scheduler places the Pod there.
func TestHostSpreadFollowsVMotion(t *testing.T) {
	t.Parallel()
	h := setupFleet(t, vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1"}, Hosts: 2, VMs: 2})
	h.labelsTail = "  placement: [host, cluster]\n"
	h.writeConfig(nil)
	a := h.fleet.VCenter("vc-a")
	vmA, vmB := a.VMs[0], a.VMs[1]
	other, ok := a.OtherHost(vmA)
	if !ok {
		t.Fatal("the cluster has one host only")
	}
	if vmB.HostRef != vmA.HostRef {
		must.OK(t, a.Relocate(h.ctx, vmB.Ref, vmA.HostRef))
	}
	must.OK(t, h.cp.StartScheduling(h.ctx, built.controlPlane))
	h.startCCM()
	for _, vm := range []vcsim.VM{vmA, vmB} {
		h.register(t, vm, false)
	}
	h.waitInitialized(t, vmA, vmB)
	for _, vm := range []vcsim.VM{vmA, vmB} {
		must.OK(t, controlplane.MarkReady(h.ctx, h.kube, vm.Name))
	}
	hostOf := func(name string) string {
		n, err := h.node(name)
		must.OK(t, err)
		return n.Labels[provider.LabelHost]
	}
	first := hostOf(vmA.Name)
	if first == "" || hostOf(vmB.Name) != first {
		t.Fatalf("host labels %q and %q, want both the same host", first, hostOf(vmB.Name))
	}

	spread := map[string]string{"app": "host-spread"}
	onA := podSpec()
	onA.NodeSelector = map[string]string{"kubernetes.io/hostname": vmA.Name}
	_, err := h.kube.CoreV1().Pods("default").Create(h.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: "default", Labels: spread}, Spec: onA}, metav1.CreateOptions{})
	must.OK(t, err)
	h.waitBound(t, "first", vmA.Name)

	apart := podSpec()
	apart.Affinity = &v1.Affinity{
		NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{vmA.Name, vmB.Name}}}}}}},
		PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: spread}, TopologyKey: provider.LabelHost}}},
	}
	_, err = h.kube.CoreV1().Pods("default").Create(h.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "apart", Namespace: "default", Labels: spread}, Spec: apart}, metav1.CreateOptions{})
	must.OK(t, err)
	// The scheduler's verdict, not the absence of one: Unschedulable.
	poll.NoError(t, "apart unschedulable while both VMs share a host", time.Minute, func() error {
		p, err := h.kube.CoreV1().Pods("default").Get(h.ctx, "apart", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("apart bound to %s although both Nodes are on host %s", p.Spec.NodeName, first)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				return nil
			}
		}
		return fmt.Errorf("no Unschedulable condition yet")
	})

	moved := time.Now()
	must.OK(t, a.Relocate(h.ctx, vmB.Ref, other))
	poll.NoError(t, "the host label of the moved Node patched", time.Minute, func() error {
		if got := hostOf(vmB.Name); got == first || got == "" {
			return fmt.Errorf("host label %q", got)
		}
		return nil
	})
	t.Logf("host label patched %.1f s after the vMotion", time.Since(moved).Seconds())
	h.waitBound(t, "apart", vmB.Name)
	t.Logf("Pod placed on the moved Node %.1f s after the vMotion", time.Since(moved).Seconds())
}

// waitBound waits until the Pod is bound to the Node.
func (h *harness) waitBound(t *testing.T, pod, node string) {
	t.Helper()
	poll.NoError(t, pod+" bound to "+node, 2*time.Minute, func() error {
		p, err := h.kube.CoreV1().Pods("default").Get(h.ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != node {
			return fmt.Errorf("on %q", p.Spec.NodeName)
		}
		return nil
	})
}
