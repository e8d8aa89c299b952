package vcsim

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Tag attaches the tag named tag of the category named category to every
// object, creating the category (single cardinality) and the tag if needed.
// The simulator does not enforce cardinality, so tests can build conflicts
// on purpose.
func (v *VCenter) Tag(ctx context.Context, category, tag string, objs ...types.ManagedObjectReference) error {
	m := tags.NewManager(v.rest)
	tagID, err := v.ensureTag(ctx, m, category, tag)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return nil
	}
	refs := make([]mo.Reference, len(objs))
	for i := range objs {
		refs[i] = objs[i]
	}
	if err := m.AttachTagToMultipleObjects(ctx, tagID, refs); err != nil {
		return fmt.Errorf("attach %s/%s: %w", category, tag, err)
	}
	return nil
}

// ensureTag returns the ID of the tag, creating it and its category
// (single cardinality) if needed, one caller at a time.
func (v *VCenter) ensureTag(ctx context.Context, m *tags.Manager, category, tag string) (string, error) {
	v.tagging.Lock()
	defer v.tagging.Unlock()
	v.mu.Lock()
	catID, ok := v.cats[category]
	v.mu.Unlock()
	if !ok {
		id, err := m.CreateCategory(ctx, &tags.Category{Name: category, Cardinality: "SINGLE"})
		if err != nil {
			return "", fmt.Errorf("create category %q: %w", category, err)
		}
		catID = id
		v.mu.Lock()
		v.cats[category] = id
		v.mu.Unlock()
	}
	key := [2]string{category, tag}
	v.mu.Lock()
	tagID, ok := v.tags[key]
	v.mu.Unlock()
	if !ok {
		id, err := m.CreateTag(ctx, &tags.Tag{Name: tag, CategoryID: catID})
		if err != nil {
			return "", fmt.Errorf("create tag %q in %q: %w", tag, category, err)
		}
		tagID = id
		v.mu.Lock()
		v.tags[key] = id
		v.mu.Unlock()
	}
	return tagID, nil
}

// Untag detaches the tag from the objects.
func (v *VCenter) Untag(ctx context.Context, category, tag string, objs ...types.ManagedObjectReference) error {
	v.mu.Lock()
	tagID, ok := v.tags[[2]string{category, tag}]
	v.mu.Unlock()
	if !ok {
		return fmt.Errorf("vcsim: no tag %s/%s", category, tag)
	}
	m := tags.NewManager(v.rest)
	for _, o := range objs {
		if err := m.DetachTag(ctx, tagID, o); err != nil {
			return err
		}
	}
	return nil
}

// The zone convention of the tests, benchmarks, soak and demo: every
// cluster is a zone, every datacenter a region, tagged in these categories;
// ZoneLabels is the config block that reads them.
const (
	ZoneCategory   = "k8s-zone"
	RegionCategory = "k8s-region"
	ZoneLabels     = "labels:\n  zone: " + ZoneCategory + "\n  region: " + RegionCategory + "\n"
)

// TagZones tags, in every vCenter, each cluster that holds a VM with zone
// "zone-<cluster>" and each datacenter that holds one with region
// "region-<datacenter>" (one request per cluster and datacenter, however
// many VMs).
func (f *Fleet) TagZones(ctx context.Context) error {
	for _, v := range f.VCenters {
		done := map[types.ManagedObjectReference]bool{}
		for _, vm := range v.VMs {
			dc := v.Datacenter(vm.Datacenter)
			if !done[vm.ClusterRef] {
				done[vm.ClusterRef] = true
				if err := v.Tag(ctx, ZoneCategory, "zone-"+vm.Cluster, vm.ClusterRef); err != nil {
					return err
				}
			}
			if !done[dc] {
				done[dc] = true
				if err := v.Tag(ctx, RegionCategory, "region-"+vm.Datacenter, dc); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// SetAttribute sets the custom attribute name (created for VMs if it does
// not exist) of obj to value, as an administrator would. The simulator
// sends no property update for it: set it before the CCM reads the VM.
func (v *VCenter) SetAttribute(ctx context.Context, obj types.ManagedObjectReference, name, value string) error {
	m, err := object.GetCustomFieldsManager(v.admin)
	if err != nil {
		return err
	}
	key, err := m.FindKey(ctx, name)
	if errors.Is(err, object.ErrKeyNameNotFound) {
		def, aerr := m.Add(ctx, name, "VirtualMachine", nil, nil)
		if aerr != nil {
			return fmt.Errorf("create custom attribute %q: %w", name, aerr)
		}
		key, err = def.Key, nil
	}
	if err != nil {
		return fmt.Errorf("custom attribute %q: %w", name, err)
	}
	return m.Set(ctx, obj, key, value)
}
