#!/usr/bin/env bash
# Puts promtool (for `promtool test rules`) into a cache and prints its path.
# First choice: the promtool of Debian's prometheus package, extracted with
# dpkg-deb (nothing is installed, no daemon starts). Fallback, or with
# PROMTOOL_FROM=source: built from the Go module proxy with the pinned
# module in hack/tools/promtool (about 6 minutes on 2 cores). A second run
# with the binary present costs nothing. TOOLS_CACHE overrides the cache
# root (default: <repo>/.cache/tools).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${TOOLS_CACHE:-$repo/.cache/tools}
from=${PROMTOOL_FROM:-debian}

debian() {
	local bin=$cache/promtool-debian/bin tmp
	if [[ ! -x $bin/promtool ]]; then
		command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || return 1
		echo "fetching Debian's prometheus package for promtool (first time only) ..." >&2
		tmp=$(mktemp -d)
		# apt-get download runs as _apt when it can: let it write there.
		chmod 777 "$tmp"
		if ! (cd "$tmp" && apt-get download -q prometheus >&2); then
			apt-get update -qq >&2 || true
			(cd "$tmp" && apt-get download -q prometheus >&2) || { rm -rf "$tmp"; return 1; }
		fi
		dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
		mkdir -p "$bin"
		cp "$tmp/x/usr/bin/promtool" "$bin/promtool"
		rm -rf "$tmp"
	fi
	echo "$bin/promtool"
}

source_build() {
	local version bin
	version=$(awk '$1 == "require" && $2 == "github.com/prometheus/prometheus" {print $3}' "$repo/hack/tools/promtool/go.mod")
	bin=$cache/promtool-$version/bin
	if [[ ! -x $bin/promtool ]]; then
		echo "building promtool $version from the module proxy (first time only) ..." >&2
		mkdir -p "$bin"
		(cd "$repo/hack/tools/promtool" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" \
			-o "$bin/promtool" github.com/prometheus/prometheus/cmd/promtool)
	fi
	echo "$bin/promtool"
}

if [[ $from == debian ]] && debian; then
	exit 0
fi
source_build
