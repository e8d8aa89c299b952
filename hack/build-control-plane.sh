#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-scheduler and kube-controller-manager
# from the Go module proxy (k8s.io/kubernetes
# cannot be `go install`ed: its go.mod has replace directives), reproducibly
# from the pinned modules under hack/tools/, into a cache keyed by version.
# A second run with the binaries present costs nothing.
#
#   hack/build-control-plane.sh          # prints the bin directory
#
# TOOLS_CACHE overrides the cache root (default: <repo>/.cache/tools).
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${TOOLS_CACHE:-$repo/.cache/tools}
bin=$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION/bin
mkdir -p "$bin"

build() { # name module-dir package ldflags
	local name=$1 dir=$2 pkg=$3 ldflags=$4
	if [[ -x $bin/$name ]]; then
		return
	fi
	echo "building $name (first time only, a few minutes) ..." >&2
	local start=$SECONDS
	(cd "$dir" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
	mv "$bin/$name.tmp" "$bin/$name"
	echo "built $name in $((SECONDS - start))s" >&2
}

build etcd "$repo/hack/tools/etcd" go.etcd.io/etcd/server/v3 "-s -w"
v="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
v="$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
build kube-apiserver "$repo/hack/tools/kubernetes" k8s.io/kubernetes/cmd/kube-apiserver "-s -w $v"
build kube-scheduler "$repo/hack/tools/kubernetes" k8s.io/kubernetes/cmd/kube-scheduler "-s -w $v"
build kube-controller-manager "$repo/hack/tools/kubernetes" k8s.io/kubernetes/cmd/kube-controller-manager "-s -w $v"
echo "$bin"
