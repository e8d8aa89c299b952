package noderetry_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	fakecloud "k8s.io/cloud-provider/fake"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/noderetry"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

func waiting(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: []v1.Taint{
		{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
}

// TestRetryQueuesTheNode: the framework's own node controller, given the
// Tee's informer, initializes a Node it had dropped once Retry hands it
// the Node. The first lookup answers nothing (nil metadata, no error), on
// which the framework forgets the Node and never tries it again by
// itself: only Retry can bring it back.
func TestRetryQueuesTheNode(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	node := waiting("n1")
	kube := fake.NewClientset(node)
	factory := informers.NewSharedInformerFactory(kube, 0)
	tee := noderetry.New(factory.Core().V1().Nodes())
	if tee.Retry(node) {
		t.Fatal("Retry with no handler registered reported one")
	}

	calls := make(chan string, 10)
	var answer atomic.Bool
	cloud := &fakecloud.Cloud{EnableInstancesV2: true,
		OverrideInstanceMetadata: func(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
			// Decided before the call is reported: the test sets the next
			// answer as soon as it sees this one.
			answering := answer.Load()
			calls <- n.Name
			if !answering {
				return nil, nil
			}
			return &cloudprovider.InstanceMetadata{ProviderID: "vsphere://4200", Zone: "zone-a", Region: "region-1"}, nil
		}}
	nc, err := nodecontroller.NewCloudNodeController(tee.Informer(), kube, cloud, time.Hour, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); factory.Shutdown(); wg.Wait() })
	factory.Start(ctx.Done())
	wg.Go(func() { nc.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("test")) })

	// A guard against a hang, not a timing goal: the lookups come at once.
	next := func(what string) {
		t.Helper()
		select {
		case got := <-calls:
			if got != "n1" {
				t.Fatalf("%s: lookup of %q, want n1", what, got)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: no lookup", what)
		}
	}
	next("first initialization")
	answer.Store(true)
	if !tee.Retry(node) {
		t.Fatal("Retry: the framework's handler was not kept")
	}
	next("after Retry")
	poll.True(t, "the Node initialized", func() bool {
		n, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		return err == nil && n.Spec.ProviderID == "vsphere://4200" && n.Labels[v1.LabelTopologyZone] == "zone-a" && len(n.Spec.Taints) == 0
	})
}

// recorder counts the updates it is given.
type recorder struct{ updates atomic.Int32 }

func (r *recorder) OnAdd(any, bool)   {}
func (r *recorder) OnUpdate(_, _ any) { r.updates.Add(1) }
func (r *recorder) OnDelete(any)      {}

// TestRetryHandlers: a handler registered by any of the informer's three
// methods is given the Node; one removed is not.
func TestRetryHandlers(t *testing.T) {
	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	tee := noderetry.New(factory.Core().V1().Nodes())
	inf := tee.Informer().Informer()
	var a, b, c recorder
	if _, err := inf.AddEventHandler(&a); err != nil {
		t.Fatal(err)
	}
	regB, err := inf.AddEventHandlerWithResyncPeriod(&b, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandlerWithOptions(&c, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	if !tee.Retry(waiting("n1")) {
		t.Fatal("Retry reported no handler")
	}
	if err := inf.RemoveEventHandler(regB); err != nil {
		t.Fatal(err)
	}
	tee.Retry(waiting("n1"))
	if got := [3]int32{a.updates.Load(), b.updates.Load(), c.updates.Load()}; got != [3]int32{2, 1, 2} {
		t.Errorf("updates given (AddEventHandler, WithResyncPeriod removed after one, WithOptions) = %v, want [2 1 2]", got)
	}
	// Lister and informer are the shared informer's.
	if tee.Informer().Lister() == nil || inf.GetStore() != factory.Core().V1().Nodes().Informer().GetStore() {
		t.Error("the Tee's informer is not the shared one")
	}
}
