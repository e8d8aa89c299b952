//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestSiteDownAtStart starts the CCM with vc-b refusing connections and
// vc-c accepting TCP but never answering. The Nodes of vc-a are
// initialized without waiting for them; once both return, their Nodes are
// initialized too (the CCM asks the node controller for a retry instead of
// waiting out its back-off). The figures are printed; make bench holds the
// timing goals.
func TestSiteDownAtStart(t *testing.T) {
	h := setup(t)
	b, c := h.fleet.VCenter("vc-b"), h.fleet.VCenter("vc-c")
	must(t, b.SetMode(vcsim.Down))
	must(t, c.SetMode(vcsim.Hung))
	for _, vm := range h.fleet.VMs() {
		h.register(t, vm, false)
	}
	start := time.Now()
	h.startCCM()
	h.waitInitialized(t, h.fleet.VCenter("vc-a").VMs...)
	t.Logf("vc-a's nodes initialized %.1fs after the CCM started, with vc-b refusing and vc-c black-holed", time.Since(start).Seconds())
	for _, vm := range append(b.VMs, c.VMs...) {
		n, err := h.node(vm.Name)
		must(t, err)
		if !hasTaint(n, uninitializedTaint) || n.Spec.ProviderID != "" {
			t.Errorf("%s initialized while its vCenter was unreachable", vm.Name)
		}
	}

	back := time.Now()
	must(t, b.SetMode(vcsim.Up))
	must(t, c.SetMode(vcsim.Up))
	h.waitInitialized(t, append(b.VMs, c.VMs...)...)
	t.Logf("vc-b's and vc-c's nodes initialized %.1fs after both returned", time.Since(back).Seconds())
	n, err := h.node(b.VMs[0].Name)
	must(t, err)
	if n.Annotations[provider.AnnotationRetry] == "" {
		t.Errorf("%s: no %s annotation: the retry was not requested", n.Name, provider.AnnotationRetry)
	}
}
