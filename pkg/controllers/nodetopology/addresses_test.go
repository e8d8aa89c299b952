package nodetopology

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	fakecloud "k8s.io/cloud-provider/fake"
	testingclock "k8s.io/utils/clock/testing"
)

func addrs(pairs ...string) []v1.NodeAddress {
	var out []v1.NodeAddress
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, v1.NodeAddress{Type: v1.NodeAddressType(pairs[i]), Address: pairs[i+1]})
	}
	return out
}

// addressCases are Nodes as the framework's node status pass finds them,
// and the addresses the provider gives.
var addressCases = []struct {
	name     string
	status   []v1.NodeAddress // the Node's addresses now
	nodeIP   string           // the kubelet's --node-ip annotation
	cloud    []v1.NodeAddress // InstanceMetadata's addresses
	wantEdit bool             // an address really changes
	// frameworkNoOp: the framework patches though nothing changes (its
	// test keeps one address per type).
	frameworkNoOp bool
}{
	{name: "a new guest address", status: addrs("InternalIP", "10.0.0.5", "Hostname", "w1"), cloud: addrs("InternalIP", "10.0.0.9", "Hostname", "w1"), wantEdit: true},
	{name: "unchanged", status: addrs("InternalIP", "10.0.0.5", "Hostname", "w1"), cloud: addrs("InternalIP", "10.0.0.5", "Hostname", "w1")},
	{name: "the provider gives no host name: the kubelet's is kept", status: addrs("InternalIP", "10.0.0.5", "Hostname", "w1"), cloud: addrs("InternalIP", "10.0.0.9"), wantEdit: true},
	{name: "no host name given, none changed", status: addrs("InternalIP", "10.0.0.5", "Hostname", "w1"), cloud: addrs("InternalIP", "10.0.0.5")},
	{name: "reordered only: the framework sees no change", status: addrs("Hostname", "w1", "InternalIP", "10.0.0.5"), cloud: addrs("InternalIP", "10.0.0.5", "Hostname", "w1")},
	{name: "two of one type, unchanged (the framework's test always sees a change)", status: addrs("InternalIP", "10.0.0.5", "InternalIP", "fd00::5", "Hostname", "w1"),
		cloud: addrs("InternalIP", "10.0.0.5", "InternalIP", "fd00::5", "Hostname", "w1"), frameworkNoOp: true},
	{name: "two of one type, one changed", status: addrs("InternalIP", "10.0.0.5", "InternalIP", "fd00::5", "Hostname", "w1"),
		cloud: addrs("InternalIP", "10.0.0.5", "InternalIP", "fd00::9", "Hostname", "w1"), wantEdit: true},
	{name: "an address removed", status: addrs("InternalIP", "10.0.0.5", "ExternalIP", "192.0.2.5", "Hostname", "w1"), cloud: addrs("InternalIP", "10.0.0.5", "Hostname", "w1"), wantEdit: true},
	{name: "the kubelet's node IP first", status: addrs("InternalIP", "10.0.0.5", "Hostname", "w1"), nodeIP: "10.0.0.6",
		cloud: addrs("InternalIP", "10.0.0.5", "InternalIP", "10.0.0.6", "Hostname", "w1"), wantEdit: true},
	{name: "a node IP the provider does not give: nothing written", status: addrs("InternalIP", "10.0.0.5", "Hostname", "w1"), nodeIP: "10.0.0.7",
		cloud: addrs("InternalIP", "10.0.0.9", "Hostname", "w1")},
	{name: "no address given: nothing written", status: addrs("InternalIP", "10.0.0.5", "Hostname", "w1")},
	{name: "a Node without addresses yet", cloud: addrs("InternalIP", "10.0.0.5", "Hostname", "w1"), wantEdit: true},
}

func addressNode(status []v1.NodeAddress, nodeIP string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Annotations: map[string]string{}},
		Spec: v1.NodeSpec{ProviderID: "vsphere://4211a1b2-0000-4000-8000-000000000001"}, Status: v1.NodeStatus{Addresses: status}}
	if nodeIP != "" {
		n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr] = nodeIP
	}
	return n
}

// statusPatches runs kube, then returns the Node's addresses and how many
// status patches were made.
func statusPatches(t testing.TB, kube *fake.Clientset, run func()) ([]v1.NodeAddress, int) {
	t.Helper()
	run()
	n, err := kube.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patches := 0
	for _, a := range kube.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetSubresource() == "status" {
			patches++
		}
	}
	return n.Status.Addresses, patches
}

