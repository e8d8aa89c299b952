package provider_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

type env struct {
	t     *testing.T
	ctx   context.Context
	fleet *vcsim.Fleet
	p     *provider.Provider
}

// stretched starts vc-a (dc-1 with 2 clusters, dc-2), vc-b and vc-c, tags
// regions on datacenters and zones on clusters, and starts a provider with
// the given extra config.
func stretched(t *testing.T, head string, per map[string][]string) *env {
	t.Helper()
	return stretchedWith(t, "", head, per, provider.Options{})
}

// stretchedWith is stretched with a global section (default: timeouts of
// 5s and 3s) and provider options (the vCenter retry pacing is set for
// tests); prepare runs on the fleet before the provider starts.
func stretchedWith(t *testing.T, global, head string, per map[string][]string, opts provider.Options, prepare ...func(context.Context, *vcsim.Fleet)) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	f, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1", "dc-2"}, Clusters: 2, Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-b", Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-c", Hosts: 1, VMs: 2})
	must.OK(t, err)
	t.Cleanup(f.Close)
	for _, v := range f.VCenters {
		for _, vm := range v.VMs {
			must.OK(t, v.Tag(ctx, "k8s-zone", "zone-"+vm.Cluster, vm.ClusterRef))
			must.OK(t, v.Tag(ctx, "k8s-region", "region-"+v.Name+"-"+vm.Datacenter, v.Datacenter(vm.Datacenter)))
		}
	}
	for _, f2 := range prepare {
		f2(ctx, f)
	}
	if head == "" {
		head = "labels:\n  zone: k8s-zone\n  region: k8s-region\n"
	}
	if global == "" {
		global = "global:\n  connectTimeout: 5s\n  requestTimeout: 3s\n"
	}
	text := f.Config(global+head, per)
	cfg, _, err := config.Parse("test.yaml", []byte(text), config.Options{})
	must.OK(t, err)
	opts.VCenter.RetryMin, opts.VCenter.RetryMax = 50*time.Millisecond, 200*time.Millisecond
	p, err := provider.New(cfg, opts)
	must.OK(t, err)
	must.OK(t, p.Start(ctx, nil))
	t.Cleanup(p.Close)
	must.OK(t, p.WaitForSync(ctx))
	return &env{t: t, ctx: ctx, fleet: f, p: p}
}

// node is a Node as kubelet --cloud-provider=external registers it.
func node(vm vcsim.VM) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name},
		Status:     v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: strings.ToUpper(vm.UUID)}},
	}
}

// destroyedRef is a VM reference no simulated vCenter has: that of a VM
// destroyed.
const destroyedRef = "vm-999999"

// ghost is a Node this CCM initialized whose VM was destroyed since: its
// providerID has uuid, and it records (provider.LabelVM) a reference in
// vCenter vc-a that no VM has.
func ghost(name, uuid string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{provider.LabelVCenter: "vc-a", provider.LabelVM: destroyedRef}},
		Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuid}}
}

// initialized is vm's Node as this CCM leaves it: its providerID, and the
// record of its VM.
func initialized(vm vcsim.VM) *v1.Node {
	n := node(vm)
	n.Spec.ProviderID = "vsphere://" + vm.UUID
	n.Labels = map[string]string{provider.LabelVCenter: vm.VCenter, provider.LabelVM: vm.Ref.Value}
	return n
}

func TestLifecycle(t *testing.T) {
	e := stretched(t, "", nil)
	b := e.fleet.VCenter("vc-b")
	target := b.VMs[0]
	n := initialized(target)
	vm := object.NewVirtualMachine(b.Admin(), target.Ref)

	task, err := vm.PowerOff(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	poll.True(t, "shutdown reported", func() bool {
		off, err := e.p.InstanceShutdown(e.ctx, n)
		return off && err == nil
	})
	task, err = vm.PowerOn(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	poll.True(t, "running reported", func() bool {
		off, err := e.p.InstanceShutdown(e.ctx, n)
		return !off && err == nil
	})
	task, err = vm.PowerOff(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	task, err = vm.Destroy(e.ctx)
	must.OK(t, err)
	must.OK(t, task.Wait(e.ctx))
	poll.True(t, "deletion reported", func() bool {
		ok, err := e.p.InstanceExists(e.ctx, n)
		return !ok && err == nil
	})
}
