//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// csiDriver is the CSI driver of the test's volume: attach required, its
// attacher played by fakeAttacher (no CSI sidecar runs here).
const csiDriver = "csi.e2e.vsphere-ccm.io"

// outOfServiceConfig turns the policy on with the given grace periods.
func outOfServiceConfig(notReadyFor, poweredOffFor time.Duration) string {
	return fmt.Sprintf("nodes:\n  outOfService:\n    enabled: true\n    notReadyFor: %v\n    poweredOffFor: %v\n", notReadyFor, poweredOffFor)
}

// startOutOfService starts the CCM with the out-of-service policy (its
// config), the scheduler and the controller-manager controllers the
// non-graceful shutdown path needs (statefulset, attach-detach, taint
// eviction, pod GC; the daemonset controller only for the Pod index by
// Node it adds, which taint eviction reads), and Nodes for vc-a's VMs,
// initialized and Ready as their kubelets would make them, managed by the
// attach-detach controller.
func startOutOfService(t *testing.T, policy string) (*harness, *ccm, []vcsim.VM) {
	h := setup(t)
	h.configTail = policy
	h.writeConfig(nil)
	must.OK(t, h.cp.StartScheduling(h.ctx, built.controlPlane, "statefulset-controller", "daemonset-controller",
		"persistentvolume-attach-detach-controller", "taint-eviction-controller", "pod-garbage-collector-controller"))
	c := h.startCCM()
	vms := h.fleet.VCenter("vc-a").VMs
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(h.cp.Dir, "kube-controller-manager.log"))
			t.Logf("kube-controller-manager log (tail):\n%s", tailString(string(b), 8000))
		}
	})
	for _, vm := range vms {
		h.register(t, vm, false)
	}
	h.waitInitialized(t, vms...)
	for _, vm := range vms {
		must.OK(t, controlplane.MarkReady(h.ctx, h.kube, vm.Name))
		n, err := h.node(vm.Name)
		must.OK(t, err)
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] = "true" // as the kubelet sets it
		_, err = h.kube.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
		must.OK(t, err)
	}
	return h, c, vms
}

// powerOff powers the VM off in its vCenter (if it is on) and marks its
// Node NotReady (Unknown), as the node lifecycle controller does when the
// kubelet's heartbeats stop.
func (h *harness) powerOff(t *testing.T, vm vcsim.VM) {
	t.Helper()
	ovm := object.NewVirtualMachine(h.fleet.VCenter(vm.VCenter).Admin(), vm.Ref)
	st, err := ovm.PowerState(h.ctx)
	must.OK(t, err)
	if st != types.VirtualMachinePowerStatePoweredOff {
		task, err := ovm.PowerOff(h.ctx)
		must.OK(t, err)
		must.OK(t, task.Wait(h.ctx))
	}
	n, err := h.node(vm.Name)
	must.OK(t, err)
	for i, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			n.Status.Conditions[i].Status = v1.ConditionUnknown
			n.Status.Conditions[i].Reason = "NodeStatusUnknown"
			n.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	_, err = h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)
}

func (h *harness) outOfService(name string) bool {
	n, err := h.node(name)
	return err == nil && slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool {
		return t.Key == v1.TaintNodeOutOfService && t.Value == "nodeshutdown" && t.Effect == v1.TaintEffectNoExecute
	}) && n.Annotations[nodetopology.AnnotationOutOfService] != ""
}

// fakeAttacher does what the external-attacher sidecar of a CSI driver
// does, without a storage system: every VolumeAttachment of csiDriver is
// marked attached. It runs until ctx ends.
func (h *harness) fakeAttacher(ctx context.Context, t *testing.T) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		vas, err := h.kube.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, va := range vas.Items {
			if va.Spec.Attacher != csiDriver || va.Status.Attached || va.DeletionTimestamp != nil {
				continue
			}
			va.Status.Attached = true
			if _, err := h.kube.StorageV1().VolumeAttachments().UpdateStatus(ctx, &va, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
				t.Logf("fake attacher: %v", err)
			}
		}
	}
}

