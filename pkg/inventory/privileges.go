package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// PrivilegeRead is the privilege the CCM's user needs, propagated, on
// every object it reads: without it on a folder, the VMs under it leave
// every view and search (docs/operations.md, "What vSphere needs").
const PrivilegeRead = "System.Read"

// MissingPrivilege is a privilege the CCM's user lacks on an object.
type MissingPrivilege struct {
	Object    types.ManagedObjectReference `json:"object"`
	Name      string                       `json:"name,omitempty"`
	Privilege string                       `json:"privilege"`
}

func (m MissingPrivilege) String() string {
	return fmt.Sprintf("%s on %s %s (%s)", m.Privilege, Kind(m.Object), m.Name, m.Object.Value)
}

// Privileges is what the last check of the CCM user's privileges in a
// vCenter found.
type Privileges struct {
	// CheckedAt is when the last check ended (zero: never checked).
	CheckedAt time.Time
	// Missing lists the objects the user lacks PrivilegeRead on.
	Missing []MissingPrivilege
	// Err says why the last check could not tell (vCenter down, the check
	// itself refused); Missing is then the previous check's.
	Err error
}

// privileges holds an index's last check; its lock guards only it.
type privileges struct {
	mu   sync.Mutex
	last Privileges
}

func (p *privileges) get() Privileges {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *privileges) set(v Privileges) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = v
}

// PrivilegeError says a vCenter cannot prove a VM absent: the CCM's user
// lacks System.Read on objects under which a VM may be hidden from it.
type PrivilegeError struct {
	VCenter string
	Missing []MissingPrivilege
}

func (e *PrivilegeError) Error() string {
	return fmt.Sprintf("vCenter %q: the CCM's user lacks %s: VMs there are hidden from its views and searches, so no VM is proven absent; grant the CCM's role (System.Read, propagated) on them",
		e.VCenter, firstOf(e.Missing, MissingPrivilege.String))
}

// Privileges returns the last check of the CCM user's privileges.
func (ix *Index) Privileges() Privileges { return ix.privs.get() }

// privilegeTargets are the datacenters in scope and the folders of the
// VMs whose details are followed (Nodes' VMs), as the index knows them.
func (ix *Index) privilegeTargets() (datacenters, folders []types.ManagedObjectReference) {
	ix.store.read(func(d *data) {
		for r := range d.objects {
			if r.Type == "Datacenter" {
				datacenters = append(datacenters, r)
			}
		}
		for _, vm := range d.details {
			if !vm.Template && vm.Folder.Value != "" {
				folders = append(folders, vm.Folder)
			}
		}
	})
	return datacenters, folders
}

func sortRefs(refs []types.ManagedObjectReference) []types.ManagedObjectReference {
	slices.SortFunc(refs, func(a, b types.ManagedObjectReference) int {
		return strings.Compare(a.Type+":"+a.Value, b.Type+":"+b.Value)
	})
	return slices.Compact(refs)
}

