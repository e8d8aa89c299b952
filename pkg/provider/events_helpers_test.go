package provider_test

import (
	"strings"

	"k8s.io/client-go/tools/record"
)

// events drains what the fake recorder holds.
func drain(rec *record.FakeRecorder) []string {
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

func hasEvent(events []string, prefix string, words ...string) bool {
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
