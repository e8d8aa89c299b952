package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// StartScheduling adds kube-scheduler and a kube-controller-manager that
// runs only the controllers workloads need to reach the scheduler
// (serviceaccount, deployment, replicaset, persistentvolume-binder) and
// the extra controllers named, both from binDir, with the admin
// kubeconfig and without leader election. Stop stops them.
func (cp *ControlPlane) StartScheduling(ctx context.Context, binDir string, extra ...string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	if err := cp.spawn(filepath.Join(binDir, "kube-scheduler"), "kube-scheduler",
		"--kubeconfig="+cp.Kubeconfig,
		"--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[0]),
		"--leader-elect=false", "--v=1"); err != nil {
		return err
	}
	if err := cp.spawn(filepath.Join(binDir, "kube-controller-manager"), "kube-controller-manager",
		"--kubeconfig="+cp.Kubeconfig,
		"--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[1]),
		"--controllers="+strings.Join(append([]string{"serviceaccount", "deployment", "replicaset", "persistentvolume-binder"}, extra...), ","),
		"--use-service-account-credentials=false",
		"--leader-elect=false", "--v=1"); err != nil {
		return err
	}
	return nil
}

// StartSigning adds a kube-controller-manager that runs only the
// certificate signer (csrsigning), with this control plane's CA: it signs
// the approved requests of the kubernetes.io signers, kubelet serving
// among them, after its own checks of their shape, as in a real cluster.
func (cp *ControlPlane) StartSigning(ctx context.Context, binDir string) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	return cp.spawn(filepath.Join(binDir, "kube-controller-manager"), "kube-controller-manager-signing",
		"--kubeconfig="+cp.Kubeconfig,
		"--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[0]),
		"--controllers=csrsigning",
		"--cluster-signing-cert-file="+filepath.Join(cp.Dir, "ca.crt"),
		"--cluster-signing-key-file="+filepath.Join(cp.Dir, "ca.key"),
		"--use-service-account-credentials=false",
		"--leader-elect=false", "--v=1")
}

// MarkReady does what a kubelet and the node lifecycle controller do for
// a healthy Node that this control plane has neither: a Ready condition,
// capacity for pods, and no not-ready taint. The CCM's uninitialized
// taint is left as it is.
func MarkReady(ctx context.Context, kube kubernetes.Interface, name string) error {
	n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("4"),
		v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.NewTime(time.Now())
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: now, LastTransitionTime: now}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	n, err = kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == "node.kubernetes.io/not-ready" })
	_, err = kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	return err
}
