package provider

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// TestReasonWhileStarting: a lookup that fails only because vCenters have
// not been connected to yet (a CCM starting) puts no VCenterUnreachable
// event on the Node; one vCenter actually unreachable among them does.
func TestReasonWhileStarting(t *testing.T) {
	starting := func(vc string) error {
		return fmt.Errorf("vCenter %q: inventory not synced yet (the last attempt failed: %w)", vc,
			&vcenter.UnavailableError{VCenter: vc, Address: vc + ":443", Cause: vcenter.ErrNotConnectedYet})
	}
	refused := &vcenter.UnavailableError{VCenter: "vc-b", Address: "vc-b:443", Cause: fmt.Errorf("dial: %w", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"every vCenter starting", &inventory.IncompleteError{Key: "k", Causes: []error{starting("vc-a"), starting("vc-b")}}, ""},
		{"one starting, wrapped", fmt.Errorf("node n: %w", &inventory.IncompleteError{Key: "k", Causes: []error{starting("vc-a")}}), ""},
		{"one refused", &inventory.IncompleteError{Key: "k", Causes: []error{refused}}, ReasonVCenterUnreachable},
		{"starting and refused", &inventory.IncompleteError{Key: "k", Causes: []error{starting("vc-a"), refused}}, ReasonVCenterUnreachable},
		{"the sentinel alone", fmt.Errorf("x: %w", vcenter.ErrUnavailable), ReasonVCenterUnreachable},
		{"first read under way", &inventory.IncompleteError{Key: "k", Causes: []error{errors.New("vCenter \"vc-a\": inventory being read for the first time (10 VMs so far)")}}, ""},
	} {
		if got := reason(tc.err, true); got != tc.want {
			t.Errorf("%s: reason = %q, want %q", tc.name, got, tc.want)
		}
	}
}
