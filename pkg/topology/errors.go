package topology

import (
	"errors"
	"fmt"
	"strings"
)

// ErrTopology is wrapped by every error that a user fixes by changing tags
// or the config.
var ErrTopology = errors.New("topology")

// ConflictError is two different tags of one category on one object.
type ConflictError struct {
	VCenter, Object, Category string
	Tags                      []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("vCenter %q: %s has %d tags of category %q (%s); a category used for node labels needs exactly one tag per object: detach all but one",
		e.VCenter, e.Object, len(e.Tags), e.Category, strings.Join(e.Tags, ", "))
}

// Is makes errors.Is(err, ErrTopology) true.
func (e *ConflictError) Is(target error) bool { return target == ErrTopology }

// InvalidTagError is a tag name that cannot be a label value.
type InvalidTagError struct {
	VCenter, Object, Category, Tag, Reason string
}

func (e *InvalidTagError) Error() string {
	return fmt.Sprintf("vCenter %q: tag %q of category %q on %s is not a valid Kubernetes label value (%s): rename the tag (at most 63 characters: letters, digits, '-', '_', '.', starting and ending with a letter or digit)",
		e.VCenter, e.Tag, e.Category, e.Object, e.Reason)
}

// Is makes errors.Is(err, ErrTopology) true.
func (e *InvalidTagError) Is(target error) bool { return target == ErrTopology }

// InvalidAttributeError is a custom attribute value that cannot be a
// label value.
type InvalidAttributeError struct {
	VCenter, VM, Attribute, Value, Reason string
}

func (e *InvalidAttributeError) Error() string {
	return fmt.Sprintf("vCenter %q: custom attribute %q of VM %s is %q, which is not a valid Kubernetes label value (%s): change the value (at most 63 characters: letters, digits, '-', '_', '.', starting and ending with a letter or digit)",
		e.VCenter, e.Attribute, e.VM, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrTopology) true.
func (e *InvalidAttributeError) Is(target error) bool { return target == ErrTopology }

// MissingTagError is a configured category with no tag on the VM or any
// ancestor, or a category that does not exist in the vCenter.
type MissingTagError struct {
	VCenter, VM, Category string
	What                  string // the config field, for example labels.zone
	NoCategory            bool
	Checked               []string
}

func (e *MissingTagError) Error() string {
	if e.NoCategory {
		return fmt.Sprintf("vCenter %q has no tag category %q (%s): create it and tag the clusters or hosts, fix the name in the config, or set staticTopology for this vCenter",
			e.VCenter, e.Category, e.What)
	}
	return fmt.Sprintf("no tag of category %q (%s) on VM %s or its ancestors (checked, nearest first: %s): attach a tag of that category to its host, cluster or datacenter, or set staticTopology",
		e.Category, e.What, e.VM, strings.Join(e.Checked, ", "))
}

// Is makes errors.Is(err, ErrTopology) true.
func (e *MissingTagError) Is(target error) bool { return target == ErrTopology }

// CSIMissingError: vSphere CSI finds no tag of these categories on the
// VM's host chain and reports no topology for its Node.
type CSIMissingError struct {
	VCenter, VM string
	Categories  []string
	Checked     []string
}

func (e *CSIMissingError) Error() string {
	return fmt.Sprintf("vCenter %q: VM %s: vSphere CSI finds no tag of categories %q on the VM's host chain (%s) and fails the Node with \"nodeVM ... does not have labels for the following categories\": tag the host, its cluster or the datacenter",
		e.VCenter, e.VM, e.Categories, strings.Join(e.Checked, ", "))
}

// Is makes errors.Is(err, ErrTopology) true.
func (e *CSIMissingError) Is(target error) bool { return target == ErrTopology }

// CSIAmbiguousError: what vSphere CSI (and the reference CCM) computes for
// the VM depends on the order in which vCenter lists the tags of an object
// (two tags of one category, or tags of a category found lower and of the
// last missing one on the same object).
type CSIAmbiguousError struct {
	VCenter, VM, Object, Category string
	Candidates                    []string
}

func (e *CSIAmbiguousError) Error() string {
	return fmt.Sprintf("vCenter %q: VM %s: category %s is %s depending on the order in which vCenter lists the tags of %s (the reference CCM and vSphere CSI take whichever they meet last): keep one tag of the category per object, and tag zone and region at different levels or on the same object only",
		e.VCenter, e.VM, e.Category, orList(e.Candidates), e.Object)
}

// Is makes errors.Is(err, ErrTopology) true.
func (e *CSIAmbiguousError) Is(target error) bool { return target == ErrTopology }

func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
