package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/configrollout"
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
// (configwatch) and publishes what this replica runs (configrollout). A
// valid change, read twice, ends the controller manager (stop) once it is
// this replica's turn: standbys first, the leader once a standby runs the
// new config. The provider is then closed, the leader lease released (see
// lease.go), and the process exits 0; its Pod's container restarts. An
// invalid change is refused: a log line, an event on the Pod, the metric,
// and the process keeps its running config.
type configReload struct {
	watcher *configwatch.Watcher
	coord   *configrollout.Coordinator // nil: no Pod to publish for
	stop    func()
	kube    kubernetes.Interface // nil: no Pod to record events on
	pod     *v1.ObjectReference
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	log     klog.Logger
	// ctx is the loops' context, for Changed's last record.
	ctx context.Context
}

// reloadOptions are what configReload needs from the command line.
type reloadOptions struct {
	path     string
	started  []byte // the config file as parsed at start
	env      []string
	metrics  *configwatch.Metrics
	validate func(*config.Config) error
	checkCA  func(context.Context, config.VCenter, []byte) error
	// leading, nil without leader election; group the leader lease's
	// namespace and name.
	leading            func() bool
	groupNS, groupName string
	minUptime, jitter  time.Duration
	startedAt          time.Time
}

func newConfigReload(path string, stop func()) *configReload {
	return &configReload{stop: stop, log: klog.Background().WithName("config").WithValues("path", path)}
}

// start follows the files until close. With kube and the Pod named by
// POD_NAME and POD_NAMESPACE in env, it records the events on the Pod and,
// under leader election, publishes this replica's record and waits for its
// turn; otherwise a valid change restarts it after the minimum uptime and
// a jitter.
func (r *configReload) start(kube kubernetes.Interface, o reloadOptions, cfg *config.Config) {
	r.watcher = configwatch.New(o.path, cfg, configwatch.Options{Env: o.env, Metrics: o.metrics, Validate: o.validate, CheckCA: o.checkCA, Started: o.started})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), r.log))
	r.ctx, r.cancel = ctx, cancel
	name, ns := lookupEnv(o.env, podNameEnv), lookupEnv(o.env, podNamespaceEnv)
	copts := configrollout.Options{Pod: name, Namespace: ns, Group: o.groupName, Hash: r.watcher.Fingerprint(),
		Started: o.startedAt, Leading: o.leading, MinUptime: o.minUptime, Jitter: o.jitter}
	if kube != nil && name != "" && ns != "" {
		r.kube = kube
		r.pod = &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: name, Namespace: ns}
		if o.leading != nil {
			copts.Namespace = o.groupNS
			r.coord = configrollout.New(kube, copts)
			r.wg.Go(func() { r.coord.Run(ctx) })
		}
	}
	var turn configwatch.Turn = r.coord
	if r.coord == nil {
		solo := copts
		solo.Leading = nil
		turn = configrollout.New(nil, solo)
	}
	if sp := subPathMount(os.DirFS("/"), o.path); sp != "" {
		r.log.Info("The cloud-config is mounted as a single file (a subPath or bind mount): a ConfigMap or Secret update never reaches it, so no change is applied until the Pod is recreated; mount the volume's directory instead", "mount", sp)
		r.event(v1.EventTypeWarning, "CloudConfigSubPath", "The cloud-config "+o.path+" is mounted as a single file (subPath): updates of its ConfigMap or Secret never reach the running Pod; mount the volume's directory instead")
	}
	r.wg.Go(func() { r.watcher.Run(ctx, turn, r) })
}

// close stops following the files and waits for the loops.
func (r *configReload) close() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
}

// Changed implements configwatch.Handler. The event is recorded, and the
// record marked as restarting, before the controller manager is stopped:
// the process exits right after.
func (r *configReload) Changed(what, why string) {
	r.log.Info("The cloud-config changed; stopping to restart with it (the lease is released once the vCenter connections are closed)", "changed", what, "turn", why)
	r.event(v1.EventTypeNormal, "CloudConfigChanged", "The cloud-config changed ("+what+"); the controller manager restarts to apply it: "+why)
	if r.coord != nil {
		r.coord.Stopping(r.ctx)
	}
	r.stop()
}

// Waiting implements configwatch.Handler.
func (r *configReload) Waiting(what, why string) {
	r.log.Info("The cloud-config changed; the restart that applies it waits for this replica's turn", "changed", what, "waiting", why)
	r.event(v1.EventTypeNormal, "CloudConfigChangeWaiting", "The cloud-config changed ("+what+"); the restart that applies it waits: "+why)
}

// Refused implements configwatch.Handler. Config errors name file, line
// and field, never a value.
func (r *configReload) Refused(err error) {
	r.log.Error(err, "The changed cloud-config is refused; running on the config the process started with (a restart would fail: fix or revert the file)")
	r.event(v1.EventTypeWarning, "CloudConfigRefused", "The changed cloud-config is refused; running on the config the process started with (a restart would fail: fix or revert the file): "+err.Error())
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
