package configrollout

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testclock "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// replica is a coordinator on a shared fake API server and clock.
func replica(kube *fake.Clientset, clk *testclock.FakeClock, pod, hash string, leading bool) *Coordinator {
	return New(kube, Options{Namespace: "kube-system", Pod: pod, Group: "cloud-controller-manager", Hash: hash,
		Started: clk.Now(), Leading: func() bool { return leading }, MinUptime: time.Minute, Jitter: 10 * time.Second,
		Clock: clk, Rand: func() float64 { return 0.5 }})
}

// TestTurn: who restarts for a change, and when.
func TestTurn(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		others func(t *testing.T, kube *fake.Clientset, clk *testclock.FakeClock) // records published before the leader asks
		later  time.Duration                                                      // the clock moved after they published
		ok     bool
		why    string
	}{
		{name: "alone", ok: true, why: "no standby: it restarts alone"},
		{name: "a standby on the old config", others: func(t *testing.T, kube *fake.Clientset, clk *testclock.FakeClock) {
			b := replica(kube, clk, "ccm-b", "old", false)
			must.OK(t, b.store.publish(ctx, b.mine()))
		}, ok: false, why: "live on another config: [ccm-b]"},
		{name: "a standby restarting", others: func(t *testing.T, kube *fake.Clientset, clk *testclock.FakeClock) {
			b := replica(kube, clk, "ccm-b", "old", false)
			b.Stopping(ctx)
		}, ok: false, why: "restarting: [ccm-b]"},
		{name: "a standby restarting for longer than the patience", others: func(t *testing.T, kube *fake.Clientset, clk *testclock.FakeClock) {
			b := replica(kube, clk, "ccm-b", "old", false)
			b.Stopping(ctx)
		}, later: DefaultPatience, ok: true, why: "no standby"},
		{name: "a standby that stopped publishing", others: func(t *testing.T, kube *fake.Clientset, clk *testclock.FakeClock) {
			b := replica(kube, clk, "ccm-b", "new", false)
			must.OK(t, b.store.publish(ctx, b.mine()))
		}, later: time.Minute, ok: true, why: "no standby"},
		{name: "a standby on the new config", others: func(t *testing.T, kube *fake.Clientset, clk *testclock.FakeClock) {
			b := replica(kube, clk, "ccm-b", "old", false)
			must.OK(t, b.store.publish(ctx, b.mine()))
			c := replica(kube, clk, "ccm-c", "new", false)
			must.OK(t, c.store.publish(ctx, c.mine()))
		}, ok: true, why: "standby ccm-c running the new config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			clk := testclock.NewFakeClock(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
			leader := replica(kube, clk, "ccm-a", "old", true)
			clk.Step(2 * time.Minute)
			if tc.others != nil {
				tc.others(t, kube, clk)
			}
			clk.Step(tc.later)
			if ok, why := leader.Mine(ctx, "new"); ok || !strings.Contains(why, "random delay") {
				t.Fatalf("first sight of the change: %v %q; want the jitter first", ok, why)
			}
			clk.Step(5 * time.Second) // half the jitter: Rand is 0.5
			ok, why := leader.Mine(ctx, "new")
			if ok != tc.ok || !strings.Contains(why, tc.why) {
				t.Errorf("%v %q; want %v %q", ok, why, tc.ok, tc.why)
			}
		})
	}
}

// TestStandbyFirst: a standby restarts once up for the minimum uptime and
// past its jitter, whatever the others run; the jitter is drawn per
// change.
func TestStandbyFirst(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	clk := testclock.NewFakeClock(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	b := replica(kube, clk, "ccm-b", "old", false)
	if ok, why := b.Mine(ctx, "new"); ok || !strings.Contains(why, "no sooner than 1m0s after it started") {
		t.Fatalf("just started: %v %q", ok, why)
	}
	clk.Step(time.Minute)
	if ok, _ := b.Mine(ctx, "new"); ok {
		t.Fatal("past the minimum uptime but not the jitter (drawn when the change was first seen)")
	}
	clk.Step(5 * time.Second)
	if ok, why := b.Mine(ctx, "new"); !ok || !strings.Contains(why, "standbys restart first") {
		t.Fatalf("%v %q", ok, why)
	}
	if ok, _ := b.Mine(ctx, "newer"); ok {
		t.Error("another change: a jitter of its own")
	}
}

// TestRecords: the replicas' records share one Lease; a record renewed
// long ago is dropped by the next writer; Stopping sticks; Run publishes
// at once and at each heartbeat.
func TestRecords(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	clk := testclock.NewFakeClock(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	a := replica(kube, clk, "ccm-a", "h1", true)
	b := replica(kube, clk, "ccm-b", "h1", false)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.Run(runCtx); close(done) }()
	waitRecord := func(pod string, renewed time.Time) {
		t.Helper()
		for {
			all, err := a.store.list(ctx)
			must.OK(t, err)
			for _, r := range all {
				if r.pod == pod && !r.Renewed.Before(renewed) {
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitRecord("ccm-a", clk.Now())
	b.Stopping(ctx)
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(DefaultHeartbeat)
	waitRecord("ccm-a", clk.Now())
	all, err := a.store.list(ctx)
	must.OK(t, err)
	if len(all) != 2 || !all[0].Leading || all[0].Stopping || !all[1].Stopping || all[1].Leading {
		t.Fatalf("records %+v", all)
	}
	// b never publishes again: dropped once older than twice the patience.
	for range 2 * int(DefaultPatience/DefaultHeartbeat) {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(DefaultHeartbeat)
	}
	waitRecord("ccm-a", clk.Now())
	all, err = a.store.list(ctx)
	must.OK(t, err)
	if len(all) != 1 || all[0].pod != "ccm-a" {
		t.Errorf("records after ccm-b went quiet: %+v", all)
	}
	cancel()
	<-done
	l, err := kube.CoordinationV1().Leases("kube-system").Get(ctx, RecordsLease("cloud-controller-manager"), metav1.GetOptions{})
	must.OK(t, err)
	if !strings.Contains(l.Annotations[RecordsAnnotation], `"hash":"h1"`) {
		t.Errorf("annotation %s", l.Annotations[RecordsAnnotation])
	}
}
