package nodetopology

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	fakecloud "k8s.io/cloud-provider/fake"
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
func statusPatches(t *testing.T, kube *fake.Clientset, run func()) ([]v1.NodeAddress, int) {
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

// TestAddressesAsTheFramework: on the same Node and the same provider
// answer, syncAddresses writes what the framework's own node status pass
// (cloud-provider's CloudNodeController.UpdateNodeStatus, run here with a
// fake cloud) writes, and writes only where an address really changes
// (the framework patches, with an empty change, where its test sees one
// that is not there).
func TestAddressesAsTheFramework(t *testing.T) {
	for _, tc := range addressCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			framework := fake.NewClientset(addressNode(tc.status, tc.nodeIP))
			factory := informers.NewSharedInformerFactory(framework, 0)
			cloud := &fakecloud.Cloud{EnableInstancesV2: true, Addresses: tc.cloud}
			cnc, err := nodecontroller.NewCloudNodeController(factory.Core().V1().Nodes(), framework, cloud, 0, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			frameworkAddrs, frameworkPatches := statusPatches(t, framework, func() {
				if err := cnc.UpdateNodeStatus(ctx); err != nil {
					t.Fatal(err)
				}
			})
			cancel()
			factory.Shutdown()
			ctx = context.Background()

			ours := fake.NewClientset(addressNode(tc.status, tc.nodeIP))
			c := &Controller{kube: ours}
			var wrote bool
			ourAddrs, patches := statusPatches(t, ours, func() {
				if wrote, err = c.syncAddresses(ctx, addressNode(tc.status, tc.nodeIP), tc.cloud); err != nil {
					t.Fatal(err)
				}
			})

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

// FuzzFrameworkAddresses: whatever the addresses, a Node whose addresses
// are what FrameworkAddresses gives is never written again (no write
// without a change, no flapping between two answers).
func FuzzFrameworkAddresses(f *testing.F) {
	f.Add("10.0.0.5", "fd00::5", "w1", "10.0.0.5", uint8(3))
	f.Add("10.0.0.5", "10.0.0.6", "", "", uint8(1))
	f.Fuzz(func(t *testing.T, a, b, host, nodeIP string, types uint8) {
		kinds := []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP, v1.NodeHostName, v1.NodeInternalDNS}
		cloud := []v1.NodeAddress{{Type: kinds[types%4], Address: a}, {Type: kinds[(types/4)%4], Address: b}}
		if host != "" {
			cloud = append(cloud, v1.NodeAddress{Type: v1.NodeHostName, Address: host})
		}
		node := addressNode(addrs("Hostname", "w1"), nodeIP)
		want, ok, err := FrameworkAddresses(node, cloud)
		if err != nil || !ok {
			return
		}
		node.Status.Addresses = want
		again, ok, err := FrameworkAddresses(node, cloud)
		if err != nil || !ok {
			t.Fatalf("second pass: %v %v", ok, err)
		}
		if addressesDue(node, again) {
			t.Errorf("written again: %v -> %v", fmt.Sprint(want), fmt.Sprint(again))
		}
	})
}
