// Package memlimit sets the garbage collector's target and soft memory
// limit from the container's memory limit (cgroup v2 or v1), unless the
// environment sets them.
package memlimit

import (
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
)

// The garbage collector's settings when the operator set none.
//
// Without a memory limit the heap may grow to 1.5 times the live data
// (GOGC=50), not Go's default 2 times: resident memory stays small
// (docs/performance.md, bigvc). Under a container memory limit (cgroup)
// the room is there to use: a soft limit at 90 % of it (GOMEMLIMIT) with
// Go's default GOGC=100, so that the collector runs half as often while
// the heap is well under the limit and more often only near it (at 100,000
// VMs the garbage collector was a fifth of the CCM's CPU at GOGC=50). The
// Go GC guide recommends this pairing; GOGC or GOMEMLIMIT set in the
// environment win.
const (
	gcPercentUnlimited = 50
	gcPercentLimited   = 100
	// limitPercent is the share of the container's limit given to Go
	// (heap, stacks and the runtime's own): the rest is for what Go does
	// not count (the binary's mapped pages are reclaimable, and measured
	// at 62 to 67 MB, docs/architecture.md).
	limitPercent = 90
)

// cgroupLimitFiles are where a container's memory limit is written:
// cgroup v2, then v1 (paths relative to /).
var cgroupLimitFiles = [...]string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"}

// Settings is what Tune decided, for the log.
type Settings struct {
	GCPercent   int    // -1: left as the environment set it
	MemoryLimit int64  // bytes; 0: left as the environment set it, or none
	Source      string // where the limit came from
}

func (s Settings) String() string {
	gc := "GOGC from the environment"
	if s.GCPercent >= 0 {
		gc = fmt.Sprintf("GOGC=%d", s.GCPercent)
	}
	switch {
	case s.MemoryLimit > 0:
		return fmt.Sprintf("%s, soft memory limit %d MiB (%d%% of %s)", gc, s.MemoryLimit>>20, limitPercent, s.Source)
	case s.Source == "GOMEMLIMIT=off":
		return gc + ", no memory limit (GOMEMLIMIT=off)"
	case s.Source != "":
		return fmt.Sprintf("%s, memory limit from %s", gc, s.Source)
	}
	return gc + ", no memory limit"
}

// Tune sets the garbage collector's target and soft memory limit when
// the environment (getenv; empty is unset, as the Go runtime reads it)
// sets neither, from the container memory limit found in root
// (os.DirFS("/"), or a test's files).
func Tune(getenv func(string) string, root fs.FS) Settings {
	s := plan(getenv, root)
	if s.GCPercent >= 0 {
		debug.SetGCPercent(s.GCPercent)
	}
	if s.MemoryLimit > 0 {
		debug.SetMemoryLimit(s.MemoryLimit)
	}
	return s
}

// plan decides what Tune sets, without setting it. GOMEMLIMIT=off is no
// limit: the cgroup's is not applied either.
func plan(getenv func(string) string, root fs.FS) Settings {
	gogcSet := strings.TrimSpace(getenv("GOGC")) != ""
	s := Settings{GCPercent: -1}
	switch strings.TrimSpace(getenv("GOMEMLIMIT")) {
	case "":
		s.MemoryLimit, s.Source = cgroupLimit(root)
	case "off":
		s.Source = "GOMEMLIMIT=off"
	default:
		s.Source = "GOMEMLIMIT"
	}
	if !gogcSet {
		s.GCPercent = gcPercentUnlimited
		if s.MemoryLimit > 0 || s.Source == "GOMEMLIMIT" {
			s.GCPercent = gcPercentLimited
		}
	}
	return s
}

// cgroupLimit returns the share of the container's memory limit given to
// Go, and the file it was read from; 0 when there is none. The first file
// that exists decides: v2's "max" is no limit, whatever v1 says.
func cgroupLimit(root fs.FS) (int64, string) {
	for _, name := range cgroupLimitFiles {
		b, err := fs.ReadFile(root, name)
		if err != nil {
			continue
		}
		if limit, ok := parseCgroupLimit(b); ok {
			return SoftLimit(limit), "/" + name
		}
		return 0, "" // the file says no limit ("max", or v1's huge number)
	}
	return 0, ""
}

// SoftLimit is the share of a container memory limit given to Go.
func SoftLimit(containerLimit int64) int64 { return containerLimit / 100 * limitPercent }

// parseCgroupLimit reads a cgroup memory limit file: a number of bytes,
// or "max" (v2) or a number near 2^63 (v1) for none. ok is false for no
// limit and for anything unreadable.
func parseCgroupLimit(b []byte) (int64, bool) {
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	// v1 writes "no limit" as the largest multiple of the page size.
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0, false
	}
	return n, true
}