// attachedTo returns the Nodes the volume's VolumeAttachments name, with
// whether each is attached.
func (h *harness) attachedTo() (map[string]bool, error) {
	vas, err := h.kube.StorageV1().VolumeAttachments().List(h.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, va := range vas.Items {
		out[va.Spec.NodeName] = va.Status.Attached
	}
	return out, nil
}

// TestOutOfServiceRecovers: a StatefulSet Pod with a ReadWriteOnce CSI
// volume runs on a Node whose VM is then powered off. The CCM proves it
// off and adds node.kubernetes.io/out-of-service; the real controllers then
// do the rest: the taint-eviction controller deletes the Pod, the pod
// garbage collector force-deletes it (no kubelet will), the StatefulSet
// controller recreates it, the scheduler places it on another Node, and
// the attach-detach controller detaches the volume from the dead Node at
// once (without the taint it waits 6 minutes for an unmount the kubelet
// reports as pending) and attaches it to the new one. When the VM powers
// on, the taint is removed. Each step's time from the power-off is logged
// and written to docs/operations.md.
func TestOutOfServiceRecovers(t *testing.T) {
	t.Parallel()
	h, _, vms := startOutOfService(t, outOfServiceConfig(5*time.Second, 5*time.Second))
	actx, stop := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.fakeAttacher(actx, t) })
	t.Cleanup(func() { stop(); wg.Wait() })

	attach := true
	_, err := h.kube.StorageV1().CSIDrivers().Create(h.ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: csiDriver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &attach}}, metav1.CreateOptions{})
	must.OK(t, err)
	size := resource.MustParse("1Gi")
	empty := ""
	_, err = h.kube.CoreV1().PersistentVolumes().Create(h.ctx, &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-web"},
		Spec: v1.PersistentVolumeSpec{Capacity: v1.ResourceList{v1.ResourceStorage: size}, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: csiDriver, VolumeHandle: "vol-web"}},
			ClaimRef:               &v1.ObjectReference{Namespace: "default", Name: "data-web-0"}}}, metav1.CreateOptions{})
	must.OK(t, err)
	labels := map[string]string{"app": "web"}
	one := int32(1)
	_, err = h.kube.AppsV1().StatefulSets("default").Create(h.ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: func() v1.PodSpec {
				s := podSpec()
				s.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
				return s
			}()},
			VolumeClaimTemplates: []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, StorageClassName: &empty,
					VolumeName: "pv-web", Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}}}}}}},
		metav1.CreateOptions{})
	must.OK(t, err)

	// web-0 scheduled and its volume attached; its kubelet would report
	// the volume in use (mounted), which makes a normal detach wait.
	var first string
	poll.NoError(t, "web-0 running with its volume attached", 2*time.Minute, func() error {
		p, err := h.kube.CoreV1().Pods("default").Get(h.ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if first = p.Spec.NodeName; first == "" {
			return fmt.Errorf("not scheduled")
		}
		n, err := h.node(first)
		if err != nil {
			return err
		}
		if len(n.Status.VolumesAttached) == 0 {
			return fmt.Errorf("no volume attached to %s yet", first)
		}
		return nil
	})
	n, err := h.node(first)
	must.OK(t, err)
	for _, a := range n.Status.VolumesAttached {
		n.Status.VolumesInUse = append(n.Status.VolumesInUse, a.Name)
	}
	_, err = h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)
	var vm vcsim.VM
	for _, v := range vms {
		if v.Name == first {
			vm = v
		}
	}

	off := time.Now()
	h.powerOff(t, vm)
	step := func(what string, cond func() error) time.Duration {
		t.Helper()
		poll.NoError(t, what, 3*time.Minute, cond)
		d := time.Since(off)
		t.Logf("%-60s %6.1f s after the power-off", what, d.Seconds())
		return d
	}
	step("out-of-service taint added", func() error {
		if !h.outOfService(first) {
			return fmt.Errorf("no taint on %s", first)
		}
		return nil
	})
	h.waitEventWithin(t, 10*time.Second, first, "OutOfServiceTaintAdded", vm.Name, "powered off")
	step("web-0 on another Node", func() error {
		p, err := h.kube.CoreV1().Pods("default").Get(h.ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName == "" || p.Spec.NodeName == first {
			return fmt.Errorf("web-0 on %q, deletion %v, phase %s", p.Spec.NodeName, p.DeletionTimestamp, p.Status.Phase)
		}
		return nil
	})
	step("volume detached from the powered-off Node", func() error {
		at, err := h.attachedTo()
		if err != nil {
			return err
		}
		if _, ok := at[first]; ok {
			return fmt.Errorf("VolumeAttachments: %v", at)
		}
		return nil
	})
	step("volume attached to the new Node", func() error {
		p, err := h.kube.CoreV1().Pods("default").Get(h.ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		at, err := h.attachedTo()
		if err != nil {
			return err
		}
		if !at[p.Spec.NodeName] {
			return fmt.Errorf("VolumeAttachments: %v, web-0 on %s", at, p.Spec.NodeName)
		}
		return nil
	})

	// Powered on again: the taint goes.
	task, err := object.NewVirtualMachine(h.fleet.VCenter(vm.VCenter).Admin(), vm.Ref).PowerOn(h.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(h.ctx))
	poll.NoError(t, "taint removed after power-on", time.Minute, func() error {
		if h.outOfService(first) {
			return fmt.Errorf("still tainted")
		}
		return nil
	})
}

// TestOutOfServiceNotDuringOutage: a NotReady Node whose VM is powered off
// gets no taint while its vCenter is down: the CCM reports the state
// unproven (metric and event) once the Node has been NotReady past
// notReadyFor, and adds the taint only once the vCenter is back and
// proves the VM off again.
func TestOutOfServiceNotDuringOutage(t *testing.T) {
	t.Parallel()
	h, c, vms := startOutOfService(t, outOfServiceConfig(30*time.Second, 5*time.Second))
	vm := vms[0]
	a := h.fleet.VCenter("vc-a")
	// Off and NotReady; the framework's lifecycle controller adds its
	// shutdown taint once the CCM says the VM is off (InstanceShutdown):
	// the CCM has seen the power-off. Then the vCenter goes down for the
	// CCM (its administrator still reaches the simulator), well before
	// notReadyFor (30 s) has passed.
	h.powerOff(t, vm)
	poll.NoError(t, "the CCM saw the power-off (shutdown taint)", time.Minute, func() error {
		n, err := h.node(vm.Name)
		if err != nil {
			return err
		}
		if !hasTaint(n, shutdownTaint) {
			return fmt.Errorf("no %s taint", shutdownTaint)
		}
		return nil
	})
	must.OK(t, a.SetMode(vcsim.Down))
	poll.NoError(t, "the power state reported unproven", 90*time.Second, func() error {
		if v := c.metric(t, "vsphere_ccm_out_of_service_unproven_total"); v < 1 {
			return fmt.Errorf("vsphere_ccm_out_of_service_unproven_total %v", v)
		}
		return nil
	})
	h.waitEvent(t, vm.Name, "OutOfServiceUnproven", "cannot be proven")
	if h.outOfService(vm.Name) {
		t.Fatalf("tainted while its vCenter was down")
	}
	must.OK(t, a.SetMode(vcsim.Up))
	poll.NoError(t, "tainted once the vCenter proves the VM off", 2*time.Minute, func() error {
		if !h.outOfService(vm.Name) {
			return fmt.Errorf("no taint")
		}
		return nil
	})
}
