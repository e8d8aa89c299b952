package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/configwatch"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
)

// The Pod the controller manager runs in, from the downward API (the
// shipped manifests set them): config events are recorded on it.
const (
	podNameEnv      = "POD_NAME"
	podNamespaceEnv = "POD_NAMESPACE"
)

// configReload follows the cloud-config while the controller manager runs
// (configwatch). A valid change ends the controller manager (stop) so that
// the process restarts with it: the provider is closed, then the leader
// lease released (see lease.go), then the process exits 0 and its Pod's
// container restarts. An invalid change is refused: a log line, an event
// on the Pod, the metric, and the process keeps its running config.
type configReload struct {
	watcher *configwatch.Watcher
	stop    func()
	events  record.EventRecorder // nil: no Pod to record on
	pod     *v1.ObjectReference
	changed atomic.Bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	log     klog.Logger
}

func newConfigReload(path string, cfg *config.Config, env []string, m *configwatch.Metrics, stop func()) *configReload {
	return &configReload{
		watcher: configwatch.New(path, cfg, configwatch.Options{Env: env, Metrics: m}),
		stop:    stop,
		log:     klog.Background().WithName("config").WithValues("path", path),
	}
}

// start follows the files until close; kube, if set, records the events
// on the Pod named by POD_NAME and POD_NAMESPACE in env.
func (r *configReload) start(kube kubernetes.Interface, env []string) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	name, ns := lookupEnv(env, podNameEnv), lookupEnv(env, podNamespaceEnv)
	if kube != nil && name != "" && ns != "" {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
		r.events = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: nodeevents.Component})
		r.pod = &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: name, Namespace: ns}
	}
	r.wg.Go(func() { r.watcher.Run(klog.NewContext(ctx, r.log), r) })
}

// close stops following the files and waits for the loop.
func (r *configReload) close() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
}

// Changed implements configwatch.Handler.
func (r *configReload) Changed(what string) {
	r.log.Info("The cloud-config changed; stopping to restart with it (the lease is released once the vCenter connections are closed)", "changed", what)
	if r.events != nil {
		r.events.Event(r.pod, v1.EventTypeNormal, "CloudConfigChanged", "The cloud-config changed ("+what+"); the controller manager restarts to apply it")
	}
	r.changed.Store(true)
	r.stop()
}

// Refused implements configwatch.Handler. Config errors name file, line
// and field, never a value.
func (r *configReload) Refused(err error) {
	r.log.Error(err, "The changed cloud-config is refused; running on the config the process started with")
	if r.events != nil {
		r.events.Event(r.pod, v1.EventTypeWarning, "CloudConfigRefused", "The changed cloud-config is refused; running on the config the process started with: "+err.Error())
	}
}

func lookupEnv(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}
