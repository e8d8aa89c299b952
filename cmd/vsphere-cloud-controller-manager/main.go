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
	"runtime/debug"
	"syscall"
)

// defaultGCPercent is the garbage collector's target when GOGC is not set:
// the heap may grow to 1.5 times the live data instead of Go's default 2
// times. The CCM is idle most of the time, so the extra collections cost
// little; its resident memory with a 40,000-VM vCenter drops by megabytes
// (docs/performance.md). Set GOGC to override.
const defaultGCPercent = 50

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
