package inventory

import (
	"context"
	"fmt"
	"iter"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/vcenter"
)

// Client is the part of *vcenter.Client the inventory uses.
type Client interface {
	Name() string
	Config() config.VCenter
	Health() vcenter.Health
	HealthChanged() <-chan struct{}
	Do(ctx context.Context, fn func(context.Context, *vcenter.Session) error) error
}

// Index is the inventory of one vCenter: the identity (BIOS UUID, name,
// guest host name) of every VM in scope, the details of the VMs lookups
// asked for (the Nodes; or of every VM, for tools), and the hosts,
// clusters, folders, datacenters and pools above them.
//
// Its state is three parts, each with its own lock, never two held at
// once: the data (store), how current it is (syncStatus), and which VMs'
// details are followed (interest). The sync loop (Run) is their only
// writer but for the details read directly (detail) and the VMs lookups
// ask for.
type Index struct {
	client        Client
	log           klog.Logger
	clock         clock.Clock
	staleAfter    time.Duration // see Options.StaleAfter
	searchTimeout time.Duration // see Options.SearchTimeout
	pageTimeout   time.Duration // see Options.PageTimeout
	reader        *batchReader  // direct reads of details
	allDetails    bool
	clusterGroups bool          // follow clusters' DRS groups and rules
	hostnames     bool          // follow every VM's guest host name
	guestIPs      bool          // follow every VM's guest addresses
	keyProp       string        // the kubelet key fingerprint's property, followed for every VM ("" none)
	nameProp      string        // the provisioner's Node name property, followed for every VM ("" none)
	attributes    bool          // follow the details' custom attribute values
	eagerMax      int           // keep every VM's details when the vCenter has at most this many
	followEvery   time.Duration // see Options.FollowInterval

	store    *store
	status   *syncStatus
	interest *interest
	privs    privileges // the last check of the user's privileges
	// siblings are the indexes of the inventory, this one included: set
	// once by New, read only after (see sharedElsewhere).
	siblings []*Index

	// scopeNames are the names of the configured datacenters as vCenter
	// resolved them (a datacenter may be configured by name, inventory path
	// or managed object ID: datacenter-21); nil until the first scope.
	scopeNames atomic.Pointer[[]string]
	// scopeRoots are the roots of the views (the configured datacenters,
	// or the root folder) at the last sync start; nil until the first.
	scopeRoots atomic.Pointer[[]types.ManagedObjectReference]
	// holders are the snapshots of address holders (AddressHolders).
	holders holdersCache
}

// DatacenterNames are the names of the datacenters in scope: the
// configured ones as vCenter resolved them at the last sync start, or,
// before any, the last element of each configured path (a managed object
// ID stays as it is until resolved). Empty: every datacenter.
func (ix *Index) DatacenterNames() []string {
	if n := ix.scopeNames.Load(); n != nil {
		return *n
	}
	var out []string
	for _, d := range ix.client.Config().Datacenters {
		out = append(out, path.Base(d))
	}
	return out
}

// NewIndex returns an empty index for one vCenter; Run fills it. With
// opts.AllDetails it keeps every VM's details (tools that list every VM);
// otherwise those of every VM while the vCenter has at most
// opts.EagerDetailsMax, and beyond that only those of the VMs lookups ask
// for. Options are used as given (New applies the defaults).
func NewIndex(c Client, opts Options) *Index {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	searchTimeout := opts.SearchTimeout
	if searchTimeout <= 0 {
		searchTimeout = defaultSearchTimeout
	}
	pageTimeout := opts.PageTimeout
	if pageTimeout <= 0 {
		pageTimeout = defaultPageTimeout
	}
	ix := &Index{client: c, log: klog.Background(), clock: clk, staleAfter: opts.StaleAfter,
		searchTimeout: searchTimeout, pageTimeout: pageTimeout, allDetails: opts.AllDetails, eagerMax: opts.EagerDetailsMax, followEvery: opts.FollowInterval,
		clusterGroups: opts.ClusterGroups, hostnames: opts.GuestHostnames, guestIPs: opts.GuestIPs, attributes: opts.CustomAttributes,
		keyProp: keyProperty(opts.KubeletKeyProperty), nameProp: keyProperty(opts.NodeNameProperty),
		store: newStore(), status: &syncStatus{clock: clk}, interest: newInterest(opts.AllDetails)}
	delayed, ok := clk.(clock.WithDelayedExecution)
	window := opts.PrefetchInterval
	if !ok {
		delayed, window = clock.RealClock{}, 0 // a clock without timers: reads ahead are not paced
	}
	ix.reader = newBatchReader(ix.readAndKeep, searchTimeout, max(window, 0), delayed)
	return ix
}

