// Command vsphere-cloud-controller-manager is the Kubernetes cloud
// controller manager for VMware vSphere, and the operator's tool for its
// cloud-config (config validate, config convert).
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}
