package provider_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestPrefetchFromInformer: through the Node informer the framework gives
// it (SetInformers), the provider reads ahead the VM details of Nodes that
// register with the uninitialized taint, before any lookup, also when the
// kubelet reports its systemUUID after registering; an initialized Node's
// VM is not read. The inventory is not eager here: no VM has details until
// something asks.
func TestPrefetchFromInformer(t *testing.T) {
	e := stretchedWith(t, "", "", nil, provider.Options{EagerDetailsMax: -1})
	a := e.fleet.VCenter("vc-a")
	ix := e.p.Inventory().Index("vc-a")
	if len(ix.VMs()) != 0 {
		t.Fatalf("%d VMs with details before any Node", len(ix.VMs()))
	}
	kube := fake.NewClientset()
	f := informers.NewSharedInformerFactory(kube, 0)
	e.p.SetInformers(f)
	// Its own stop: Shutdown waits for the informers, which the test's
	// context (ended by a cleanup registered earlier, so run later) would
	// stop only at its deadline.
	ctx, cancel := context.WithCancel(e.ctx)
	f.Start(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })

	tainted := func(vm vcsim.VM) *v1.Node {
		n := node(vm)
		n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
		return n
	}
	detailed := func(vm vcsim.VM) bool { d, ok := ix.VM(vm.Ref); return ok && d.Host == vm.HostRef }

	// Initialized first: the informer delivers in order, so once the
	// next Node's VM is detailed, this one was seen and left alone.
	_, err := kube.CoreV1().Nodes().Create(e.ctx, node(a.VMs[0]), metav1.CreateOptions{})
	must.OK(t, err)
	_, err = kube.CoreV1().Nodes().Create(e.ctx, tainted(a.VMs[1]), metav1.CreateOptions{})
	must.OK(t, err)
	poll.True(t, "the uninitialized Node's VM read ahead", func() bool { return detailed(a.VMs[1]) })
	if detailed(a.VMs[0]) {
		t.Error("the VM of an initialized Node was read ahead")
	}

	// Registered before the kubelet reported its systemUUID.
	late := tainted(a.VMs[2])
	late.Status.NodeInfo.SystemUUID = ""
	late, err = kube.CoreV1().Nodes().Create(e.ctx, late, metav1.CreateOptions{})
	must.OK(t, err)
	late.Status.NodeInfo.SystemUUID = a.VMs[2].UUID
	_, err = kube.CoreV1().Nodes().UpdateStatus(e.ctx, late, metav1.UpdateOptions{})
	must.OK(t, err)
	poll.True(t, "read ahead once the systemUUID is reported", func() bool { return detailed(a.VMs[2]) })
}
