#!/usr/bin/env bash
# Prints one field of the version that builds are stamped with, from git:
#
#   hack/version.sh version   # v1.2.3, v1.2.3-4-gabcdef012345, or v0.0.0-<commits>-g<hash> before the first tag; -dirty if the tree has changes
#   hack/version.sh commit    # the full commit hash
#   hack/version.sh tree      # clean or dirty
#   hack/version.sh date      # the commit's time in UTC (not the build's: same source, same binary and image)
#
# Outside a git checkout: v0.0.0-unknown, unknown, dirty, 1970-01-01T00:00:00Z.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! git rev-parse --verify -q HEAD >/dev/null 2>&1; then
	case ${1:-version} in
	version) echo v0.0.0-unknown ;;
	commit) echo unknown ;;
	tree) echo dirty ;;
	date) echo 1970-01-01T00:00:00Z ;;
	esac
	exit 0
fi
dirty=""
tree=clean
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
	dirty=-dirty
	tree=dirty
fi
case ${1:-version} in
version)
	if v=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
		echo "$v$dirty"
	else
		echo "v0.0.0-$(git rev-list --count HEAD)-g$(git rev-parse --short=12 HEAD)$dirty"
	fi
	;;
commit) git rev-parse HEAD ;;
tree) echo "$tree" ;;
date) TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD ;;
*)
	echo "usage: $0 version|commit|tree|date" >&2
	exit 2
	;;
esac
