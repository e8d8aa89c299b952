package nodetopology_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// A Node that joined without the uninitialized taint and has no
// providerID: reported (a NotInitialized event with the fix, the gauge),
// never written unless nodes.adoptUntainted.
func TestJoinedWithoutTaintReported(t *testing.T) {
	src := newFakeSource()
	src.set("bare", provider.Observation{}, nil)
	e := startWith(t, src, nodetopology.Options{})
	_, ctx := ktesting.NewTestContext(t)
	_, err := e.kube.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}, metav1.CreateOptions{})
	must.OK(t, err)
	ev := e.ev.Wait(t, "bare", nodetopology.ReasonNotInitialized)
	if ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, "--cloud-provider=external") || !strings.Contains(ev.Message, "nodes.adoptUntainted") {
		t.Errorf("event %+v", ev)
	}
	poll.True(t, "the gauge at 1", func() bool { return metricValue(t, e.reg, "vsphere_ccm_nodes_joined_without_taint") == "1" })
	n, err := e.kube.CoreV1().Nodes().Get(ctx, "bare", metav1.GetOptions{})
	must.OK(t, err)
	if len(n.Spec.Taints) != 0 || n.Spec.ProviderID != "" {
		t.Errorf("the Node was written: %+v", n.Spec)
	}
	must.OK(t, e.kube.CoreV1().Nodes().Delete(ctx, "bare", metav1.DeleteOptions{}))
	poll.True(t, "the gauge back at 0", func() bool { return metricValue(t, e.reg, "vsphere_ccm_nodes_joined_without_taint") == "0" })
}

// With nodes.adoptUntainted: a Node whose VM is found by its machine UUID
// is tainted (once, with a NodeAdopted event and the counter), so that the
// node controller initializes it; one whose VM is not found is left alone
// until it is; one whose VM is found by name only is never adopted; a Node
// with a providerID is never touched.
func TestJoinedWithoutTaintAdopted(t *testing.T) {
	src := newFakeSource()
	src.set("found", provider.Observation{}, nil)
	src.set("by-name", provider.Observation{}, nil)
	src.byName = map[string]string{"by-name": "42000000-0000-4000-8000-0000000000bb"}
	e := startWith(t, src, nodetopology.Options{AdoptUntainted: true})
	_, ctx := ktesting.NewTestContext(t)
	machine := func(uuid string) v1.NodeStatus { return v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: uuid}} }
	for _, n := range []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "found"}, Status: machine("42000000-0000-4000-8000-000000000001")},
		{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Status: machine("42000000-0000-4000-8000-000000000002")},
		{ObjectMeta: metav1.ObjectMeta{Name: "by-name"}, Status: machine("4c4c4544-0000-0000-0000-000000000003")},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-provider"}, Spec: v1.NodeSpec{ProviderID: "kind://docker/kind/other"}},
	} {
		_, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		must.OK(t, err)
	}
	tainted := func(name string) bool {
		n, err := e.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		must.OK(t, err)
		return provider.HasUninitializedTaint(n)
	}
	got := e.ev.WaitAll(t, "found/"+nodetopology.ReasonAdopted, "by-name/"+nodetopology.ReasonNotInitialized)
	ev := got["found/"+nodetopology.ReasonAdopted]
	if ev.Type != v1.EventTypeNormal || !strings.Contains(ev.Message, "vsphere://42000000-0000-4000-8000-000000000001") {
		t.Errorf("event %+v", ev)
	}
	if !tainted("found") {
		t.Error("the Node whose VM is found is not tainted")
	}
	if metricValue(t, e.reg, "vsphere_ccm_nodes_adopted_total") != "1" {
		t.Errorf("adopted %s, want 1", metricValue(t, e.reg, "vsphere_ccm_nodes_adopted_total"))
	}
	// "later": its VM appears; a change notification brings it back.
	src.set("later", provider.Observation{}, nil)
	src.changed.Notify()
	e.ev.Wait(t, "later", nodetopology.ReasonAdopted)
	if !tainted("later") || tainted("other-provider") {
		t.Errorf("tainted: later %v, other-provider %v", tainted("later"), tainted("other-provider"))
	}
	// A VM found by name alone is another machine's as far as anyone can
	// prove: never adopted, and said so.
	ev = got["by-name/"+nodetopology.ReasonNotInitialized]
	if !strings.Contains(ev.Message, "by name") || tainted("by-name") {
		t.Errorf("by name: tainted %v, event %+v", tainted("by-name"), ev)
	}
}
