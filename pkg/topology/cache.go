// Package topology turns vSphere tags into zone, region and other node
// labels.
//
// Per vCenter, a Cache holds the categories and tags of interest and the
// tags attached to every inventory object, refreshed on an interval with
// the batch call list-attached-tags-on-objects; resolving a VM is then a
// walk over maps. The nearest tagged object wins (see Chain).
package topology

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Client is the part of *vcenter.Client the cache uses.
type Client interface {
	Name() string
	Do(ctx context.Context, fn func(context.Context, *vcenter.Session) error) error
}

// batchSize bounds the objects per list-attached-tags-on-objects call.
const batchSize = 1000

type tagInfo struct {
	name     string
	category string // category name
}

// Cache is the tag state of one vCenter.
type Cache struct {
	client     Client
	categories []string // names of the categories of interest

	mu        sync.RWMutex
	catIDs    map[string]string // category name -> ID (only those that exist)
	tags      map[string]tagInfo
	attached  map[types.ManagedObjectReference][]string // object -> tag IDs (of interest)
	synced    bool
	refreshed time.Time
	err       error
}

// NewCache returns an empty cache for the named categories.
func NewCache(c Client, categories []string) *Cache {
	return &Cache{client: c, categories: slices.Compact(slices.Sorted(slices.Values(categories))),
		catIDs: map[string]string{}, tags: map[string]tagInfo{}, attached: map[types.ManagedObjectReference][]string{}}
}

// Run refreshes the cache every interval until ctx ends. objects returns the
// objects whose attachments to read (VMs and their ancestors).
func (c *Cache) Run(ctx context.Context, interval time.Duration, objects func() []types.ManagedObjectReference) {
	log := klog.FromContext(ctx).WithName("topology").WithValues("vcenter", c.client.Name())
	for {
		if err := c.Refresh(ctx, objects()); err != nil && ctx.Err() == nil {
			log.Error(err, "Tag refresh failed; the last known tags stay in use")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// Status reports whether the cache has been filled once, when it was last
// refreshed, and the last refresh error.
func (c *Cache) Status() (synced bool, refreshed time.Time, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.synced, c.refreshed, c.err
}

// Refresh re-reads the categories and tags of interest and the
// attachments of objs. On failure the previous state is kept.
func (c *Cache) Refresh(ctx context.Context, objs []types.ManagedObjectReference) error {
	if len(c.categories) == 0 {
		c.mu.Lock()
		c.synced, c.refreshed, c.err = true, time.Now(), nil
		c.mu.Unlock()
		return nil
	}
	catIDs := map[string]string{}
	tagMap := map[string]tagInfo{}
	attached := map[types.ManagedObjectReference][]string{}
	err := c.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		m := tags.NewManager(s.REST)
		ids, err := m.ListCategories(ctx)
		if err != nil {
			return fmt.Errorf("list tag categories: %w", err)
		}
		for _, id := range ids {
			cat, err := m.GetCategory(ctx, id)
			if err != nil {
				return fmt.Errorf("read tag category %s: %w", id, err)
			}
			if slices.Contains(c.categories, cat.Name) {
				catIDs[cat.Name] = cat.ID
			}
		}
		for name, cid := range catIDs {
			tids, err := m.ListTagsForCategory(ctx, cid)
			if err != nil {
				return fmt.Errorf("list tags of category %q: %w", name, err)
			}
			for _, tid := range tids {
				t, err := m.GetTag(ctx, tid)
				if err != nil {
					return fmt.Errorf("read tag %s of category %q: %w", tid, name, err)
				}
				tagMap[t.ID] = tagInfo{name: t.Name, category: name}
			}
		}
		return c.readAttachments(ctx, m, objs, tagMap, attached)
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	if err != nil {
		return err
	}
	c.catIDs, c.tags, c.attached = catIDs, tagMap, attached
	c.synced, c.refreshed = true, time.Now()
	return nil
}

// readAttachments fills attached for objs (every obj gets an entry, maybe
// empty, so that "known, untagged" differs from "not read").
func (c *Cache) readAttachments(ctx context.Context, m *tags.Manager, objs []types.ManagedObjectReference,
	known map[string]tagInfo, attached map[types.ManagedObjectReference][]string) error {
	for start := 0; start < len(objs); start += batchSize {
		batch := objs[start:min(start+batchSize, len(objs))]
		refs := make([]mo.Reference, len(batch))
		for i := range batch {
			refs[i] = batch[i]
			attached[batch[i]] = nil
		}
		res, err := m.ListAttachedTagsOnObjects(ctx, refs)
		if err != nil {
			return fmt.Errorf("list attached tags of %d objects: %w", len(batch), err)
		}
		for _, a := range res {
			r := a.ObjectID.Reference()
			for _, id := range a.TagIDs {
				if _, ok := known[id]; ok {
					attached[r] = append(attached[r], id)
				}
			}
		}
	}
	return nil
}

// Ensure reads the attachments of the objects the cache has not read yet
// (for example a VM created since the last refresh): one request at most.
func (c *Cache) Ensure(ctx context.Context, objs []types.ManagedObjectReference) error {
	c.mu.RLock()
	var missing []types.ManagedObjectReference
	for _, o := range objs {
		if _, ok := c.attached[o]; !ok {
			missing = append(missing, o)
		}
	}
	synced := c.synced
	known := c.tags
	c.mu.RUnlock()
	if len(missing) == 0 || len(c.categories) == 0 {
		return nil
	}
	if !synced {
		return c.Refresh(ctx, objs)
	}
	attached := map[types.ManagedObjectReference][]string{}
	err := c.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		return c.readAttachments(ctx, tags.NewManager(s.REST), missing, known, attached)
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	for r, ids := range attached {
		c.attached[r] = ids
	}
	c.mu.Unlock()
	return nil
}

// tagsOn returns the names of the tags of category attached to r; known is
// false if r's attachments were never read.
func (c *Cache) tagsOn(r types.ManagedObjectReference, category string) (names []string, known bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ids, known := c.attached[r]
	for _, id := range ids {
		if t, ok := c.tags[id]; ok && t.category == category && !slices.Contains(names, t.name) {
			names = append(names, t.name)
		}
	}
	slices.Sort(names)
	return names, known
}

// hasCategory reports whether the category exists in this vCenter.
func (c *Cache) hasCategory(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.catIDs[name]
	return ok
}
