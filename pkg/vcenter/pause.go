package vcenter

import (
	"context"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// Backoff is the one retry pacing of this CCM's loops (a vCenter that is
// down, a failed inventory round, a tag refresh, the provider's start):
// min doubling to max, with 10% jitter, for as long as the loop runs.
func Backoff(min, max time.Duration) *wait.Backoff {
	return &wait.Backoff{Duration: min, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: max}
}

// Pause is the wait between two rounds of a loop that follows a vCenter
// (the inventory's updates, the tag refreshes): until ctx ends, wake is
// signalled (closed: HealthChanged) or d has passed. d <= 0 waits for wake
// alone (a vCenter that is down: nothing to do until it is back); a nil
// wake never signals. The time passes on clk (the loop's injected clock).
// It returns ctx.Err().
func Pause(ctx context.Context, clk clock.Clock, d time.Duration, wake <-chan struct{}) error {
	var timeout <-chan time.Time
	if d > 0 {
		t := clk.NewTimer(d)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-timeout:
	}
	return nil
}
