package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
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

// leadership knows whether this process led, and releases the leader
// lease when it stops, so that a standby (or the restarted process) takes
// over at once instead of after the lease duration. The framework's leader
// election neither releases its lease nor tells its identity (the host
// name and a random suffix); it calls the controllers' init functions only
// under leadership, and a process that loses leadership exits at once. So
// a process that is still running and whose controllers were started holds
// the lease under an identity that begins with its host name.
type leadership struct {
	led atomic.Bool
}

// wrap marks leadership when any controller of ctrls is started.
func (l *leadership) wrap(ctrls map[string]app.ControllerInitFuncConstructor) {
	for name, c := range ctrls {
		inner := c.Constructor
		c.Constructor = func(ic app.ControllerInitContext, cc *cloudconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			f := inner(ic, cc, cloud)
			return func(ctx context.Context, cctx genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				l.led.Store(true)
				return f(ctx, cctx)
			}
		}
		ctrls[name] = c
	}
}

// release gives up the lease namespace/name if this process led and still
// holds it: as client-go's leader election releases a lease (no holder,
// one-second duration), with the lease's resource version, so that a lease
// another process took meanwhile is left alone. Call it after the provider
// is closed (no Node can be written any more) and just before exiting.
func (l *leadership) release(ctx context.Context, kube kubernetes.Interface, namespace, name string) error {
	if !l.led.Load() || kube == nil {
		return nil
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lease, err := kube.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read lease %s/%s: %w", namespace, name, err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if !strings.HasPrefix(holder, host+"_") {
		return nil // not ours (any more)
	}
	now := metav1.NewMicroTime(time.Now())
	one := int32(1)
	empty := ""
	lease.Spec.HolderIdentity = &empty
	lease.Spec.LeaseDurationSeconds = &one
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
	if _, err := kube.CoordinationV1().Leases(namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("release lease %s/%s: %w", namespace, name, err)
	}
	klog.Background().Info("Released the leader lease", "lease", namespace+"/"+name, "holder", holder)
	return nil
}
