package inventory

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound means every vCenter in scope answered and none has the VM.
// It is the only error that may lead to a Node being deleted.
var ErrNotFound = errors.New("VM not found")

// ErrStale means an index has had no successful update round for longer
// than its bound (Options.StaleAfter): the vCenter may have stopped
// answering on an open connection.
var ErrStale = errors.New("inventory stale")

// UnreadableError says a vCenter holds VMs whose identity cannot be read,
// so it cannot prove any VM absent: one of them may be the VM looked for.
type UnreadableError struct {
	VCenter string
	VMs     []UnreadableVM
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("vCenter %q holds %d VMs whose identity cannot be read: %s; any of them may be the VM looked for (restore access to their datastores or hosts, or remove them from the inventory)",
		e.VCenter, len(e.VMs), firstOf(e.VMs, func(vm UnreadableVM) string {
			n := vm.Name
			if n == "" {
				n = vm.Ref
			}
			return fmt.Sprintf("%s (%s)", n, vm.Reason)
		}))
}

// firstOf names the first three of list, and how many more there are:
// "a, b, c and 4 more".
func firstOf[T any](list []T, name func(T) string) string {
	const show = 3
	names := make([]string, 0, show)
	for _, x := range list[:min(show, len(list))] {
		names = append(names, name(x))
	}
	if len(list) > show {
		return fmt.Sprintf("%s and %d more", strings.Join(names, ", "), len(list)-show)
	}
	return strings.Join(names, ", ")
}

// ErrAmbiguous means more than one VM matches.
var ErrAmbiguous = errors.New("ambiguous VM")

// NotFoundError is ErrNotFound with what was searched and where.
type NotFoundError struct {
	Key      string // for example `BIOS UUID "4201..."`
	VCenters []string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no VM with %s in vCenters %s (every one answered); check the VM exists in a configured datacenter, or set the Node's providerID/systemUUID correctly",
		e.Key, strings.Join(e.VCenters, ", "))
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// AmbiguousError lists every VM that matched.
type AmbiguousError struct {
	Key        string
	Candidates []VM
}

func (e *AmbiguousError) Error() string {
	locs := make([]string, len(e.Candidates))
	for i, vm := range e.Candidates {
		locs[i] = vm.Location()
	}
	return fmt.Sprintf("%d VMs match %s: %s; make it unique (remove or rename the duplicate, or limit the datacenters in the config), or set the Node's providerID",
		len(e.Candidates), e.Key, strings.Join(locs, "; "))
}

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// IncompleteError means the answer cannot be trusted: no VM matched among
// the vCenters that answered but some could not be asked (the VM may be
// there), or the VM is known only from a vCenter that cannot be asked now
// (its state may have changed).
type IncompleteError struct {
	Key    string
	Causes []error
}

func (e *IncompleteError) Error() string {
	msgs := make([]string, len(e.Causes))
	for i, c := range e.Causes {
		msgs[i] = c.Error()
	}
	return fmt.Sprintf("cannot tell whether a VM with %s exists: %s", e.Key, strings.Join(msgs, "; "))
}

// Unwrap returns the causes.
func (e *IncompleteError) Unwrap() []error { return e.Causes }
