package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// perHour is a measure of each round of r scaled to an hour: the median
// and range over the rounds.
func perHour(r dayRun, f func(dayWindow) float64) spread {
	var s spread
	for _, w := range r.windows {
		s = append(s, f(w)*float64(time.Hour)/float64(w.length))
	}
	return s
}

// beyondPolls are the vSphere requests but the inventory's long polls.
func beyondPolls(w dayWindow) float64 {
	return float64(sumInt(w.methods) - w.methods["WaitForUpdatesEx"])
}

// noOpWrites are the Node writes that changed nothing, over the whole
// run per hour: a write and the change it makes can fall in two rounds,
// so a round alone can count one without the other.
func noOpWrites(r dayRun) float64 {
	var writes, changes int
	var length time.Duration
	for _, w := range r.windows {
		writes, changes, length = writes+w.nodeWrites, changes+w.nodeChanges, length+w.length
	}
	if length == 0 {
		return 0
	}
	return float64(writes-changes) * float64(time.Hour) / float64(length)
}

// rssSlope is the least-squares slope of the RSS samples, in MB per hour.
func rssSlope(r dayRun) float64 {
	n := float64(len(r.rss))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i, y := range r.rss {
		x := r.rssAt[i].Hours()
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// printDay prints the day table: one column per CCM.
func printDay(runs []dayRun, vms int, o dayOptions, mode string) {
	fmt.Printf("\nday: %d VMs in %d vCenters, %v of churn per CCM in rounds of %v (%s), seed %d; per hour, median [min, max] over rounds\n",
		vms, o.vcenters, o.duration, o.window, mode, o.seed)
	row := func(label string, f func(dayRun) string) {
		fmt.Printf("%-50s", label)
		for _, r := range runs {
			fmt.Printf(" %26s", f(r))
		}
		fmt.Println()
	}
	row("", func(r dayRun) string { return r.name })
	row("Nodes; rounds", func(r dayRun) string { return fmt.Sprintf("%d; %d", r.nodes, len(r.windows)) })
	row("initialization (every Node), s", func(r dayRun) string {
		if r.kept {
			return "kept (switched)"
		}
		if r.initialized < r.nodes {
			return fmt.Sprintf("%d of %d in %.0f: stopped", r.initialized, r.nodes, r.init.Seconds())
		}
		return fmt.Sprintf("%.1f", r.init.Seconds())
	})
	row("CPU of the CCM, s per hour", func(r dayRun) string {
		return perHour(r, func(w dayWindow) float64 { return w.cpu.Seconds() }).format("%.1f")
	})
	row("vSphere requests per hour (vCenters' count)", func(r dayRun) string {
		return perHour(r, func(w dayWindow) float64 { return float64(sumInt(w.methods)) }).format("%.0f")
	})
	row("  beyond the long polls", func(r dayRun) string { return perHour(r, beyondPolls).format("%.0f") })
	methods := map[string]int64{}
	for _, r := range runs {
		for _, w := range r.windows {
			for m, n := range w.methods {
				methods[m] += n
			}
		}
	}
	for _, m := range slices.SortedFunc(maps.Keys(methods), func(a, b string) int { return cmp.Or(cmp.Compare(methods[b], methods[a]), strings.Compare(a, b)) }) {
		row("  "+short(m, 48), func(r dayRun) string {
			return perHour(r, func(w dayWindow) float64 { return float64(w.methods[m]) }).format("%.0f")
		})
	}
	row("API server writes per hour (the CCM's)", func(r dayRun) string {
		return perHour(r, func(w dayWindow) float64 { return float64(sumInt(w.writes)) }).format("%.0f")
	})
	writes := map[string]bool{}
	for _, r := range runs {
		for _, w := range r.windows {
			for k := range w.writes {
				writes[k] = true
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(writes)) {
		row("  "+short(k, 48), func(r dayRun) string {
			return perHour(r, func(w dayWindow) float64 { return float64(w.writes[k]) }).format("%.0f")
		})
	}
	row("Node writes per hour", func(r dayRun) string {
		return perHour(r, func(w dayWindow) float64 { return float64(w.nodeWrites) }).format("%.0f")
	})
	row("  that changed nothing (the whole run)", func(r dayRun) string {
		s := fmt.Sprintf("%.0f", noOpWrites(r))
		if r.relists > 0 {
			s += fmt.Sprintf(" (%d watches lost: changes missed)", r.relists)
		}
		return s
	})
	for _, k := range []string{"address", "zone", "deleted"} {
		label := map[string]string{"address": "new guest address to Node, p50 / p99, s (n)", "zone": "vMotion across zones to the zone label, p50 / p99, s",
			"deleted": "Node VM destroyed to Node deleted, p50 / p99, s"}[k]
		row(label, func(r dayRun) string {
			if !r.measuresTrue {
				return "n/a (fixed answers)"
			}
			d := r.delays[k]
			s := fmt.Sprintf("%.1f / %.1f (%d)", quantile(d, 0.5).Seconds(), quantile(d, 0.99).Seconds(), len(d))
			if u := r.unseen[k]; u > 0 {
				s += fmt.Sprintf(" +%d never", u)
			}
			return s
		})
	}
	row("RSS at start / end, MB", func(r dayRun) string {
		if len(r.rss) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f / %.1f", r.rss[0], r.rss[len(r.rss)-1])
	})
	row("RSS slope, MB per hour", func(r dayRun) string { return fmt.Sprintf("%+.1f", rssSlope(r)) })
	row("goroutines at start / end", func(r dayRun) string { return fmt.Sprintf("%.0f / %.0f", r.goroutines[0], r.goroutines[1]) })
	fmt.Println("churn made in each CCM's run:")
	for _, r := range runs {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.done)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.done[k]))
		}
		fmt.Printf("  %s: %s\n", r.name, strings.Join(parts, ", "))
	}
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
