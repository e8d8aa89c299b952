//go:build tools

// Package tools pins etcd for hack/control-plane.sh.
package tools

import _ "go.etcd.io/etcd/server/v3"
