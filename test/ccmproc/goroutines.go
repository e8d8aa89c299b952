package ccmproc

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
)

// StackGroup is a set of goroutines with the same stack (function names,
// innermost first).
type StackGroup struct {
	Count int
	Stack []string
}

// DumpGoroutines ends the process with SIGQUIT, which makes the Go runtime
// write every goroutine's stack to its log, and returns them grouped by
// stack, the largest groups first. For a test that found goroutines
// growing: the groups say which ones.
func (p *Process) DumpGoroutines() ([]StackGroup, error) {
	if p.Exited() {
		return nil, fmt.Errorf("%s: the process has ended", p)
	}
	off, err := p.log.Seek(0, 2)
	if err != nil {
		return nil, err
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	<-p.exited
	b, err := os.ReadFile(p.log.Name())
	if err != nil {
		return nil, err
	}
	return GroupStacks(string(b[min(off, int64(len(b))):])), nil
}

// GroupStacks parses a Go traceback of all goroutines ("goroutine N
// [state]:" then function and file lines) into groups of equal stacks.
func GroupStacks(dump string) []StackGroup {
	counts := map[string]int{}
	var stack []string
	inGoroutine := false
	flush := func() {
		if inGoroutine && len(stack) > 0 {
			counts[strings.Join(stack, "\n")]++
		}
		stack, inGoroutine = nil, false
	}
	for line := range strings.SplitSeq(dump, "\n") {
		switch {
		case strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(line, ":"):
			flush()
			inGoroutine = true
		case !inGoroutine || line == "":
			flush()
		case strings.HasPrefix(line, "\t"), strings.HasPrefix(line, "created by "):
			// file:line, or the creator: the functions above say enough
		default:
			fn := line
			if i := strings.LastIndex(fn, "("); i > 0 {
				fn = fn[:i]
			}
			stack = append(stack, fn)
		}
	}
	flush()
	out := make([]StackGroup, 0, len(counts))
	for s, n := range counts {
		out = append(out, StackGroup{Count: n, Stack: strings.Split(s, "\n")})
	}
	slices.SortFunc(out, func(a, b StackGroup) int {
		return cmp.Or(b.Count-a.Count, strings.Compare(strings.Join(a.Stack, ""), strings.Join(b.Stack, "")))
	})
	return out
}
