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

func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
