package main

import (
	"context"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
	kube    kubernetes.Interface // nil: no Pod to record events on
	pod     *v1.ObjectReference
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	log     klog.Logger
}

func newConfigReload(path string, cfg *config.Config, env []string, m *configwatch.Metrics, stop func(), validate func(*config.Config) error) *configReload {
	return &configReload{
		watcher: configwatch.New(path, cfg, configwatch.Options{Env: env, Metrics: m, Validate: validate}),
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
		r.kube = kube
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

// Changed implements configwatch.Handler. The event is recorded before the
// controller manager is stopped: the process exits right after.
func (r *configReload) Changed(what string) {
	r.log.Info("The cloud-config changed; stopping to restart with it (the lease is released once the vCenter connections are closed)", "changed", what)
	r.event(v1.EventTypeNormal, "CloudConfigChanged", "The cloud-config changed ("+what+"); the controller manager restarts to apply it")
	r.stop()
}

// Refused implements configwatch.Handler. Config errors name file, line
// and field, never a value.
func (r *configReload) Refused(err error) {
	r.log.Error(err, "The changed cloud-config is refused; running on the config the process started with")
	r.event(v1.EventTypeWarning, "CloudConfigRefused", "The changed cloud-config is refused; running on the config the process started with: "+err.Error())
}

// event records an event on the Pod, synchronously (these are rare, and
// one is followed by the process's exit); a failure is logged.
func (r *configReload) event(eventType, reason, msg string) {
	if r.kube == nil {
		return
	}
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	now := metav1.NewTime(time.Now())
	ev := &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: r.pod.Name + ".", Namespace: r.pod.Namespace},
		InvolvedObject: *r.pod, Reason: reason, Message: msg, Type: eventType,
		Source:         v1.EventSource{Component: nodeevents.Component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.kube.CoreV1().Events(r.pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.log.Error(err, "Event not recorded", "reason", reason)
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