// frameworkPass runs cloud-provider's own node status pass
// (CloudNodeController.UpdateNodeStatus, with a fake cloud that gives
// cloud) on node, and returns the Node's addresses after it and its
// status patches.
func frameworkPass(t testing.TB, node *v1.Node, cloud []v1.NodeAddress) ([]v1.NodeAddress, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	kube := fake.NewClientset(node)
	factory := informers.NewSharedInformerFactory(kube, 0)
	cnc, err := nodecontroller.NewCloudNodeController(factory.Core().V1().Nodes(), kube, &fakecloud.Cloud{EnableInstancesV2: true, Addresses: cloud}, 0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	defer factory.Shutdown()
	defer cancel()
	return statusPatches(t, kube, func() {
		if err := cnc.UpdateNodeStatus(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// ourPass runs syncAddresses on node, and returns whether it wrote, the
// Node's addresses after it and the status patches.
func ourPass(t testing.TB, node *v1.Node, cloud []v1.NodeAddress) (bool, []v1.NodeAddress, int) {
	t.Helper()
	kube := fake.NewClientset(node.DeepCopy())
	c := &Controller{kube: kube, opts: Options{Clock: testingclock.NewFakeClock(time.Now())}}
	var after time.Duration
	var err error
	addrs, patches := statusPatches(t, kube, func() {
		// First seen: the pace starts (the framework writes a new Node's
		// addresses itself); the write comes at its end.
		if after, err = c.syncAddresses(context.Background(), node, cloud); err == nil && after == AddressPace {
			c.opts.Clock.(*testingclock.FakeClock).Step(AddressPace)
			after, err = c.syncAddresses(context.Background(), node, cloud)
		}
	})
	if err != nil || after != 0 {
		t.Fatalf("syncAddresses: %v, again after %v", err, after)
	}
	return patches > 0, addrs, patches
}

// TestAddressesAsTheFramework: on the same Node and the same provider
// answer, syncAddresses writes what the framework's own node status pass
// writes, and writes only where an address really changes (the framework
// patches, with an empty change, where its test sees one that is not
// there).
func TestAddressesAsTheFramework(t *testing.T) {
	for _, tc := range addressCases {
		t.Run(tc.name, func(t *testing.T) {
			node := addressNode(tc.status, tc.nodeIP)
			frameworkAddrs, frameworkPatches := frameworkPass(t, node, tc.cloud)
			wrote, ourAddrs, patches := ourPass(t, node, tc.cloud)
			if !equality.Semantic.DeepEqual(ourAddrs, frameworkAddrs) {
				t.Errorf("addresses: ours %v, the framework's %v", ourAddrs, frameworkAddrs)
			}
			if edited := !equality.Semantic.DeepEqual(frameworkAddrs, tc.status); edited != tc.wantEdit {
				t.Errorf("the framework changed the addresses: %v, want %v (the case is wrong)", edited, tc.wantEdit)
			}
			if frameworkPatches != btoi(tc.wantEdit || tc.frameworkNoOp) {
				t.Errorf("the framework made %d status patches (the case is wrong)", frameworkPatches)
			}
			if wrote != tc.wantEdit || patches != btoi(tc.wantEdit) {
				t.Errorf("wrote %v with %d status patches, want %v", wrote, patches, tc.wantEdit)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestAddressWritesPaced: a Node first seen wanting a write waits a pace
// (the framework writes a new Node's addresses right after initializing
// it); a lister copy that predates the controller's own write is not
// written again; a Node written less than AddressPace
// ago waits for the pace (a kubelet or a guest that rewrites addresses
// gets one write per pace, not one per change); a failed write too.
func TestAddressWritesPaced(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Now())
	node := addressNode(addrs("InternalIP", "10.0.0.5", "Hostname", "w1"), "")
	node.ResourceVersion = "1"
	kube := fake.NewClientset(node.DeepCopy())
	c := &Controller{kube: kube, opts: Options{Clock: clk}}
	patches := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if p, ok := a.(k8stesting.PatchAction); ok && p.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	cloud := addrs("InternalIP", "10.0.0.9", "Hostname", "w1")
	// First seen (just initialized): the framework writes its addresses.
	if after, err := c.syncAddresses(ctx, node, cloud); err != nil || after != AddressPace || patches() != 0 {
		t.Fatalf("first seen: again after %v, %v, %d patches; want no write, a look after the pace", after, err, patches())
	}
	clk.Step(AddressPace)
	if after, err := c.syncAddresses(ctx, node, cloud); err != nil || after != 0 || patches() != 1 {
		t.Fatalf("first change: again after %v, %v, %d patches; want written once", after, err, patches())
	}
	// The informer has not delivered the write: the same copy again.
	if after, err := c.syncAddresses(ctx, node, cloud); err != nil || after != staleRecheck || patches() != 1 {
		t.Errorf("the stale copy: again after %v, %v, %d patches; want no write, a look in %v", after, err, patches(), staleRecheck)
	}
	// Something wrote the old addresses back (a kubelet): paced.
	clk.Step(AddressPace / 3)
	rewritten := node.DeepCopy()
	rewritten.ResourceVersion = "3"
	if after, err := c.syncAddresses(ctx, rewritten, cloud); err != nil || after != AddressPace-AddressPace/3 || patches() != 1 {
		t.Errorf("within the pace: again after %v, %v, %d patches; want no write, a look when the pace ends", after, err, patches())
	}
	clk.Step(AddressPace)
	if after, err := c.syncAddresses(ctx, rewritten, cloud); err != nil || after != 0 || patches() != 2 {
		t.Errorf("after the pace: again after %v, %v, %d patches; want written", after, err, patches())
	}
	// A refused write is tried again after the pace, not at every change.
	kube.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(v1.Resource("nodes"), "w1", errors.New("an admission policy"))
	})
	clk.Step(AddressPace)
	rewritten.ResourceVersion = "5"
	if after, err := c.syncAddresses(ctx, rewritten, cloud); err == nil || after != AddressPace {
		t.Errorf("refused: again after %v, %v; want the error and a look after the pace", after, err)
	}
	if after, err := c.syncAddresses(ctx, rewritten, cloud); err != nil || after != AddressPace {
		t.Errorf("refused, at once again: again after %v, %v; want no write before the pace", after, err)
	}
	c.forget("w1")
	if _, ok := c.addresses.get("w1"); ok {
		t.Error("a deleted Node's record is kept")
	}
}

// FuzzAddressesAsTheFramework: for any Node addresses, kubelet node IP and
// provider answer, syncAddresses leaves the Node with the addresses the
// framework's own status pass leaves, and writes exactly when they differ
// from the Node's.
func FuzzAddressesAsTheFramework(f *testing.F) {
	f.Add(uint16(0x0123), uint16(0x0121), uint8(0))
	f.Add(uint16(0x1123), uint16(0x0123), uint8(1))
	f.Add(uint16(0x2102), uint16(0x2301), uint8(2))
	f.Fuzz(func(t *testing.T, status, cloud uint16, nodeIP uint8) {
		// Each nibble is one address (its type and value from small sets,
		// so that they collide); the high nibble's top bits are the count.
		pool := []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeInternalIP, Address: "10.0.0.6"},
			{Type: v1.NodeInternalIP, Address: "fd00::5"}, {Type: v1.NodeExternalIP, Address: "192.0.2.5"},
			{Type: v1.NodeHostName, Address: "w1"}, {Type: v1.NodeHostName, Address: "w1.example"},
			{Type: v1.NodeInternalDNS, Address: "w1.internal"}, {Type: v1.NodeExternalIP, Address: "10.0.0.5"},
		}
		list := func(bits uint16) []v1.NodeAddress {
			var out []v1.NodeAddress
			for i := range int(bits>>12) % 4 {
				out = append(out, pool[(bits>>(4*i))&7])
			}
			return out
		}
		ips := []string{"", "10.0.0.5", "10.0.0.6", "fd00::5", "10.0.0.7"}
		node := addressNode(list(status), ips[int(nodeIP)%len(ips)])
		frameworkAddrs, _ := frameworkPass(t, node, list(cloud))
		wrote, ourAddrs, _ := ourPass(t, node, list(cloud))
		if !equality.Semantic.DeepEqual(ourAddrs, frameworkAddrs) {
			t.Errorf("status %v, cloud %v, node IP %q: ours %v, the framework's %v", list(status), list(cloud), ips[int(nodeIP)%len(ips)], ourAddrs, frameworkAddrs)
		}
		if differ := !equality.Semantic.DeepEqual(frameworkAddrs, node.Status.Addresses); wrote != differ {
			t.Errorf("status %v, cloud %v: wrote %v, the addresses changed %v", list(status), list(cloud), wrote, differ)
		}
	})
}
