package inventory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/wait"
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

// Run keeps the index current until ctx ends: a full read (in pages of
// at most maxObjectUpdates objects, each page its own request with its own
// timeout), then incremental updates (long polls of at most maxWait).
//
// A failed round keeps the collector and its version, so the next round
// continues where the last one stopped (a page, or the updates since the
// last version); only a new session, or a fault about the collector
// itself, starts a new full read, during which the index says it is not
// complete. While the vCenter is down the loop waits for its health to
// change instead of polling.
func (ix *Index) Run(ctx context.Context, maxWait time.Duration) {
	ix.log = klog.FromContext(ctx).WithName("inventory").WithValues("vcenter", ix.VCenter())
	var st *collector
	defer func() {
		if st != nil {
			st.close(ctx)
		}
	}()
	bo := retryBackoff()
	for ctx.Err() == nil {
		health := ix.client.HealthChanged()
		err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
			if st != nil && st.session != s {
				old := st
				st = nil
				go old.close(ctx) // best effort: the collector may be gone with its session
			}
			if st == nil {
				var err error
				if st, err = ix.newCollector(ctx, s); err != nil {
					st = nil
					return err
				}
				ix.beginFullRead()
			}
			return ix.waitOnce(ctx, st, maxWait)
		})
		if err == nil {
			bo = retryBackoff()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if st != nil && !isTransient(err) {
			old := st
			st = nil
			go old.close(ctx)
		}
		ix.mu.Lock()
		first := ix.syncErr == nil
		ix.syncErr = err
		ix.mu.Unlock()
		if first {
			ix.log.Error(err, "Inventory updates failed; lookups in this vCenter cannot say a VM is absent until they recover")
		}
		// A vCenter that is down: nothing to do until its health changes.
		// One that answered with a fault: retry after a back-off too.
		t := time.NewTimer(bo.Step())
		if errors.Is(err, vcenter.ErrUnavailable) {
			t.Stop()
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-health:
		case <-t.C:
		}
		t.Stop()
	}
}

// retryBackoff paces retries of failed update rounds on a vCenter that is
// up (a fault, not an outage): 1s doubling to 10s.
func retryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 10 * time.Second}
}

// isTransient reports whether a failed round may be retried on the same
// collector: the request did not reach the vCenter or timed out. A fault
// (for example about the collector or its version) starts over.
func isTransient(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, vcenter.ErrUnavailable) || errors.As(err, &ne)
}

// beginFullRead marks the index as being read again: until the read
// completes, its old data may still answer "present" but not "absent".
func (ix *Index) beginFullRead() {
	ix.mu.Lock()
	ix.resyncing = ix.synced
	ix.mu.Unlock()
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

// maxObjectUpdates bounds one page of the full read (a vCenter may page
// smaller: the simulator and vCenter's default is 100).
const maxObjectUpdates = 1000

// waitOnce makes one WaitForUpdatesEx call and applies what it returns.
func (ix *Index) waitOnce(ctx context.Context, st *collector, maxWait time.Duration) error {
	secs := int32(maxWait / time.Second)
	if st.version == "" {
		secs = 0 // the first call returns the full state at once
		st.staging = newData()
	}
	res, err := methods.WaitForUpdatesEx(ctx, st.session.VIM, &types.WaitForUpdatesEx{
		This: st.pc.Reference(), Version: st.version,
		Options: &types.WaitOptions{MaxWaitSeconds: &secs, MaxObjectUpdates: maxObjectUpdates},
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
		ix.resyncing = false
		ix.syncErr = nil
		ix.syncedAt = time.Now()
		n := len(ix.data.vms)
		ix.notifyLocked()
		ix.mu.Unlock()
		st.staging = nil
		ix.log.V(1).Info("Inventory synced", "vms", n)
		return nil
	}
	ix.mu.Lock()
	ix.data.apply(updates)
	ix.currentLocked()
	ix.mu.Unlock()
	return nil
}

func (ix *Index) markCurrent() {
	ix.mu.Lock()
	if ix.synced {
		ix.currentLocked()
	}
	ix.mu.Unlock()
}