// CheckPrivileges asks vCenter whether the CCM's user holds System.Read
// on every object under which its VMs are: each datacenter in scope, its
// VM and host folders (a VM inherits permissions from its folder and from
// its host, cluster or resource pool; read from the datacenters, so a
// folder hidden from the user is still named), and the folders of the
// VMs whose details are followed (Nodes' VMs). Three requests: the
// datacenters' folders, the current session, then AuthorizationManager
// HasPrivilegeOnEntities for that session. It records the answer
// (Privileges) and returns it. An index whose objects were never read
// cannot be checked yet (Err says so).
func (ix *Index) CheckPrivileges(ctx context.Context) Privileges {
	datacenters, folders := ix.privilegeTargets()
	if len(datacenters) == 0 {
		last := ix.privs.get()
		last.Err = fmt.Errorf("vCenter %q: the CCM user's privileges not checked: its datacenters were not read yet", ix.VCenter())
		return last
	}
	var granted []types.EntityPrivilege
	names := map[types.ManagedObjectReference]string{}
	err := ix.client.Do(ctx, func(ctx context.Context, s *vcenter.Session) error {
		var dcs []mo.Datacenter
		if err := property.DefaultCollector(s.VIM).Retrieve(ctx, datacenters, []string{"name", "vmFolder", "hostFolder"}, &dcs); err != nil {
			return fmt.Errorf("read the datacenters' folders: %w", err)
		}
		targets := append(slices.Clone(datacenters), folders...)
		for _, dc := range dcs {
			names[dc.Self] = dc.Name
			for kind, f := range map[string]types.ManagedObjectReference{"vm": dc.VmFolder, "host": dc.HostFolder} {
				if f.Value != "" {
					targets = append(targets, f)
					names[f] = dc.Name + "/" + kind
				}
			}
		}
		us, err := session.NewManager(s.VIM).UserSession(ctx)
		if err != nil {
			return err
		}
		if us == nil {
			return fmt.Errorf("no current session")
		}
		res, err := methods.HasPrivilegeOnEntities(ctx, s.VIM, &types.HasPrivilegeOnEntities{
			This: *s.VIM.ServiceContent.AuthorizationManager, Entity: sortRefs(targets), SessionId: us.Key, PrivId: []string{PrivilegeRead}})
		if err != nil {
			return err
		}
		granted = res.Returnval
		return nil
	})
	var np *types.NoPermission
	if _, ok := fault.As(err, &np); ok {
		// Refused on objects the check names (a datacenter hidden from
		// the user): those privileges are missing.
		if out := (Privileges{CheckedAt: ix.clock.Now(), Missing: ix.refused(np)}); len(out.Missing) > 0 {
			ix.privs.set(out)
			return out
		}
	}
	last := ix.privs.get()
	if err != nil {
		last.Err = fmt.Errorf("vCenter %q: check of the CCM user's privileges: %w", ix.VCenter(), err)
		ix.privs.set(last)
		return last
	}
	out := Privileges{CheckedAt: ix.clock.Now()}
	for _, e := range granted {
		for _, a := range e.PrivAvailability {
			if !a.IsGranted {
				m := MissingPrivilege{Object: e.Entity, Name: names[e.Entity], Privilege: a.PrivId}
				if o, ok := ix.Object(e.Entity); ok && m.Name == "" {
					m.Name = o.Name
				}
				out.Missing = append(out.Missing, m)
			}
		}
	}
	ix.privs.set(out)
	return out
}

// checkPrivilegesEvery checks the user's privileges once the index's
// objects are read, then every period (jittered by a tenth), each check
// within timeout, until ctx ends. A failed check is logged once per
// change of its error.
func (ix *Index) checkPrivilegesEvery(ctx context.Context, period, timeout time.Duration) {
	if err := ix.WaitSynced(ctx); err != nil {
		return // ctx ended
	}
	var lastErr string
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		p := ix.CheckPrivileges(cctx)
		switch {
		case p.Err != nil && p.Err.Error() != lastErr:
			ix.log.Info("Could not check the CCM user's privileges", "err", p.Err)
		case p.Err == nil && len(p.Missing) > 0:
			ix.log.Info("The CCM's user lacks privileges: no VM is proven absent in this vCenter", "missing", p.Missing)
		}
		lastErr = ""
		if p.Err != nil {
			lastErr = p.Err.Error()
		}
	}, period, 0.1, true)
}

// refused lists what a NoPermission fault says is missing: its object
// and privilege (before vSphere 8) or its missingPrivileges (since 7.0.3).
func (ix *Index) refused(np *types.NoPermission) []MissingPrivilege {
	var out []MissingPrivilege
	add := func(obj types.ManagedObjectReference, priv string) {
		m := MissingPrivilege{Object: obj, Privilege: priv}
		if o, ok := ix.Object(obj); ok {
			m.Name = o.Name
		}
		out = append(out, m)
	}
	if np.Object != nil && np.PrivilegeId != "" {
		add(*np.Object, np.PrivilegeId)
	}
	for _, e := range np.MissingPrivileges {
		for _, priv := range e.PrivilegeIds {
			if np.Object == nil || e.Entity != *np.Object || priv != np.PrivilegeId {
				add(e.Entity, priv)
			}
		}
	}
	return out
}
