//go:build tools

// Package tools pins kube-apiserver, kube-scheduler and
// kube-controller-manager for
// hack/build-control-plane.sh, which builds them from the Go module proxy
// (k8s.io/kubernetes cannot be go-installed).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
