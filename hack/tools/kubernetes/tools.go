//go:build tools

// Package tools pins kube-apiserver for hack/control-plane.sh, which builds
// it from the Go module proxy (k8s.io/kubernetes cannot be go-installed).
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
