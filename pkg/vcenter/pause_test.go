package vcenter_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

func TestPause(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		wake <-chan struct{}
		want error
	}{
		{"woken, no deadline", context.Background(), 0, closed, nil},
		{"woken before an hour", context.Background(), time.Hour, closed, nil},
		{"an hour passed on the clock, never woken", context.Background(), time.Hour, nil, nil},
		{"ctx ended, no deadline, never woken", cancelled, 0, nil, context.Canceled},
		{"ctx ended before an hour", cancelled, time.Hour, make(chan struct{}), context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The duration passes on the fake clock, stepped once Pause
			// waits on it: nothing here depends on the real time.
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			done := make(chan struct{})
			defer close(done)
			go func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					if clk.HasWaiters() {
						clk.Step(tt.d)
						return
					}
					runtime.Gosched()
				}
			}()
			if err := vcenter.Pause(tt.ctx, clk, tt.d, tt.wake); !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Errorf("Pause = %v, want %v", err, tt.want)
			}
		})
	}
}