// specOptions says what the index's collectors and direct reads read.
func (ix *Index) specOptions() specOptions {
	return specOptions{allDetails: ix.allDetails, hostnames: ix.hostnames, guestIPs: ix.guestIPs, clusterGroups: ix.clusterGroups, customAttributes: ix.attributes,
		kubeletKey: ix.keyProp, nodeName: ix.nameProp}
}

// VCenter is the name of the vCenter.
func (ix *Index) VCenter() string { return ix.client.Name() }

// Status says whether the index is current, so that a miss in it may
// count as "absent": it has completed a full read, is not re-reading
// after a new session, the last update round succeeded less than
// StaleAfter ago (a connection that went silent is noticed by that bound,
// not by the request timeout), and the vCenter is not down. The error
// explains why not. (Proving a VM absent needs more: see AbsenceError.)
func (ix *Index) Status() (complete bool, syncedAt time.Time, err error) {
	st := ix.status.snapshot()
	synced, resyncing, serr, at := st.synced, st.resyncing, st.err, st.at
	h := ix.client.Health()
	switch {
	case h.State == vcenter.Down:
		vc := ix.client.Config()
		return false, at, &vcenter.UnavailableError{VCenter: vc.Name, Address: vc.Address(), Since: h.Since, Cause: h.LastError}
	case !synced && ix.pagesArriving():
		// Before the failure below: the read began on a new collector
		// since (a failed page ends "arriving").
		return false, at, fmt.Errorf("vCenter %q: inventory being read for the first time (%d VMs so far); a VM not among them is looked up again as more arrive", ix.VCenter(), ix.pagesLen())
	case !synced && serr != nil:
		return false, at, fmt.Errorf("vCenter %q: inventory not synced yet (the last attempt failed: %w)", ix.VCenter(), serr)
	case !synced:
		return false, at, fmt.Errorf("vCenter %q: inventory not synced yet", ix.VCenter())
	case serr != nil:
		return false, at, fmt.Errorf("vCenter %q: inventory not current: %w", ix.VCenter(), serr)
	case resyncing:
		return false, at, fmt.Errorf("vCenter %q: inventory being read again after a new session; absence cannot be proven until it completes", ix.VCenter())
	}
	if age := ix.clock.Since(at); ix.staleAfter > 0 && age > ix.staleAfter {
		return false, at, fmt.Errorf("vCenter %q: inventory not current: no update round completed for %v (bound %v); the vCenter may have stopped answering: %w",
			ix.VCenter(), age.Truncate(time.Second), ix.staleAfter, ErrStale)
	}
	return true, at, nil
}

// answers reports whether a VM found in the index may be returned: the
// index has been read once and the vCenter is not down. (Absence needs
// more: see Status.)
func (ix *Index) answers() bool {
	return ix.HasSynced() && ix.client.Health().State != vcenter.Down
}

// ObjectsKnown reports whether the index knows the hosts, clusters,
// folders, datacenters and pools: its first full read has completed, or
// these were read ahead of its VMs less than StaleAfter ago (a snapshot,
// not followed: a first read that keeps failing must not place VMs with
// it for long; every new collector reads it again). A VM found while only
// these are known (by a direct search) can be placed: its zone and
// datacenter resolved.
func (ix *Index) ObjectsKnown() bool {
	return ix.status.objectsKnown(ix.staleAfter)
}

