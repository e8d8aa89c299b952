//go:build tools

// Package tools pins promtool for hack/build-promtool.sh.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
