#!/usr/bin/env bash
# Builds helm from the Go module proxy into a cache keyed by version and
# prints its path. A second run with the binary present costs nothing.
# TOOLS_CACHE overrides the cache root (default: <repo>/.cache/tools).
set -euo pipefail
HELM_VERSION=v3.22.0
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${TOOLS_CACHE:-$repo/.cache/tools}/helm-$HELM_VERSION/bin
if [[ ! -x $bin/helm ]]; then
	echo "building helm $HELM_VERSION (first time only) ..." >&2
	mkdir -p "$bin"
	# Installed beside, then renamed: two builds at once (parallel tests)
	# never leave a half-written helm where the other would run it.
	tmp=$(mktemp -d "$bin/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	GOBIN=$tmp CGO_ENABLED=0 go install -trimpath "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
	mv "$tmp/helm" "$bin/helm"
fi
echo "$bin/helm"
