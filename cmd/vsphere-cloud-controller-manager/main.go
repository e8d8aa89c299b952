// Command vsphere-cloud-controller-manager is the Kubernetes cloud
// controller manager for VMware vSphere, and the operator's tool for its
// cloud-config (config validate, config convert), topology (topology
// explain), migration from another vSphere CCM (migrate preflight) and
// kubelet serving certificate requests (csr explain).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
