package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudconfig "k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"
)

// ReleasedPrefix begins the holder a released lease is left with.
const ReleasedPrefix = "released-by-"

// leadership releases the leader lease when the process stops, so that a
// standby (or the restarted process) takes over in about a second instead
// of after the lease duration. The framework's leader election neither
// releases its lease nor tells its identity (the host name and a random
// suffix); it starts the controllers only under leadership, and a process
// that loses leadership exits at once. So the identity is read from the
// lease when the first controller starts: the holder then is this process.
type leadership struct {
	mu       sync.Mutex
	kube     kubernetes.Interface
	ns, name string // the lease; empty without leader election
	identity string // the holder while this process led; "" before
	started  bool   // a controller started: this process leads
}

// use sets the client and the lease, before the controller manager runs.
func (l *leadership) use(kube kubernetes.Interface, namespace, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kube, l.ns, l.name = kube, namespace, name
}

// wrap records the identity when the first controller of ctrls starts.
func (l *leadership) wrap(ctrls map[string]app.ControllerInitFuncConstructor) {
	for name, c := range ctrls {
		inner := c.Constructor
		c.Constructor = func(ic app.ControllerInitContext, cc *cloudconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			f := inner(ic, cc, cloud)
			return func(ctx context.Context, cctx genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				l.led(ctx)
				return f(ctx, cctx)
			}
		}
		ctrls[name] = c
	}
}

// led reads the lease's holder, once: this process's identity, which the
// holder must begin with (its host name).
func (l *leadership) led(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = true
	if l.identity != "" || l.kube == nil || l.name == "" {
		return
	}
	host, err := os.Hostname()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := l.kube.CoordinationV1().Leases(l.ns).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || !strings.HasPrefix(*lease.Spec.HolderIdentity, host+"_") {
		klog.FromContext(ctx).V(2).Info("Leader identity not read; the lease will expire instead of being released", "err", err)
		return
	}
	l.identity = *lease.Spec.HolderIdentity
}

// leading tells whether this process leads: the framework starts the
// controllers only under leadership, and exits when it loses it.
func (l *leadership) leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// release gives up the lease if this process still holds it: its holder
// becomes ReleasedPrefix+identity for one second (with the lease's resource
// version, so that a lease another process took meanwhile is left alone).
// The holder is not left empty: the framework's elector, which runs until
// the process exits, would take an empty lease again; it backs off from
// another holder's valid lease. Call it after the provider is closed (no
// Node can be written any more), just before exiting.
func (l *leadership) release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.identity == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := l.kube.CoordinationV1().Leases(l.ns).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read lease %s/%s: %w", l.ns, l.name, err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != l.identity {
		return nil // not ours any more
	}
	now := metav1.NewMicroTime(time.Now())
	one := int32(1)
	released := ReleasedPrefix + l.identity
	lease.Spec.HolderIdentity = &released
	lease.Spec.LeaseDurationSeconds = &one
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
	if _, err := l.kube.CoordinationV1().Leases(l.ns).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("release lease %s/%s: %w", l.ns, l.name, err)
	}
	klog.Background().Info("Released the leader lease", "lease", l.ns+"/"+l.name, "holder", l.identity)
	return nil
}
