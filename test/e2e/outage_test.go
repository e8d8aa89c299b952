//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestSiteDownAtStart starts the CCM with vc-b refusing connections and
// vc-c accepting TCP but never answering. The Nodes of vc-a are
// initialized without waiting for them; once both return, their Nodes are
// initialized too (the CCM hands them back to the framework's node
// controller in its process instead of waiting out its back-off, without
// writing them). The figures are printed; make bench holds the timing
// goals.
func TestSiteDownAtStart(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b, c := h.fleet.VCenter("vc-b"), h.fleet.VCenter("vc-c")
	must.OK(t, b.SetMode(vcsim.Down))
	must.OK(t, c.SetMode(vcsim.Hung))
	h.registerAll(t)
	start := time.Now()
	ccm := h.startCCM()
	h.waitInitialized(t, h.fleet.VCenter("vc-a").VMs...)
	t.Logf("vc-a's nodes initialized %.1fs after the CCM started, with vc-b refusing and vc-c black-holed", time.Since(start).Seconds())
	h.uninitialized(t, append(b.VMs, c.VMs...)...)

	back := time.Now()
	must.OK(t, b.SetMode(vcsim.Up))
	must.OK(t, c.SetMode(vcsim.Up))
	h.waitInitialized(t, append(b.VMs, c.VMs...)...)
	t.Logf("vc-b's and vc-c's nodes initialized %.1fs after both returned", time.Since(back).Seconds())
	if v := ccm.metric(t, `vsphere_ccm_node_initialization_retries_total{via="informer"}`); v < 1 {
		t.Errorf("retries handed to the node controller in process: %v, want at least one", v)
	}
	for _, vm := range append(b.VMs, c.VMs...) {
		n, err := h.node(vm.Name)
		must.OK(t, err)
		if a, ok := n.Annotations[nodetopology.AnnotationRetry]; ok {
			t.Errorf("%s: annotated %s=%s: the node controller runs in the CCM, the retry needs no Node write", n.Name, nodetopology.AnnotationRetry, a)
		}
	}
}

// TestOutageDeletesNothing: vc-a goes down after its Nodes were
// initialized. Lifecycle passes consult it and fail (sync point: the
// lookup error counter), nothing is deleted, the other vCenters keep
// initializing Nodes, and vc-a's new Node is initialized once it returns.
func TestOutageDeletesNothing(t *testing.T) {
	t.Parallel()
	h := setup(t)
	c := h.startCCM()
	a, b := h.fleet.VCenter("vc-a"), h.fleet.VCenter("vc-b")
	oldA, newA := a.VMs[:len(a.VMs)-1], a.VMs[len(a.VMs)-1]
	for _, vm := range oldA {
		h.register(t, vm, false)
	}
	h.waitInitialized(t, oldA...)

	must.OK(t, a.SetMode(vcsim.Down))
	errorsBefore := c.metric(t, `vsphere_ccm_node_lookups_total{result="error"}`)
	newB := b.VMs[len(b.VMs)-1]
	h.register(t, newB, false)
	h.waitInitialized(t, newB) // other vCenters keep working
	h.register(t, newA, false)
	// Nodes have no Ready condition: every lifecycle pass (2 s) asks about
	// each of them. Wait for two passes' worth of failed lookups.
	poll.NoError(t, "lifecycle passes over vc-a's nodes", 60*time.Second, func() error {
		if got := c.metric(t, `vsphere_ccm_node_lookups_total{result="error"}`); got < errorsBefore+float64(2*len(a.VMs)) {
			return errNotYet
		}
		return nil
	})
	for _, vm := range a.VMs {
		if _, err := h.node(vm.Name); err != nil {
			t.Fatalf("node %s of the unreachable vCenter: %v", vm.Name, err)
		}
	}
	h.uninitialized(t, newA)
	must.OK(t, a.SetMode(vcsim.Up))
	h.waitInitialized(t, newA)
}

// TestBadCAFile: vc-b's caFile does not exist at start. vc-b alone is
// unusable (its Nodes get an event naming the caFile), the others work;
// once the file appears, vc-b connects without a restart.
func TestBadCAFile(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b := h.fleet.VCenter("vc-b")
	missing := filepath.Join(h.work, "vc-b-ca.pem")
	text, err := os.ReadFile(h.cfgPath)
	must.OK(t, err)
	head, tail, _ := strings.Cut(string(text), "  vc-b:\n")
	tail = strings.Replace(tail, "caFile: "+h.fleet.CAFile, "caFile: "+missing, 1)
	must.OK(t, os.WriteFile(h.cfgPath, []byte(head+"  vc-b:\n"+tail), 0o600))

	h.startCCM()
	h.registerAll(t)
	h.waitInitialized(t, append(h.fleet.VCenter("vc-a").VMs, h.fleet.VCenter("vc-c").VMs...)...)
	h.waitEvent(t, b.VMs[0].Name, "VCenterUnreachable", `vc-b`, "caFile")
	h.uninitialized(t, b.VMs...)

	ca, err := os.ReadFile(h.fleet.CAFile)
	must.OK(t, err)
	must.OK(t, os.WriteFile(missing, ca, 0o600))
	h.waitInitialized(t, b.VMs...)
}
