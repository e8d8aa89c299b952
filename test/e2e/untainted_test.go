//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/preflight"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// TestJoinedWithoutTaint: a kubelet started without
// --cloud-provider=external registers its Node without the uninitialized
// taint. The real node controller never initializes it; this CCM reports
// it (a NotInitialized event with the fix, the gauge, topology explain,
// migrate preflight) and leaves it alone. The operator then sets
// nodes.adoptUntainted in the running config: the CCM restarts with it
// (config reload), taints the Node once its VM is found, and the real node
// controller initializes it like a new Node: providerID, zone, region,
// addresses; a NodeAdopted event and the counter record it.
func TestJoinedWithoutTaint(t *testing.T) {
	t.Parallel()
	h := setup(t)
	vms := h.fleet.VMs()
	normal, bare := vms[0], vms[1]
	h.register(t, normal, false)
	created, err := h.kube.CoreV1().Nodes().Create(h.ctx, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: bare.Name, Labels: map[string]string{"kubernetes.io/hostname": bare.Name}},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: strings.ToUpper(bare.UUID)}},
	}, metav1.CreateOptions{})
	must.OK(t, err)
	if provider.HasUninitializedTaint(created) {
		t.Fatalf("the Node was created with the uninitialized taint: %v", created.Spec.Taints)
	}

	c := h.startCCM()
	h.waitInitialized(t, normal)
	h.waitEvent(t, bare.Name, "NotInitialized", "--cloud-provider=external", "nodes.adoptUntainted")
	poll.NoError(t, "the gauge at 1", 30*time.Second, func() error {
		if v := c.Gauge("vsphere_ccm_nodes_joined_without_taint"); v != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	n, err := h.node(bare.Name)
	must.OK(t, err)
	if n.Spec.ProviderID != "" || provider.HasUninitializedTaint(n) {
		t.Fatalf("the Node was written without nodes.adoptUntainted: %+v", n.Spec)
	}

	// topology explain and migrate preflight list it, with the fix.
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(h.ctx, h.binary, "topology", "explain", "--cloud-config", h.cfgPath, "--kubeconfig", h.cp.Kubeconfig, "-o", "json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("topology explain: %v (want exit 3)\n%s", err, stderr.String())
	}
	var ex provider.Explanation
	must.OK(t, json.Unmarshal(stdout.Bytes(), &ex))
	if len(ex.Uninitialized) != 1 || !strings.HasPrefix(ex.Uninitialized[0], bare.Name+": joined without") {
		t.Errorf("explain's uninitialized Nodes: %q", ex.Uninitialized)
	}
	_, r, _ := h.preflight(t)
	found := false
	for _, d := range r.Differences {
		if d.Node == bare.Name && d.Field == "initialization" {
			found = d.Impact == preflight.Note && d.Would == "vsphere://"+bare.UUID && strings.Contains(d.Why, "nodes.adoptUntainted")
		}
	}
	if !found {
		t.Errorf("preflight does not list %s as joined without the taint: %+v", bare.Name, r.Differences)
	}

	// The operator turns adoption on in the running config.
	text, err := os.ReadFile(h.cfgPath)
	must.OK(t, err)
	h.replaceConfig(t, string(text)+"nodes:\n  adoptUntainted: true\n")
	select {
	case <-c.Done():
	case <-h.ctx.Done():
		t.Fatal("the CCM did not restart for the changed config")
	}
	c = h.startCCM()
	h.waitInitialized(t, bare)
	poll.NoError(t, "a NodeAdopted event", 30*time.Second, func() error {
		evs, err := h.events(bare.Name)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Type == v1.EventTypeNormal && e.Reason == "NodeAdopted" && strings.Contains(e.Message, "vsphere://"+bare.UUID) {
				return nil
			}
		}
		return errors.New("not yet")
	})
	poll.NoError(t, "the counter at 1 and the gauge at 0", 30*time.Second, func() error {
		if c.Gauge("vsphere_ccm_nodes_adopted_total") != 1 || c.Gauge("vsphere_ccm_nodes_joined_without_taint") != 0 {
			return errors.New("not yet")
		}
		return nil
	})
}
