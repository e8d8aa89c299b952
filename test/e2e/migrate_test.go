//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/preflight"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// referenceNode creates a Node as the reference CCM leaves it once it has
// initialized it: providerID, GA and beta zone, region and instance type
// labels, InternalIP and ExternalIP both the VM's first address (its
// behaviour without address rules), no vsphere-ccm.io labels. The simulated
// VMs have 1 vCPU, 32 MB and guest ID otherGuest: the reference's instance
// type for them (vsphere-vm.cpu-<n>.mem-<GB>gb.os-<guest>).
func (h *harness) referenceNode(t *testing.T, vm vcsim.VM, zone, region string) {
	t.Helper()
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Labels: map[string]string{
			"kubernetes.io/hostname": vm.Name,
			v1.LabelTopologyZone:     zone, v1.LabelFailureDomainBetaZone: zone,
			v1.LabelTopologyRegion: region, v1.LabelFailureDomainBetaRegion: region,
			v1.LabelInstanceTypeStable: referenceInstanceType, v1.LabelInstanceType: referenceInstanceType,
		}},
		Spec: v1.NodeSpec{ProviderID: "vsphere://" + vm.UUID},
	}
	created, err := h.kube.CoreV1().Nodes().Create(h.ctx, n, metav1.CreateOptions{})
	must.OK(t, err)
	created.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: vm.Name},
		{Type: v1.NodeInternalIP, Address: vm.IPv4}, {Type: v1.NodeExternalIP, Address: vm.IPv4}}
	_, err = h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, created, metav1.UpdateOptions{})
	must.OK(t, err)
}

func (h *harness) preflight(t *testing.T, extra ...string) (int, preflightReport, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(h.ctx, h.binary, append([]string{"migrate", "preflight", "--cloud-config", h.cfgPath,
		"--kubeconfig", h.cp.Kubeconfig, "-o", "json"}, extra...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	var r preflightReport
	if code == 0 || code == 3 {
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatalf("preflight output: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
	}
	return code, r, stderr.String()
}

const referenceInstanceType = "vsphere-vm.cpu-1.mem-0gb.os-other"

type preflightReport struct {
	Nodes            int                    `json:"nodes"`
	Blocking         bool                   `json:"blocking"`
	Differences      []preflight.Difference `json:"differences"`
	NSXTUnmanaged    []preflight.Unmanaged  `json:"nsxtUnmanaged"`
	NSXTAcknowledged bool                   `json:"nsxtAcknowledged"`
}

// TestMigrationPreflight: Nodes labelled as the reference labels them are
// compared with what this CCM would set, against the real API server and
// the simulated vCenters; a zone that would change blocks the switch
// (exit 3), and once the labels agree nothing does (exit 0). Every other
// difference is shown with its impact: addresses the status pass rewrites,
// an instance type, the labels this CCM adds (the vCenter and datacenter
// labels at initialization, the placement labels of labels.placement kept
// current on every Node). Nothing is written to the Nodes.
func TestMigrationPreflight(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.labelsTail = "  placement: [host]\n"
	h.writeConfig(nil)
	vms := h.fleet.VCenter("vc-a").VMs[:2]
	vms = append(vms, h.fleet.VCenter("vc-b").VMs[0])
	for _, vm := range vms[:2] {
		h.referenceNode(t, vm, "zone-"+vm.Cluster, "region-"+vm.Datacenter)
	}
	moved := vms[2]
	h.referenceNode(t, moved, "zone-old", "region-"+moved.Datacenter)
	// One Node whose address and instance type the reference computed
	// from an older state of its VM.
	stale := vms[1]
	n, err := h.node(stale.Name)
	must.OK(t, err)
	n.Labels[v1.LabelInstanceTypeStable] = "vsphere-vm.cpu-2.mem-4gb.os-other"
	_, err = h.kube.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)
	n, err = h.node(stale.Name)
	must.OK(t, err)
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: stale.Name},
		{Type: v1.NodeInternalIP, Address: "192.0.2.99"}, {Type: v1.NodeExternalIP, Address: "192.0.2.99"}}
	_, err = h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)
	before, err := h.kube.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
	must.OK(t, err)

	code, r, stderr := h.preflight(t)
	if code != 3 || !r.Blocking || r.Nodes != 3 {
		t.Fatalf("exit %d, report %+v\n%s", code, r, stderr)
	}
	got := map[string]preflight.Difference{} // node + field
	var blocking []string
	for _, d := range r.Differences {
		got[d.Node+" "+d.Field] = d
		if d.Impact == preflight.Blocking {
			blocking = append(blocking, d.Node+" "+d.Field)
			if d.Node != moved.Name || d.Current != "zone-old" || d.Would != "zone-"+moved.Cluster {
				t.Errorf("blocking difference %+v", d)
			}
		}
	}
	if strings.Join(blocking, ",") != moved.Name+" zone (topology.kubernetes.io/zone),"+moved.Name+" zone (failure-domain.beta.kubernetes.io/zone)" {
		t.Errorf("blocking %v", blocking)
	}
	for _, vm := range vms {
		for field, want := range map[string]preflight.Difference{
			// The record of the VM (vcenter, vm) is written on every Node.
			"label vsphere.vsphere-ccm.io/vcenter":    {Would: vm.VCenter, Impact: preflight.Changes},
			"label vsphere.vsphere-ccm.io/vm":         {Would: vm.Ref.Value, Impact: preflight.Changes},
			"label vsphere.vsphere-ccm.io/datacenter": {Would: vm.Datacenter, Impact: preflight.Note},
			"label vsphere.vsphere-ccm.io/host":       {Would: vm.Host, Impact: preflight.Changes},
		} {
			if d := got[vm.Name+" "+field]; d.Would != want.Would || d.Impact != want.Impact || d.Current != "" {
				t.Errorf("%s %s: %+v, want %s %q", vm.Name, field, d, want.Impact, want.Would)
			}
		}
	}
	if d := got[stale.Name+" addresses"]; d.Impact != preflight.Changes || !strings.Contains(d.Current, "InternalIP=192.0.2.99") || !strings.Contains(d.Would, "InternalIP="+stale.IPv4) {
		t.Errorf("stale addresses: %+v", d)
	}
	if d := got[stale.Name+" instanceType (node.kubernetes.io/instance-type)"]; d.Impact != preflight.Note || d.Would != referenceInstanceType {
		t.Errorf("stale instance type: %+v", d)
	}
	after, err := h.kube.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
	must.OK(t, err)
	for i := range after.Items {
		if after.Items[i].ResourceVersion != before.Items[i].ResourceVersion {
			t.Errorf("preflight wrote Node %s", after.Items[i].Name)
		}
	}

	// The operator aligns the zone: nothing blocks; instance types are notes.
	n, err = h.node(moved.Name)
	must.OK(t, err)
	n.Labels[v1.LabelTopologyZone] = "zone-" + moved.Cluster
	n.Labels[v1.LabelFailureDomainBetaZone] = "zone-" + moved.Cluster
	_, err = h.kube.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
	must.OK(t, err)
	code, r, stderr = h.preflight(t)
	if code != 0 || r.Blocking {
		t.Fatalf("exit %d, report %+v\n%s", code, r, stderr)
	}
	for _, d := range r.Differences {
		if d.Impact == preflight.Blocking {
			t.Errorf("blocking: %+v", d)
		}
	}
}
