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
//
// A full refresh (Refresh, from Run) is the only writer of a complete
// attachment map; there is one at a time (concurrent callers share it).
// Ensure reads what a lookup needs and is not there yet, and only fills
// gaps: a partial read never replaces a complete one.
type Cache struct {
	client     Client
	categories []string // names of the categories of interest

	mu        sync.RWMutex
	catalog   *catalog                                  // nil until read once
	attached  map[types.ManagedObjectReference][]string // object -> tag IDs (of interest)
	synced    bool                                      // a full refresh has completed
	refreshed time.Time
	err       error
	flight    *flight       // the full refresh under way
	first     chan struct{} // closed at the first completed full refresh
}

// catalog is the categories and tags of interest of one vCenter.
type catalog struct {
	catIDs map[string]string // category name -> ID (only those that exist)
	tags   map[string]tagInfo
}

type flight struct {
	done chan struct{}
	err  error
}

// NewCache returns an empty cache for the named categories.
func NewCache(c Client, categories []string) *Cache {
	return &Cache{client: c, categories: slices.Compact(slices.Sorted(slices.Values(categories))),
		attached: map[types.ManagedObjectReference][]string{}, first: make(chan struct{})}
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

// WaitSynced waits until a full refresh has completed once, or ctx ends.
func (c *Cache) WaitSynced(ctx context.Context) error {
	select {
	case <-c.first:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tags of vCenter %q not read: %w", c.client.Name(), ctx.Err())
	}
}

// Refresh re-reads the categories and tags of interest and the
// attachments of objs, each batch of attachments in its own request (with
// its own timeout). On failure the previous state is kept. A Refresh
// already under way is joined instead of started again.
func (c *Cache) Refresh(ctx context.Context, objs []types.ManagedObjectReference) error {
	c.mu.Lock()
	if f := c.flight; f != nil {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	c.flight = f
	c.mu.Unlock()

	cat, attached, err := c.readAll(ctx, objs)
	c.mu.Lock()
	c.flight = nil
	f.err = err
	c.err = err
	if err == nil {
		c.catalog, c.attached = cat, attached
		if !c.synced {
			close(c.first)
		}
		c.synced, c.refreshed = true, time.Now()
	}
	c.mu.Unlock()
	close(f.done)
	return err
}

func (c *Cache) readAll(ctx context.Context, objs []types.ManagedObjectReference) (*catalog, map[types.ManagedObjectReference][]string, error) {
	attached := map[types.ManagedObjectReference][]string{}
	if len(c.categories) == 0 {
		return &catalog{catIDs: map[string]string{}, tags: map[string]tagInfo{}}, attached, nil
	}
	cat, err := c.readCatalog(ctx)
	if err != nil {
		return nil, nil, err
	}
	for start := 0; start < len(objs); start += batchSize {
		batch := objs[start:min(start+batchSize, len(objs))]
		err := c.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
			return readAttachments(ctx, tags.NewManager(s.REST), batch, cat.tags, attached)
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return cat, attached, nil
}

// readCatalog reads the categories and tags of interest.
func (c *Cache) readCatalog(ctx context.Context) (*catalog, error) {
	cat := &catalog{catIDs: map[string]string{}, tags: map[string]tagInfo{}}
	err := c.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		clear(cat.catIDs)
		clear(cat.tags)
		m := tags.NewManager(s.REST)
		ids, err := m.ListCategories(ctx)
		if err != nil {
			return fmt.Errorf("list tag categories: %w", err)
		}
		for _, id := range ids {
			cc, err := m.GetCategory(ctx, id)
			if err != nil {
				return fmt.Errorf("read tag category %s: %w", id, err)
			}
			if slices.Contains(c.categories, cc.Name) {
				cat.catIDs[cc.Name] = cc.ID
			}
		}
		for name, cid := range cat.catIDs {
			tids, err := m.ListTagsForCategory(ctx, cid)
			if err != nil {
				return fmt.Errorf("list tags of category %q: %w", name, err)
			}
			for _, tid := range tids {
				t, err := m.GetTag(ctx, tid)
				if err != nil {
					return fmt.Errorf("read tag %s of category %q: %w", tid, name, err)
				}
				cat.tags[t.ID] = tagInfo{name: t.Name, category: name}
			}
		}
		return nil
	})
	return cat, err
}

// readAttachments fills attached for one batch (every obj gets an entry,
// maybe empty, so that "known, untagged" differs from "not read").
func readAttachments(ctx context.Context, m *tags.Manager, batch []types.ManagedObjectReference,
	known map[string]tagInfo, attached map[types.ManagedObjectReference][]string) error {
	refs := make([]mo.Reference, len(batch))
	for i := range batch {
		refs[i] = batch[i]
	}
	res, err := m.ListAttachedTagsOnObjects(ctx, refs)
	if err != nil {
		return fmt.Errorf("list attached tags of %d objects: %w", len(batch), err)
	}
	for _, r := range batch {
		attached[r] = nil
	}
	for _, a := range res {
		r := a.ObjectID.Reference()
		for _, id := range a.TagIDs {
			if _, ok := known[id]; ok {
				attached[r] = append(attached[r], id)
			}
		}
	}
	return nil
}

// Ensure reads what a lookup of objs needs and the cache lacks: the
// catalog if it was never read, and the attachments of objects not read
// yet (for example a VM created since the last refresh). It only fills
// gaps: entries written meanwhile by a full refresh are kept.
func (c *Cache) Ensure(ctx context.Context, objs []types.ManagedObjectReference) error {
	if len(c.categories) == 0 {
		return nil
	}
	c.mu.RLock()
	var missing []types.ManagedObjectReference
	for _, o := range objs {
		if _, ok := c.attached[o]; !ok {
			missing = append(missing, o)
		}
	}
	cat := c.catalog
	c.mu.RUnlock()
	if len(missing) == 0 {
		return nil
	}
	if cat == nil {
		var err error
		if cat, err = c.readCatalog(ctx); err != nil {
			return err
		}
		c.mu.Lock()
		if c.catalog == nil {
			c.catalog = cat
		} else {
			cat = c.catalog
		}
		c.mu.Unlock()
	}
	attached := map[types.ManagedObjectReference][]string{}
	for start := 0; start < len(missing); start += batchSize {
		batch := missing[start:min(start+batchSize, len(missing))]
		err := c.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
			return readAttachments(ctx, tags.NewManager(s.REST), batch, cat.tags, attached)
		})
		if err != nil {
			return err
		}
	}
	c.mu.Lock()
	for r, ids := range attached {
		if _, ok := c.attached[r]; !ok {
			c.attached[r] = ids
		}
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
	if c.catalog == nil {
		return nil, false
	}
	for _, id := range ids {
		if t, ok := c.catalog.tags[id]; ok && t.category == category && !slices.Contains(names, t.name) {
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
	if c.catalog == nil {
		return false
	}
	_, ok := c.catalog.catIDs[name]
	return ok
}
