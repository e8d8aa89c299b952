package main

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// kubeClient builds a client from a kubeconfig file; nil for "".
func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	if kubeconfig == "" {
		return nil, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(rc)
}

// startOneShot starts a provider for a one-shot command (topology explain,
// migrate preflight) and waits, within ctx, for each vCenter's first
// attempt and for the caches of those that are up; vCenters that are down
// are reported by the command, not waited for. kube, if set, reads the
// Secrets the config names. The caller closes the provider.
func startOneShot(ctx context.Context, cfg *config.Config, kube kubernetes.Interface, opts provider.Options) (*provider.Provider, error) {
	p, err := provider.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx, kube); err != nil {
		if kube == nil {
			return nil, fmt.Errorf("%w; pass --kubeconfig to read them", err)
		}
		return nil, err
	}
	if err := p.Pool().WaitFirstAttempt(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("vCenters not tried within --timeout: %w", err)
	}
	p.WaitForUsable(ctx)
	return p, nil
}