// searchable reports whether a miss in the index is worth a direct search:
// the vCenter is not down, and the index has been read once or is in its
// first read with its objects known (a VM found can be placed). An index
// never read asks nothing: a vCenter that never answered would otherwise
// cost one request per Node and per retry.
func (ix *Index) searchable() bool {
	return ix.ObjectsKnown() && ix.client.Health().State != vcenter.Down
}

// Synced returns a channel closed when the index next becomes current:
// a full read completes, or updates resume after a failure.
func (ix *Index) Synced() <-chan struct{} {
	return ix.status.current.C()
}

// HasSynced reports whether a full read has completed once.
func (ix *Index) HasSynced() bool {
	return ix.status.hasSynced()
}

// WaitSynced waits until the index has completed a full read once, or
// ctx ends.
func (ix *Index) WaitSynced(ctx context.Context) error {
	for {
		ch := ix.Synced()
		if ix.HasSynced() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("inventory of vCenter %q not synced: %w", ix.VCenter(), ctx.Err())
		}
	}
}

// Changed returns a channel closed at the next change of the index: VM
// details (host, power, guest), identities, clusters and their groups, or
// a full read; then replaced. Consumers that follow placements (the
// node-topology controller) wait on it instead of polling.
func (ix *Index) Changed() <-chan struct{} {
	return ix.store.changed.C()
}

// FullReads is the number of full reads completed: one at start, one
// after every new session or lost collector.
func (ix *Index) FullReads() uint64 {
	return ix.status.fullReadCount()
}

// pagesLen is the number of VMs the first read's pages hold so far.
func (ix *Index) pagesLen() (n int) {
	ix.store.readPages(func(d *data) {
		if d != nil {
			n = len(d.vms)
		}
	})
	return n
}

// Len is the number of VMs known (templates included).
func (ix *Index) Len() (n int) {
	ix.store.read(func(d *data) { n = len(d.vms) })
	return n
}

