package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
)

// usage is what one CCM process used: a baseline once it has run for
// warmUp in its role, and its last sample. A replica that becomes the
// leader starts the controllers and their informers (about 100 goroutines
// more): that is not growth, so its baseline is taken again.
type usage struct {
	started              time.Time // or the time it became the leader
	leading              bool
	baseAt               time.Time
	baseGoroutines, base float64 // go_goroutines, process_resident_memory_bytes
	endGoroutines, end   float64
}

// warmUp is how long a process runs before its baseline is taken: its
// vCenters connected, inventories read, Nodes initialized.
const warmUp = 20 * time.Second

// sampleResources takes the baseline of every live process that has run
// for warmUp and has none ("baseline"), or the last sample ("end").
func (s *soak) sampleResources(phase string) {
	s.mu.Lock()
	var live []int
	for i, p := range s.ccms {
		if p != nil && !p.Exited() {
			live = append(live, i)
		}
	}
	s.mu.Unlock()
	for _, i := range live {
		p := s.ccms[i]
		u := s.procs[p]
		leading := u.leading || p.LogContains("Successfully acquired lease")
		if leading && !u.leading {
			u.leading, u.started, u.baseAt = true, time.Now(), time.Time{}
		}
		switch {
		case phase == "end":
			u.endGoroutines, u.end = p.Gauge("go_goroutines"), p.Gauge("process_resident_memory_bytes")
		case u.baseAt.IsZero() && time.Since(u.started) >= warmUp:
			g, r := p.Gauge("go_goroutines"), p.Gauge("process_resident_memory_bytes")
			if g > 0 && r > 0 {
				u.baseAt, u.baseGoroutines, u.base = time.Now(), g, r
			}
		}
	}
}

// checkResources: a process that ran through the soak has not grown its
// goroutines by more than 100 nor its resident memory by more than half
// (plus 30 MB) since its baseline.
func (s *soak) checkResources() {
	observed := false
	defer func() {
		if !observed {
			s.fail("growth of goroutines and memory not checked: the observer replica did not keep one role for %v plus a minute before the end (run the soak for at least 2 minutes)", warmUp)
		}
	}()
	for p, u := range s.procs {
		if u.baseAt.IsZero() || u.end == 0 || time.Since(u.baseAt) < time.Minute {
			continue // not long-lived enough to tell
		}
		observed = observed || p == s.ccms[observer]
		s.count(s.checks, "replica goroutine and memory growth")
		if u.endGoroutines > u.baseGoroutines+100 {
			s.fail("%s: goroutines grew from %.0f to %.0f%s", p, u.baseGoroutines, u.endGoroutines, largestStacks(p))
		}
		if u.end > 1.5*u.base+30<<20 {
			s.fail("%s: resident memory grew from %.1f MB to %.1f MB", p, u.base/(1<<20), u.end/(1<<20))
		}
		fmt.Printf("soak: %s: goroutines %.0f -> %.0f, RSS %.1f -> %.1f MB\n", p, u.baseGoroutines, u.endGoroutines, u.base/(1<<20), u.end/(1<<20))
	}
}

// largestStacks ends p with SIGQUIT and lists its most common goroutine
// stacks, so that a growth is diagnosed from the failure message alone.
func largestStacks(p *ccmproc.Process) string {
	groups, err := p.DumpGoroutines()
	if err != nil {
		return fmt.Sprintf(" (no goroutine dump: %v)", err)
	}
	var b strings.Builder
	b.WriteString("; the most common stacks:")
	for _, g := range groups[:min(len(groups), 8)] {
		fmt.Fprintf(&b, "\n    %d x %s", g.Count, strings.Join(g.Stack[:min(len(g.Stack), 6)], " <- "))
	}
	return b.String()
}
