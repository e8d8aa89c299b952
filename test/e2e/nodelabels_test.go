//go:build e2e

package e2e

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// TestNodeLabelsFlag: the reference's --node-labels, with its syntax,
// labels every Node the real node controller initializes; an empty value
// is a label too; a label the kubelet already set is kept (the framework
// never overwrites one). The command line also names the framework's
// route controller, as a reference deployment may (--controllers=*,-route):
// known here, and not run.
func TestNodeLabelsFlag(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.registerAll(t)
	vms := h.fleet.VMs()
	kubelet := vms[0].Name
	n, err := h.node(kubelet)
	must.OK(t, err)
	n.Labels["example.com/pool"] = "from-kubelet"
	_, err = h.kube.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)

	h.startCCM("--node-labels=node.example.com/platform=vsphere,example.com/pool=", "--controllers=*,-route")
	h.waitInitialized(t, vms...)
	for _, vm := range vms {
		n, err := h.node(vm.Name)
		must.OK(t, err)
		pool, ok := n.Labels["example.com/pool"]
		wantPool := ""
		if vm.Name == kubelet {
			wantPool = "from-kubelet"
		}
		if n.Labels["node.example.com/platform"] != "vsphere" || !ok || pool != wantPool {
			t.Errorf("%s: labels %v", vm.Name, n.Labels)
		}
	}
}
