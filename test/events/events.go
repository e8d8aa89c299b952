// Package events reads what a client-go FakeRecorder recorded, for tests
// of the code that sends events on Nodes.
package events

import (
	"strings"

	"k8s.io/client-go/tools/record"
)

// Drain returns the events the fake recorder holds ("Type Reason message"),
// without waiting for more.
func Drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Has reports whether an event starts with prefix ("Warning TopologyDrift")
// and contains every word.
func Has(events []string, prefix string, words ...string) bool {
	for _, e := range events {
		if !strings.HasPrefix(e, prefix) {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(e, w)
		}
		if ok {
			return true
		}
	}
	return false
}
