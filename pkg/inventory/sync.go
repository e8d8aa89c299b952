package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// collector is the server-side state of one sync: a private property
// collector with one filter over container views of the configured
// datacenters. It belongs to one session.
type collector struct {
	session *vcenter.Session
	pc      *property.Collector
	version string
	staging *data // set during a full sync until it is complete
}

// Run keeps the index current until ctx ends: a full sync, then
// incremental updates (long polls of at most maxWait). Failures are
// recorded (Status) and retried with back-off; after a failure the next
// round starts over with a full sync, so objects deleted meanwhile vanish.
func (ix *Index) Run(ctx context.Context, maxWait time.Duration) {
	ix.log = klog.FromContext(ctx).WithName("inventory").WithValues("vcenter", ix.VCenter())
	var st *collector
	defer func() {
		if st != nil {
			st.close(ctx)
		}
	}()
	backoff := time.Second
	for ctx.Err() == nil {
		err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
			if st == nil || st.session != s {
				if st != nil && st.session == s {
					_ = st.pc.Destroy(ctx)
				}
				var err error
				if st, err = ix.newCollector(ctx, s); err != nil {
					st = nil
					return err
				}
			}
			return ix.waitOnce(ctx, st, maxWait)
		})
		if err == nil {
			backoff = time.Second
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if st != nil {
			old := st
			st = nil
			go old.close(ctx) // best effort: the collector may be gone with its session
		}
		ix.mu.Lock()
		first := ix.syncErr == nil
		ix.syncErr = err
		ix.mu.Unlock()
		if first {
			ix.log.Error(err, "Inventory updates failed; lookups in this vCenter cannot say a VM is absent until they recover")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// close ends a pending long poll on the server (the client side is
// already cancelled, but a vCenter keeps waiting until maxWait) and
// destroys the collector. Best effort, bounded.
func (st *collector) close(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = methods.CancelWaitForUpdates(cctx, st.session.VIM, &types.CancelWaitForUpdates{This: st.pc.Reference()})
	_ = st.pc.Destroy(cctx)
}

func (ix *Index) newCollector(ctx context.Context, s *vcenter.Session) (*collector, error) {
	c := s.VIM
	vc := ix.client.Config()
	var roots []types.ManagedObjectReference
	var extra []types.ManagedObjectReference // datacenters and their ancestors
	if len(vc.Datacenters) == 0 {
		roots = []types.ManagedObjectReference{c.ServiceContent.RootFolder}
	} else {
		f := find.NewFinder(c, false)
		for _, name := range vc.Datacenters {
			dc, err := f.Datacenter(ctx, name)
			if err != nil {
				var nf *find.NotFoundError
				if errors.As(err, &nf) {
					return nil, fmt.Errorf("datacenter %q (vcenter.%s.datacenters) does not exist in vCenter %q: fix the name or remove it", name, vc.Name, vc.Name)
				}
				return nil, fmt.Errorf("find datacenter %q: %w", name, err)
			}
			roots = append(roots, dc.Reference())
			r := dc.Reference()
			for r.Value != "" && r != c.ServiceContent.RootFolder {
				extra = append(extra, r)
				var e mo.ManagedEntity
				if err := property.DefaultCollector(c).RetrieveOne(ctx, r, []string{"parent"}, &e); err != nil {
					return nil, fmt.Errorf("read the parent of %s: %w", r, err)
				}
				if e.Parent == nil {
					break
				}
				r = *e.Parent
			}
			extra = append(extra, c.ServiceContent.RootFolder)
		}
	}
	pc, err := property.DefaultCollector(c).Create(ctx)
	if err != nil {
		return nil, fmt.Errorf("create property collector: %w", err)
	}
	spec := types.PropertyFilterSpec{}
	for _, root := range roots {
		kinds := append([]string{"VirtualMachine"}, objectKinds...)
		v, err := view.NewManager(c).CreateContainerView(ctx, root, kinds, true)
		if err != nil {
			_ = pc.Destroy(ctx)
			return nil, fmt.Errorf("create container view: %w", err)
		}
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{
			Obj: v.Reference(), Skip: types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{Type: "ContainerView", Path: "view"}},
		})
	}
	seen := map[types.ManagedObjectReference]bool{}
	for _, r := range extra {
		if !seen[r] {
			seen[r] = true
			spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: r})
		}
	}
	spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: "VirtualMachine", PathSet: vmProperties})
	for _, k := range objectKinds {
		spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: k, PathSet: []string{"name", "parent"}})
	}
	if _, err := pc.CreateFilter(ctx, types.CreateFilter{Spec: spec}); err != nil {
		_ = pc.Destroy(ctx)
		return nil, fmt.Errorf("create property filter: %w", err)
	}
	return &collector{session: s, pc: pc}, nil
}

// waitOnce makes one WaitForUpdatesEx call and applies what it returns.
func (ix *Index) waitOnce(ctx context.Context, st *collector, maxWait time.Duration) error {
	secs := int32(maxWait / time.Second)
	if st.version == "" {
		secs = 0 // the first call returns the full state at once
		st.staging = newData()
	}
	res, err := methods.WaitForUpdatesEx(ctx, st.session.VIM, &types.WaitForUpdatesEx{
		This: st.pc.Reference(), Version: st.version,
		Options: &types.WaitOptions{MaxWaitSeconds: &secs},
	})
	if err != nil {
		return err
	}
	set := res.Returnval
	if set == nil {
		ix.markCurrent()
		return nil // nothing changed within maxWait
	}
	st.version = set.Version
	truncated := set.Truncated != nil && *set.Truncated
	var updates []types.ObjectUpdate
	for _, fs := range set.FilterSet {
		updates = append(updates, fs.ObjectSet...)
	}
	if st.staging != nil {
		st.staging.apply(updates)
		if truncated {
			return nil
		}
		ix.mu.Lock()
		ix.data = st.staging
		ix.synced = true
		ix.syncErr = nil
		ix.syncedAt = time.Now()
		n := len(ix.data.vms)
		ix.mu.Unlock()
		st.staging = nil
		ix.log.V(1).Info("Inventory synced", "vms", n)
		return nil
	}
	ix.mu.Lock()
	ix.data.apply(updates)
	ix.syncErr = nil
	ix.syncedAt = time.Now()
	ix.mu.Unlock()
	return nil
}

func (ix *Index) markCurrent() {
	ix.mu.Lock()
	if ix.synced {
		ix.syncErr = nil
		ix.syncedAt = time.Now()
	}
	ix.mu.Unlock()
}
