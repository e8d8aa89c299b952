//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// secretLoads counts the CCM's "Credentials loaded from Secret" log lines:
// the sync point for "the informer has delivered the Secret".
func secretLoads(c *ccm) int { return strings.Count(c.LogText(), "Credentials loaded from Secret") }

// waitSecretLoaded changes the Secret with change and waits until the CCM
// has loaded it.
func (h *harness) waitSecretLoaded(t *testing.T, c *ccm, change func()) {
	t.Helper()
	before := secretLoads(c)
	change()
	poll.True(t, "the CCM loads the changed Secret", func() bool { return secretLoads(c) > before })
}

func (h *harness) waitSession(t *testing.T, want bool) {
	t.Helper()
	a := h.fleet.VCenter("vc-a")
	poll.NoError(t, fmt.Sprintf("vc-a sessions present=%v", want), 30*time.Second, func() error {
		got, err := a.CountSessions(h.ctx)
		if err != nil {
			return err
		}
		if (got > 0) != want {
			return fmt.Errorf("%d sessions on vc-a", got)
		}
		return nil
	})
}

// TestCredentialRotation: the password changes in the Secret and in the
// vCenter, in both orders, without a restart; the orderly order costs no
// rejected login, the other exactly one.
func TestCredentialRotation(t *testing.T) {
	t.Parallel()
	h := setup(t)
	c := h.startCCM()
	a := h.fleet.VCenter("vc-a")
	h.register(t, a.VMs[0], false)
	h.waitInitialized(t, a.VMs[0])

	h.waitSecretLoaded(t, c, func() { h.setSecret(t, secretName, a.User, "rotated-password", false) })
	a.SetPassword("rotated-password")
	n, err := a.TerminateSessions(h.ctx)
	must.OK(t, err)
	if n == 0 {
		t.Fatal("no session of the CCM on vc-a to terminate")
	}
	h.register(t, a.VMs[1], true)
	h.waitInitialized(t, a.VMs[1])
	h.waitSession(t, true)
	if failed := a.FailedLogins(); len(failed) > 0 {
		t.Errorf("%d failed logins during an orderly rotation", len(failed))
	}

	// The other order: the vCenter first. The CCM's next login is
	// rejected once; the Secret update is tried at once.
	a.SetPassword("third-password")
	_, err = a.TerminateSessions(h.ctx)
	must.OK(t, err)
	poll.NoError(t, "the stale password rejected", 30*time.Second, func() error {
		if len(a.FailedLogins()) == 0 {
			return errNotYet
		}
		return nil
	})
	h.setSecret(t, secretName, a.User, "third-password", false)
	h.waitSession(t, true)
	if failed := a.FailedLogins(); len(failed) != 1 {
		t.Errorf("%d failed logins, want exactly 1", len(failed))
	}
	if log := c.LogText(); strings.Contains(log, "rotated-password") || strings.Contains(log, "third-password") {
		t.Errorf("a rotated password appears in the CCM log %s", c.LogPath())
	}
}

// TestSecretKeyRemoved: removing vc-a's keys from the Secret revokes them
// at once: the CCM logs its vc-a sessions out and does not initialize
// vc-a's Nodes; putting them back restores vc-a without a restart.
func TestSecretKeyRemoved(t *testing.T) {
	t.Parallel()
	h := setup(t)
	c := h.startCCM()
	a := h.fleet.VCenter("vc-a")
	h.register(t, a.VMs[0], false)
	h.waitInitialized(t, a.VMs[0])
	h.waitSession(t, true)

	h.waitSecretLoaded(t, c, func() {
		s, err := h.kube.CoreV1().Secrets("kube-system").Get(h.ctx, secretName, metav1.GetOptions{})
		must.OK(t, err)
		s.Data = map[string][]byte{"unrelated": []byte("x")}
		_, err = h.kube.CoreV1().Secrets("kube-system").Update(h.ctx, s, metav1.UpdateOptions{})
		must.OK(t, err)
	})
	h.waitSession(t, false)
	h.register(t, a.VMs[1], false)
	h.waitEvent(t, a.VMs[1].Name, "VCenterUnreachable", `vc-a`, "credentials")
	h.uninitialized(t, a.VMs[1])
	if failed := a.FailedLogins(); len(failed) > 0 {
		t.Errorf("%d failed logins: the CCM tried a revoked password", len(failed))
	}

	h.setSecret(t, secretName, a.User, a.Password, false)
	h.waitInitialized(t, a.VMs[1])
}

// TestSessionExpired: a session the vCenter ended is replaced invisibly;
// a Node that needs vc-b right after is initialized.
func TestSessionExpired(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.startCCM()
	b := h.fleet.VCenter("vc-b")
	h.register(t, b.VMs[0], false)
	h.waitInitialized(t, b.VMs[0])
	n, err := b.TerminateSessions(h.ctx)
	must.OK(t, err)
	if n == 0 {
		t.Fatal("no session of the CCM on vc-b to terminate")
	}
	h.register(t, b.VMs[1], false)
	h.waitInitialized(t, b.VMs[1])
}
