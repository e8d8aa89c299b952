//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// podSpec is a Pod that never runs (no kubelet here): scheduling is all
// that is tested.
func podSpec() v1.PodSpec {
	return v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}
}

// scheduledZones waits until every Pod with the label app=name is bound
// and returns how many run in each zone (by the Node's label).
func (h *harness) scheduledZones(t *testing.T, name string, want int) map[string]int {
	t.Helper()
	var zones map[string]int
	poll.NoError(t, fmt.Sprintf("%d Pods of %s scheduled", want, name), 90*time.Second, func() error {
		pods, err := h.kube.CoreV1().Pods("default").List(h.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return err
		}
		zones = map[string]int{}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			n, err := h.node(p.Spec.NodeName)
			if err != nil {
				return err
			}
			zones[n.Labels[zoneLabel]]++
			bound++
		}
		if bound != want || len(pods.Items) != want {
			return fmt.Errorf("%d of %d Pods bound (want %d)", bound, len(pods.Items), want)
		}
		return nil
	})
	return zones
}

func deployment(name string, replicas int32, spec v1.PodSpec) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
}

// TestSchedulerUsesZones runs the real kube-scheduler (and the deployment,
// replicaset and volume binding controllers) on the Nodes the CCM
// initialized: vc-a's stretched cluster gives zones zone-a and zone-b from
// host groups, vc-b's cluster a zone from its tag. A Deployment spread over
// zones lands evenly in the three zones of the two vCenters; a Pod whose
// PersistentVolume is bound to zone-b lands there; a Deployment pinned to
// the secondary site (zone-b) lands only on its Nodes.
func TestSchedulerUsesZones(t *testing.T) {
	t.Parallel()
	h, s := setupStretched(t)
	must.OK(t, h.cp.StartScheduling(h.ctx, built.controlPlane))
	h.startCCM()
	h.registerAll(t)
	other := h.fleet.VCenter("vc-b").VMs[0]
	otherZone := "zone-" + other.Cluster
	h.waitLabels(t, s.inA, "zone-a", "stretched")
	h.waitLabels(t, s.inB, "zone-b", "stretched")
	h.waitLabels(t, s.loose, "zone-a", "stretched")
	h.waitInitialized(t, other)
	for _, vm := range h.fleet.VMs() {
		must.OK(t, controlplane.MarkReady(h.ctx, h.kube, vm.Name))
	}

	t.Run("spread over zones of two vCenters", func(t *testing.T) {
		spec := podSpec()
		spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: zoneLabel, WhenUnsatisfiable: v1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
		}}
		_, err := h.kube.AppsV1().Deployments("default").Create(h.ctx, deployment("spread", 6, spec), metav1.CreateOptions{})
		must.OK(t, err)
		zones := h.scheduledZones(t, "spread", 6)
		for _, z := range []string{"zone-a", "zone-b", otherZone} {
			if zones[z] != 2 {
				t.Errorf("Pods per zone %v, want 2 in each of zone-a, zone-b (vc-a host groups) and %s (vc-b tag)", zones, otherZone)
				break
			}
		}
	})

	t.Run("volume bound to a zone", func(t *testing.T) {
		fs := v1.PersistentVolumeFilesystem
		pv := &v1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "zone-b-disk"},
			Spec: v1.PersistentVolumeSpec{
				Capacity:         v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				StorageClassName: "zonal",
				VolumeMode:       &fs,
				PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
					Driver: "csi.vsphere.vmware.com", VolumeHandle: "zone-b-disk"}},
				NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
					MatchExpressions: []v1.NodeSelectorRequirement{{Key: zoneLabel, Operator: v1.NodeSelectorOpIn, Values: []string{"zone-b"}}},
				}}}},
			},
		}
		_, err := h.kube.CoreV1().PersistentVolumes().Create(h.ctx, pv, metav1.CreateOptions{})
		must.OK(t, err)
		sc := "zonal"
		pvc := &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
			Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
		_, err = h.kube.CoreV1().PersistentVolumeClaims("default").Create(h.ctx, pvc, metav1.CreateOptions{})
		must.OK(t, err)
		spec := podSpec()
		spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", Labels: map[string]string{"app": "db"}}, Spec: spec}
		_, err = h.kube.CoreV1().Pods("default").Create(h.ctx, pod, metav1.CreateOptions{})
		must.OK(t, err)
		if zones := h.scheduledZones(t, "db", 1); zones["zone-b"] != 1 {
			t.Errorf("the Pod with a zone-b volume landed in %v", zones)
		}
	})

	t.Run("pinned to the secondary site", func(t *testing.T) {
		spec := podSpec()
		spec.NodeSelector = map[string]string{zoneLabel: "zone-b"}
		_, err := h.kube.AppsV1().Deployments("default").Create(h.ctx, deployment("site-b", 3, spec), metav1.CreateOptions{})
		must.OK(t, err)
		if zones := h.scheduledZones(t, "site-b", 3); zones["zone-b"] != 3 {
			t.Errorf("Pods pinned to zone-b landed in %v", zones)
		}
		pods, err := h.kube.CoreV1().Pods("default").List(h.ctx, metav1.ListOptions{LabelSelector: "app=site-b"})
		must.OK(t, err)
		for _, p := range pods.Items {
			if p.Spec.NodeName != s.inB.Name {
				t.Errorf("Pod %s on %s, want site b's Node %s", p.Name, p.Spec.NodeName, s.inB.Name)
			}
		}
	})
}
