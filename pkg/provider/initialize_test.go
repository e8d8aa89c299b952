package provider_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// flakyBuilder is a ControllerClientBuilder whose Client fails the first
// failures times.
type flakyBuilder struct {
	mu       sync.Mutex
	failures int
	calls    int
	kube     kubernetes.Interface
}

func (b *flakyBuilder) Client(string) (kubernetes.Interface, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.calls <= b.failures {
		return nil, errors.New("no kubeconfig yet")
	}
	return b.kube, nil
}
func (b *flakyBuilder) ClientOrDie(n string) kubernetes.Interface { c, _ := b.Client(n); return c }
func (b *flakyBuilder) Config(string) (*restclient.Config, error) { return nil, errors.New("not used") }
func (b *flakyBuilder) ConfigOrDie(string) *restclient.Config     { return nil }

// TestInitializeRetriesStart: when the provider cannot start at
// Initialize (no Kubernetes client for its credential Secret yet), it
// retries in the background; lookups fail with "not started" meanwhile and
// succeed once it has started.
func TestInitializeRetriesStart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	f, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-a", Hosts: 1, VMs: 1})
	must.OK(t, err)
	defer f.Close()
	a := f.VCenter("vc-a")
	text := f.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 3s\n", nil)
	text = strings.Replace(text, "    user: "+a.User+"\n    password: "+a.Password+"\n", "    secretName: vc-creds\n    secretNamespace: kube-system\n", 1)
	cfg, _, err := config.Parse("i.yaml", []byte(text), config.Options{})
	must.OK(t, err)
	p, err := provider.New(cfg, provider.Options{})
	must.OK(t, err)
	defer p.Close()
	kube := fake.NewClientset(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vc-creds", Namespace: "kube-system"},
		Data: map[string][]byte{a.Server() + ".username": []byte(a.User), a.Server() + ".password": []byte(a.Password)}})
	b := &flakyBuilder{failures: 2, kube: kube}
	stop := make(chan struct{})
	defer close(stop)
	p.Initialize(b, stop)
	n := node(a.VMs[0])
	if _, err := p.InstanceMetadata(ctx, n); err == nil {
		t.Fatal("a lookup succeeded before the provider started")
	}
	poll.True(t, "the provider started and the VM found", func() bool {
		_, err := p.InstanceMetadata(ctx, n)
		return err == nil
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls != 3 {
		t.Errorf("%d attempts, want 3 (two failures, one success)", b.calls)
	}
}
