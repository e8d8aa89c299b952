// Package poll waits in tests for something that happens asynchronously
// (a watch delivering, a controller reconciling), failing the test with
// what was awaited when it does not happen in time.
package poll

import (
	"errors"
	"testing"
	"time"
)

// Interval is the time between two checks.
const Interval = 20 * time.Millisecond

// True waits up to 20 seconds for cond to return true.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	NoError(t, what, 20*time.Second, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

// NoError waits up to timeout for cond to return nil; the test fails with
// the last error otherwise.
func NoError(t testing.TB, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(Interval)
	}
}
