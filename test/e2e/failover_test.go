//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// leaseAcquired is what the leader-election library logs on winning.
const leaseAcquired = "Successfully acquired lease"

// testLease is the lease duration of startReplicas: short, so a killed
// leader is replaced within seconds.
const testLease = 6 * time.Second

// startReplicas runs two replicas with leader election, as the shipped
// Deployment does, with a short lease.
func (h *harness) startReplicas() []*ccm {
	le := []string{"--leader-elect=true", "--leader-elect-lease-duration=" + testLease.String(),
		"--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
	return []*ccm{h.startCCM(le...), h.startCCM(le...)}
}

// TestLeaderFailover runs two replicas with leader election, as the shipped
// Deployment does. Only the leader holds vCenter sessions; after it is
// killed with SIGKILL (no lease release, no logout), the standby takes
// over and initializes a Node registered afterwards. The time is printed;
// make bench holds the target (lease duration + 10 s).
func TestLeaderFailover(t *testing.T) {
	// Not parallel: its lease is renewed within seconds: it runs alone, not beside another test's control plane.
	h := setup(t)
	replicas := h.startReplicas()
	a, b := h.fleet.VCenter("vc-a"), h.fleet.VCenter("vc-b")
	h.register(t, a.VMs[0], false)
	h.waitInitialized(t, a.VMs[0])

	leader := leaderOf(t, replicas)
	standby := replicas[0]
	if standby == leader {
		standby = replicas[1]
	}
	// The standby holds no vCenter session: each vCenter has the leader's only.
	for _, v := range h.fleet.VCenters {
		if n, err := v.CountSessions(h.ctx); err != nil || n != 1 {
			t.Errorf("%s: %d sessions of the CCM (%v), want 1: the leader's", v.Name, n, err)
		}
	}

	killed := time.Now()
	leader.Kill()
	h.register(t, b.VMs[0], false)
	h.waitInitialized(t, b.VMs[0])
	t.Logf("a Node registered after the leader was killed was initialized %.1fs later (lease duration %v)", time.Since(killed).Seconds(), testLease)
	if !strings.Contains(standby.LogText(), leaseAcquired) {
		t.Errorf("the standby did not log taking the lease")
	}
}