// VMs returns every VM whose details are kept (not templates), sorted by
// name: the VMs lookups asked for, or every VM with allDetails.
func (ix *Index) VMs() []VM {
	var out []VM
	ix.store.read(func(d *data) {
		out = make([]VM, 0, len(d.details))
		for _, vm := range d.details {
			if !vm.Template {
				out = append(out, d.complete(ix.VCenter(), vm))
			}
		}
	})
	slices.SortFunc(out, func(a, b VM) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// VM returns a VM whose details are kept, by reference.
func (ix *Index) VM(r types.ManagedObjectReference) (out VM, found bool) {
	ix.store.read(func(d *data) {
		vm, ok := d.details[r.Value]
		if ok && !vm.Template && r.Type == "VirtualMachine" {
			out, found = d.complete(ix.VCenter(), vm), true
		}
	})
	return out, found
}

// Object returns a known host, cluster, folder, datacenter or pool.
func (ix *Index) Object(r types.ManagedObjectReference) (out Object, found bool) {
	ix.store.read(func(d *data) {
		if o, ok := d.objects[r]; ok {
			out, found = *o, true
		}
	})
	return out, found
}

// Objects returns every host, cluster, folder, datacenter and pool.
func (ix *Index) Objects() []Object {
	var out []Object
	ix.store.read(func(d *data) {
		out = make([]Object, 0, len(d.objects))
		for _, o := range d.objects {
			out = append(out, *o)
		}
	})
	return out
}

// Refs returns the reference of every object and of every VM whose
// details are kept (not templates), unordered: what tags are read for.
func (ix *Index) Refs() []types.ManagedObjectReference {
	var out []types.ManagedObjectReference
	ix.store.read(func(d *data) {
		out = make([]types.ManagedObjectReference, 0, len(d.objects)+len(d.details))
		for r := range d.objects {
			out = append(out, r)
		}
		for _, vm := range d.details {
			if !vm.Template {
				out = append(out, vm.Ref)
			}
		}
	})
	return out
}

// match is one VM a lookup found in an index; vm holds only its identity
// until its details are read (see detail). paged: found in the pages of
// the index's first full read, not in its data (see fetchPaged).
type match struct {
	ix       *Index
	ref      string
	vm       VM
	detailed bool
	paged    bool
}

// lookupKey is what a lookup searches by: a BIOS UUID (and its
// byte-swapped form when that differs), a VM name or a guest host name
// (lower case). A value, not a slice: a lookup allocates nothing for it.
type lookupKey struct {
	uuid, swapped uuidKey // zero: none
	name, host    string
}

// lookup is the key of a lookup by k: k, and its byte-swapped form if
// different (a lookup matches both).
func (k uuidKey) lookup() lookupKey {
	lk := lookupKey{uuid: k}
	if sw := k.swap(); sw != k {
		lk.swapped = sw
	}
	return lk
}

// vms are the idents of d with key k that are VMs, not templates: what
// a lookup finds, and what Peek says it would find (one filter for both).
func (k lookupKey) vms(d *data) []*ident {
	return slices.DeleteFunc(k.idents(d), func(id *ident) bool { return id.template })
}

// idents are the idents of d with key k, templates included, in a new
// slice.
func (k lookupKey) idents(d *data) []*ident { return slices.Collect(k.each(d)) }

// each yields the idents of d with key k, templates included, without
// allocating.
func (k lookupKey) each(d *data) iter.Seq[*ident] {
	return func(yield func(*ident) bool) {
		for _, u := range [2]uuidKey{k.uuid, k.swapped} {
			if u != (uuidKey{}) && !d.byUUID.visit(u, yield) {
				return
			}
		}
		if k.name != "" && !d.byName.visit(k.name, yield) {
			return
		}
		if k.host != "" {
			d.byHost.visit(k.host, yield)
		}
	}
}

// lookup appends the VMs (not templates) with key k to out. While the index is
// being read, k is remembered: the VMs it finds when the read completes
// are asked for in one batch, so Nodes waiting for a vCenter's first read
// get their details with one request, not one each. Before the first
// read completes, the pages it has read so far are searched too.
func (ix *Index) lookup(k lookupKey, out []match) []match {
	ix.interest.remember(k)
	first := len(out)
	ix.store.read(func(d *data) {
		out = ix.matches(d, k, out, false)
	})
	if len(out) > first || ix.HasSynced() {
		return out
	}
	ix.store.readPages(func(d *data) {
		if d != nil {
			out = ix.matches(d, k, out, true)
		}
	})
	return out
}

// matches appends the VMs (not templates) of d with key k to out. A
// lookup runs it in every index (thousands of times a second when the
// framework's loops pass over thousands of Nodes): no allocation on a
// miss.
func (ix *Index) matches(d *data, k lookupKey, out []match, paged bool) []match {
	first := len(out)
	for id := range k.each(d) {
		if id.template || slices.ContainsFunc(out[first:], func(m match) bool { return m.ref == id.ref }) {
			continue
		}
		m := match{ix: ix, ref: id.ref, paged: paged}
		if vm, ok := d.details[id.ref]; !paged && ok {
			m.vm, m.detailed = d.complete(ix.VCenter(), vm), true
		} else {
			m.vm = VM{VCenter: ix.VCenter(), Ref: types.ManagedObjectReference{Type: "VirtualMachine", Value: id.ref},
				Name: id.name, UUID: id.uuidString(), GuestHostname: id.host}
		}
		out = append(out, m)
	}
	return out
}

// pagesAnswer reports whether a VM found in the pages of the first read
// may be returned: the vCenter is up and the objects that place it are
// known. Its details are then read directly (fetchPaged), so what is
// returned is the vCenter's word of now, not the page's.
func (ix *Index) pagesAnswer() bool { return ix.searchable() }

// searchedOnMiss reports whether a miss in the index, when it is not
// current, is searched for directly without a budget: it is searchable
// and not in a first read whose pages are arriving. find decides with it,
// and Peek, which must agree with find, too.
func (ix *Index) searchedOnMiss() bool { return ix.searchable() && !ix.pagesArriving() }

// pagesArriving reports whether the index's first full read is under way
// and has not failed since its last page (nor gone PageTimeout without
// one): a miss in its pages then waits for the next ones, which the
// lookup's retry is woken for (Paged), instead of searching the vCenter
// directly (but within the budget).
func (ix *Index) pagesArriving() bool { return ix.status.pagesArriving(ix.pageTimeout) }

// Findable returns a channel closed when VMs next become findable after
// the first full read, then replaced: VMs (not templates) that entered the
// scope (created, moved or registered into it) or gained a BIOS UUID, a
// name or a guest host name, and templates made VMs (see findKeys.gained).
// A Node whose VM was found nowhere may find it now. Becoming findable is
// no change of the index's identities (Changed) unless the VM shares its
// BIOS UUID with another VM, in this vCenter or another: a new VM is not
// a Node's VM until a lookup asks for it. Its details are a change where they are followed (every
// VM's, in a vCenter of at most EagerDetailsMax VMs, or a Node's).
func (ix *Index) Findable() <-chan struct{} { return ix.store.findable.C() }

// Paged returns a channel closed after the next page of the index's
// first full read, then replaced: lookups that missed may now find their
// VM.
func (ix *Index) Paged() <-chan struct{} { return ix.store.paged.C() }

// fetchPaged reads the details of a VM found in the pages of the first
// read (one request, shared with the lookups that arrive meanwhile,
// within SearchTimeout), as a direct search's find would, and follows it
// from then on.
func (ix *Index) fetchPaged(ctx context.Context, r types.ManagedObjectReference) (VM, error) {
	ctx, cancel := context.WithTimeout(ctx, ix.searchTimeout)
	defer cancel()
	vm, ok, err := ix.fetch(ctx, r)
	switch {
	case err != nil:
		return VM{}, fmt.Errorf("vCenter %q: %w", ix.VCenter(), err)
	case !ok:
		return VM{}, fmt.Errorf("vCenter %q: VM %s, found in the first inventory read, is gone or no longer a VM in scope; absence is unproven until the read completes", ix.VCenter(), r.Value)
	}
	ix.interest.want(r.Value)
	return vm, nil
}

// detail returns the VM with its details. Those the collector keeps are
// answered at once; otherwise they are read directly (one request, shared
// with the lookups that arrive meanwhile, within SearchTimeout) and the VM
// is followed from then on: the lookup never waits for a long poll.
func (ix *Index) detail(ctx context.Context, r string) (VM, error) {
	var (
		out         VM
		have, known bool
		name        string
	)
	ix.store.read(func(d *data) {
		if vm, ok := d.details[r]; ok {
			out, have = d.complete(ix.VCenter(), vm), true
		} else if id, ok := d.vms[r]; ok {
			name, known = id.name, true
		}
	})
	switch {
	case have:
		return out, nil
	case !known:
		return VM{}, fmt.Errorf("VM %s left vCenter %q while its details were read", r, ix.VCenter())
	}
	ix.interest.want(r)

	ctx, cancel := context.WithTimeout(ctx, ix.searchTimeout)
	defer cancel()
	props, err := ix.reader.get(ctx, r)
	if err != nil {
		return VM{}, fmt.Errorf("VM %q (%s) in vCenter %q: reading its details: %w", name, r, ix.VCenter(), err)
	}
	// The read kept them (readAndKeep), or the collector's replaced them;
	// or the VM left the interest and came back while they were read:
	// kept here.
	have = false
	ix.store.write(func(d *data) bool {
		if props != nil { // nil: gone
			d.keepRead(r, props)
		}
		if vm, ok := d.details[r]; ok {
			out, have = d.complete(ix.VCenter(), vm), true
		}
		return false
	})
	if !have {
		return VM{}, fmt.Errorf("VM %s left vCenter %q while its details were read", r, ix.VCenter())
	}
	// It must be of interest still, for the collector to follow it (it
	// may have left and come back meanwhile).
	ix.interest.want(r)
	return out, nil
}

// Ancestors returns the chain of objects from r (included) up to the root,
// as far as the index knows it.
func (ix *Index) Ancestors(r types.ManagedObjectReference) []Object {
	out := make([]Object, 0, 8) // a host's: host, cluster, folders, datacenter, root: one allocation
	ix.store.read(func(d *data) {
		for range 64 {
			o, ok := d.objects[r]
			if !ok {
				return
			}
			out = append(out, *o)
			r = o.Parent
		}
	})
	return out
}
