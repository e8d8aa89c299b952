package topology

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/flight"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/notify"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Client is the part of *vcenter.Client the cache uses.
type Client interface {
	Name() string
	HealthChanged() <-chan struct{}
	Do(ctx context.Context, fn func(context.Context, *vcenter.Session) error) error
}

// batchSize bounds the tags per list-attached-objects-on-tags call.
const batchSize = 500

type tagInfo struct {
	name     string
	category string // category name
}

// Cache is the tag state of one vCenter.
//
// A refresh (Refresh, from Run, or Ensure before the first) reads the
// catalog and every attachment of the tags of interest; it is the only
// writer, and there is one at a time (concurrent callers share it). A
// failed or partial read never replaces a complete one.
type Cache struct {
	client     Client
	categories []string // names of the categories of interest
	clock      clock.Clock
	refreshes  *flight.Group

	mu        sync.RWMutex
	catalog   *catalog                                  // nil until read once
	attached  map[types.ManagedObjectReference][]string // tagged object -> tag IDs (of interest)
	synced    bool                                      // a full refresh has completed
	refreshed time.Time
	err       error
	flight    *flight.Flight // the full refresh under way, started by refreshes
	first     chan struct{}  // closed at the first completed full refresh
	changed   notify.Notifier
}

// catalog is the categories and tags of interest of one vCenter.
type catalog struct {
	catIDs map[string]string // category name -> ID (only those that exist)
	tags   map[string]tagInfo
}

// NewCache returns an empty cache for the named categories; clk tells its
// age and paces its refreshes (nil: the real clock).
func NewCache(c Client, categories []string, clk clock.Clock) *Cache {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Cache{client: c, categories: slices.Compact(slices.Sorted(slices.Values(categories))), clock: clk,
		attached: map[types.ManagedObjectReference][]string{}, first: make(chan struct{}), refreshes: flight.NewGroup()}
}

// Run refreshes the cache every interval until ctx ends. A failed refresh
// is retried when the vCenter's health changes (it was unavailable) or
// after a back-off of 1 s doubling up to the interval (it answered with
// an error).
func (c *Cache) Run(ctx context.Context, interval time.Duration) {
	log := klog.FromContext(ctx).WithName("topology").WithValues("vcenter", c.client.Name())
	bo := retryBackoff(interval)
	for {
		health := c.client.HealthChanged()
		err := c.Refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := interval
		if err != nil {
			if !errors.Is(err, vcenter.ErrUnavailable) {
				log.Error(err, "Tag refresh failed; the last known tags stay in use")
			}
			wait = bo.Step()
		} else {
			bo = retryBackoff(interval)
		}
		switch {
		case err == nil:
			health = nil // refreshed: only the interval counts
		case errors.Is(err, vcenter.ErrUnavailable):
			wait = 0 // nothing to do until the vCenter is back
		}
		_ = vcenter.Pause(ctx, c.clock, wait, health) // ctx's end is seen at the top
	}
}

func retryBackoff(limit time.Duration) *wait.Backoff {
	return vcenter.Backoff(time.Second, max(limit, time.Second))
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

// Refresh re-reads the categories and tags of interest and the objects
// they are attached to, each batch of tags in its own request (with its own
// timeout). On failure the previous state is kept. A Refresh already under
// way is joined instead of started again; it goes on when the caller that
// started it gives up, so that the others get its result.
func (c *Cache) Refresh(ctx context.Context) error {
	c.mu.Lock()
	if c.flight == nil {
		// Outlives a caller that gives up (each request is bounded by the
		// vCenter's request timeout); Close ends it.
		c.flight = c.refreshes.Go(ctx, 0, c.refresh)
	}
	f := c.flight
	c.mu.Unlock()
	return f.Wait(ctx)
}

// refresh is the work of a Refresh.
func (c *Cache) refresh(ctx context.Context) error {
	cat, attached, err := c.readAll(ctx)
	c.mu.Lock()
	c.flight = nil
	c.err = err
	if err == nil {
		c.catalog, c.attached = cat, attached
		if !c.synced {
			close(c.first)
		}
		c.synced, c.refreshed = true, c.clock.Now()
	}
	c.mu.Unlock()
	if err == nil {
		c.changed.Notify()
	}
	return err
}

// Close ends a refresh under way and waits for it (Run's own loop ends
// with its ctx).
func (c *Cache) Close() { c.refreshes.Close() }

// Changed returns a channel closed after the next successful refresh.
func (c *Cache) Changed() <-chan struct{} { return c.changed.C() }

func (c *Cache) readAll(ctx context.Context) (*catalog, map[types.ManagedObjectReference][]string, error) {
	attached := map[types.ManagedObjectReference][]string{}
	if len(c.categories) == 0 {
		return &catalog{catIDs: map[string]string{}, tags: map[string]tagInfo{}}, attached, nil
	}
	cat, err := c.readCatalog(ctx)
	if err != nil {
		return nil, nil, err
	}
	ids := slices.Sorted(maps.Keys(cat.tags))
	for start := 0; start < len(ids); start += batchSize {
		batch := ids[start:min(start+batchSize, len(ids))]
		err := c.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
			res, err := tags.NewManager(s.REST).ListAttachedObjectsOnTags(ctx, batch)
			if err != nil {
				return fmt.Errorf("list the objects of %d tags: %w", len(batch), err)
			}
			for _, a := range res {
				for _, o := range a.ObjectIDs {
					r := o.Reference()
					if !slices.Contains(attached[r], a.TagID) {
						attached[r] = append(attached[r], a.TagID)
					}
				}
			}
			return nil
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

// Ensure makes sure the cache has been filled once: before the first
// refresh completes, a lookup runs it (or joins the one under way).
func (c *Cache) Ensure(ctx context.Context) error {
	if len(c.categories) == 0 {
		return nil
	}
	c.mu.RLock()
	synced := c.synced
	c.mu.RUnlock()
	if synced {
		return nil
	}
	return c.Refresh(ctx)
}

// RefreshIfOlder refreshes the cache if its last refresh is older than
// age, and reports whether it did: a lookup that misses a tag asks for
// this, so a tag attached since the last refresh is seen without waiting
// for the interval, at most once per age.
func (c *Cache) RefreshIfOlder(ctx context.Context, age time.Duration) (bool, error) {
	c.mu.RLock()
	fresh := c.synced && c.clock.Since(c.refreshed) < age
	c.mu.RUnlock()
	if fresh || len(c.categories) == 0 {
		return false, nil
	}
	return true, c.Refresh(ctx)
}

// tagsOn returns the names of the tags of category attached to r; known is
// false if the attachments were never read.
func (c *Cache) tagsOn(r types.ManagedObjectReference, category string) (names []string, known bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ids, known := c.attached[r], c.synced
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
