package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// AbsenceError returns nil when a miss in this index proves a VM absent
// from the vCenter: the index is current (Status), every VM in it has a
// readable identity, and the last privilege check found the CCM's user
// missing System.Read on none of the objects under which its VMs are
// (a *PrivilegeError: VMs there are hidden from views and searches).
// Otherwise it says why not.
func (ix *Index) AbsenceError() error {
	if ok, _, err := ix.Status(); !ok {
		return err
	}
	if u := ix.Unreadable(); len(u) > 0 {
		return &UnreadableError{VCenter: ix.VCenter(), VMs: u}
	}
	if m := ix.Privileges().Missing; len(m) > 0 {
		return &PrivilegeError{VCenter: ix.VCenter(), Missing: m}
	}
	return nil
}

// UnreadableVM is a VM whose identity cannot be read: it may be any
// Node's VM.
type UnreadableVM struct {
	Ref    string `json:"ref"`
	Name   string `json:"name,omitempty"`
	Reason string `json:"reason"`
}

// Unreadable lists the VMs whose identity cannot be read (no BIOS UUID,
// or a connection state of inaccessible, orphaned or invalid), sorted by
// reference.
func (ix *Index) Unreadable() []UnreadableVM {
	var out []UnreadableVM
	ix.store.read(func(d *data) {
		out = make([]UnreadableVM, 0, len(d.unreadable))
		for r, id := range d.unreadable {
			out = append(out, UnreadableVM{Ref: r, Name: id.name, Reason: id.unreadable()})
		}
	})
	slices.SortFunc(out, func(a, b UnreadableVM) int { return strings.Compare(a.Ref, b.Ref) })
	return out
}

// ConfirmAbsent asks every vCenter directly, each within SearchTimeout, whether
// a VM with this BIOS UUID (either byte order) exists in any of its
// datacenters, configured or not, templates included: the live check
// that backs an index's "absent" before a Node is deleted. It returns nil
// only when every vCenter answered and none has it; a vCenter that has it
// is an *ExistsError; one that could not answer (down, silent, no
// permission) is its error. The vCenters are asked in parallel.
func (inv *Inventory) ConfirmAbsent(ctx context.Context, uuid string) error {
	lk, err := uuidLookup(uuid)
	if err != nil {
		return err
	}
	keys := lk.uuidStrings()
	errs := make([]error, len(inv.indexes))
	var wg sync.WaitGroup
	for i, ix := range inv.indexes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, inv.opts.SearchTimeout)
			defer cancel()
			if err := ix.confirmAbsent(ctx, keys); err != nil {
				errs[i] = fmt.Errorf("vCenter %q: live check by BIOS UUID: %w", ix.VCenter(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ExistsError: a live check found a VM with the UUID.
type ExistsError struct {
	UUID string
	Ref  string
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("VM %s with BIOS UUID %s exists (the index did not show it; it may be outside the configured datacenters, a template, or just created)", e.Ref, e.UUID)
}

func (ix *Index) confirmAbsent(ctx context.Context, uuids []string) error {
	return ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		si := object.NewSearchIndex(s.VIM)
		for _, u := range uuids {
			r, err := si.FindByUuid(ctx, nil, u, true, types.NewBool(false))
			if err != nil {
				return err
			}
			if r != nil {
				return &ExistsError{UUID: u, Ref: r.Reference().Value}
			}
		}
		return nil
	})
}
