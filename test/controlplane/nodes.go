package controlplane

import (
	"context"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// UninitializedTaint is set by kubelet --cloud-provider=external and
// removed by the CCM once the node is initialized.
const UninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// RegisterNode creates a Node the way kubelet --cloud-provider=external
// does: uninitialized and not-ready taints, hostname label, and the
// status with the SMBIOS system UUID, sent with the create.
func RegisterNode(ctx context.Context, kube kubernetes.Interface, name, systemUUID string) error {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{
			{Key: UninitializedTaint, Value: "true", Effect: v1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/not-ready", Effect: v1.TaintEffectNoSchedule},
		}},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: systemUUID}},
	}
	created, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if created.Status.NodeInfo.SystemUUID != systemUUID {
		return fmt.Errorf("the API server dropped status.nodeInfo.systemUUID of %s", name)
	}
	return nil
}

// CCMArgs are the flags to run the CCM binary against this control plane
// on loopback only, without leader election, with fast node monitoring.
func (cp *ControlPlane) CCMArgs(cloudConfig string) ([]string, error) {
	port, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	return []string{
		"--cloud-config=" + cloudConfig,
		"--kubeconfig=" + cp.Kubeconfig,
		"--authentication-kubeconfig=" + cp.Kubeconfig,
		"--authorization-kubeconfig=" + cp.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port[0]),
		"--webhook-secure-port=0",
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--leader-elect=false",
		"--node-monitor-period=2s",
		"--node-status-update-frequency=10s",
		"--concurrent-node-syncs=4",
		"--use-service-account-credentials=false",
		"--v=2",
	}, nil
}

// WaitForNodes waits until want Nodes satisfy ok, or timeout passes.
func WaitForNodes(ctx context.Context, kube kubernetes.Interface, want int, timeout time.Duration, ok func(*v1.Node) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return err
		}
		done := 0
		for i := range list.Items {
			if ok(&list.Items[i]) {
				done++
			}
		}
		if done == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes initialized after %v", done, want, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
