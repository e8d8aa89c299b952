package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Options tunes an Inventory.
type Options struct {
	// MaxWait bounds each WaitForUpdatesEx long poll (default 30s; keep it
	// below the request timeout).
	MaxWait time.Duration
	// AllDetails keeps every VM's details from the first read (tools that
	// list every VM).
	AllDetails bool
	// EagerDetailsMax: a vCenter with at most this many VMs (default
	// 5,000) has every VM's details kept, asked for in one request after
	// its first read, so lookups never wait for them. Beyond it, only the
	// VMs lookups ask for have details; the others cost only their
	// identity. Negative: never eager.
	EagerDetailsMax int
	// ClusterGroups follows every cluster's DRS host groups, VM groups and
	// VM-host rules (its configurationEx) with the rest of the inventory:
	// Object.Groups. Off unless zones come from host groups.
	ClusterGroups bool
	// GuestHostnames indexes every VM's guest host name (guest.hostName),
	// for FindByGuestHostname. Off, the name is neither read nor kept for
	// VMs without details: tens of bytes per VM in a big vCenter.
	GuestHostnames bool
	// GuestIPs follows every VM's guest addresses (guest.net), for
	// IPOwners: who else reports an address a kubelet asks a certificate
	// for. Off, only the VMs whose details are kept have them read: every
	// VM's adapters cost a few hundred bytes a VM on the wire and tens in
	// memory.
	GuestIPs bool
	// KubeletKeyProperty, if set, is the extraConfig key (a guestinfo.*
	// key) in which guests publish their kubelet's client key fingerprint:
	// it is followed for every VM, for KeyOwners. Tens of bytes per VM
	// that publishes one; nothing for the others.
	KubeletKeyProperty string
	// NodeNameProperty, if set, is the extraConfig key (set by the
	// provisioner, not a guestinfo.* key) whose value is the Node name a VM
	// may be: followed for every VM, for KeyOwner.NodeName and BoundName.
	NodeNameProperty string
	// CustomAttributes reads the custom attribute values of the VMs whose
	// details are kept, and the attributes' definitions (VM.Attributes).
	CustomAttributes bool
	// StaleAfter: an index whose last successful update round is older
	// than this is not current (Index.Status), so a vCenter that stops
	// answering on an open connection cannot prove absence for longer
	// than this. Every long poll completes a round at least every MaxWait.
	// Default: the larger of 2*MaxWait and MaxWait+5s.
	StaleAfter time.Duration
	// SearchTimeout bounds each direct request to a vCenter made by a
	// lookup (a miss in an index that is not current) and each live check
	// of ConfirmAbsent callers (default 10s): a vCenter that stopped
	// answering delays a lookup by at most this.
	SearchTimeout time.Duration
	// PageTimeout is how long a first read may go without a page and
	// without failing before a miss in its vCenter is searched as if the
	// read had failed (default 90s). Each poll fails on its own within the
	// vCenter's request timeout (the provider sets this to
	// global.requestTimeout plus 30s): this only bounds a read that stopped
	// without a failure.
	PageTimeout time.Duration
	// FollowInterval bounds how often the collector's list view of the
	// VMs whose details are followed grows (default 30s): the first VM
	// asked for is added at once, those asked for within the interval
	// after it in one change at its end (also when a long poll ends on its
	// own meanwhile). A lookup never waits for it (it reads its VM's
	// details directly); only changes to a VM first looked up within the
	// interval arrive up to that much later. Each change interrupts the
	// long poll and makes the vCenter re-evaluate the view: a registration
	// storm of thousands of Nodes costs one change per interval, not one
	// per few Nodes. In vCenters at most EagerDetailsMax, every VM of the
	// first read is added at once; VMs created later are added within the
	// interval. Negative: no bound.
	FollowInterval time.Duration
	// FirstReadSearches bounds the direct searches of vCenters whose
	// first read is under way (its pages arriving, or the first of them
	// awaited), counted per vCenter searched: this many at once (default
	// 100; negative: none), refilled at a hundredth of it per second (one
	// vCenter a second by default). A lookup that misses searches all such
	// vCenters or none (so with more of them in their first read than
	// this, none); beyond the budget it waits for the next pages
	// (Peek says when a retry is worth it). The Nodes of a small cluster
	// are found at once, while a registration storm over ten vCenters
	// costs no search per Node when the vCenters are busiest: a big
	// vCenter's first page comes only after it has computed the whole
	// view, tens of seconds at 10,000 VMs in the simulator.
	FirstReadSearches int
	// PrefetchInterval is the least time between the starts of two
	// direct reads of details made only for VMs read ahead (Prefetch: the
	// VMs of Nodes that registered, before the node controller looks them
	// up; default 250ms; negative: none). A registration storm then costs
	// one request per interval and vCenter, not one per Node or per few
	// Nodes; a Node's lookup waits at most this for its VM's details. A
	// lookup of a VM nobody read ahead never waits for it.
	PrefetchInterval time.Duration
	// PrivilegeCheckEvery is how often each vCenter is asked whether the
	// CCM's user holds System.Read on the objects it must see
	// (Index.CheckPrivileges: one request), the first time once its
	// objects are read (default 10m; negative: never).
	PrivilegeCheckEvery time.Duration
	// Clock tells the time (default: the real clock). PrefetchInterval
	// needs its AfterFunc (clock.WithDelayedExecution, as the real and the
	// fake clocks have); without, reads ahead are not paced.
	Clock clock.Clock
}

// defaultPrefetchInterval is Options.PrefetchInterval when unset.
const defaultPrefetchInterval = 250 * time.Millisecond

// defaultFollowInterval is Options.FollowInterval when unset.
const defaultFollowInterval = 30 * time.Second

// defaultFirstReadSearches is Options.FirstReadSearches when unset.
const defaultFirstReadSearches = 100

// defaultPrivilegeCheckEvery is Options.PrivilegeCheckEvery when unset.
const defaultPrivilegeCheckEvery = 10 * time.Minute

// defaultSearchTimeout is Options.SearchTimeout when unset.
const defaultSearchTimeout = 10 * time.Second

// defaultPageTimeout is Options.PageTimeout when unset: the default
// request timeout and a margin.
const defaultPageTimeout = 90 * time.Second

// Inventory is the set of per-vCenter indexes.
type Inventory struct {
	indexes []*Index
	opts    Options
	wg      sync.WaitGroup
	// searches is the budget of direct searches of vCenters whose first
	// read is making progress (Options.FirstReadSearches); nil: none.
	searches *rate.Limiter
	clock    clock.PassiveClock
}

// New returns an Inventory over the given vCenter clients; call Start.
func New(clients []Client, opts Options) *Inventory {
	if opts.MaxWait <= 0 {
		opts.MaxWait = 30 * time.Second
	}
	if opts.SearchTimeout <= 0 {
		opts.SearchTimeout = defaultSearchTimeout
	}
	if opts.PageTimeout <= 0 {
		opts.PageTimeout = defaultPageTimeout
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = max(2*opts.MaxWait, opts.MaxWait+5*time.Second)
	}
	if opts.FollowInterval == 0 {
		opts.FollowInterval = defaultFollowInterval
	}
	if opts.EagerDetailsMax == 0 {
		opts.EagerDetailsMax = 5000
	}
	if opts.FirstReadSearches == 0 {
		opts.FirstReadSearches = defaultFirstReadSearches
	}
	if opts.PrefetchInterval == 0 {
		opts.PrefetchInterval = defaultPrefetchInterval
	}
	if opts.PrivilegeCheckEvery == 0 {
		opts.PrivilegeCheckEvery = defaultPrivilegeCheckEvery
	}
	inv := &Inventory{opts: opts, clock: clock.RealClock{}}
	if opts.Clock != nil {
		inv.clock = opts.Clock
	}
	if n := opts.FirstReadSearches; n > 0 {
		inv.searches = rate.NewLimiter(rate.Limit(float64(n)/100), n)
	}
	for _, c := range clients {
		inv.indexes = append(inv.indexes, NewIndex(c, opts))
	}
	for _, ix := range inv.indexes {
		ix.siblings = inv.indexes
	}
	return inv
}

// Start starts one sync loop per vCenter and returns; they stop when ctx
// ends (Wait waits for them).
func (inv *Inventory) Start(ctx context.Context) {
	for _, ix := range inv.indexes {
		inv.wg.Go(func() { ix.Run(ctx, inv.opts.MaxWait) })
		if every := inv.opts.PrivilegeCheckEvery; every > 0 {
			inv.wg.Go(func() { ix.checkPrivilegesEvery(ctx, every, inv.opts.SearchTimeout) })
		}
	}
}

// Wait waits until the sync loops started by Start have stopped (their
// ctx ended) and released their server-side state, then ends the direct
// reads lookups started and waits for them.
func (inv *Inventory) Wait() {
	inv.wg.Wait()
	for _, ix := range inv.indexes {
		ix.reader.close()
	}
}

// WaitForSync waits until every index has completed a full read, or ctx
// ends; it reports the vCenters still not synced. The controller manager
// never waits (lookups need no warm-up); tools and tests do.
func (inv *Inventory) WaitForSync(ctx context.Context) error {
	var errs []error
	for _, ix := range inv.indexes {
		if err := ix.WaitSynced(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Indexes returns the per-vCenter indexes, in config order.
func (inv *Inventory) Indexes() []*Index { return inv.indexes }

// Index returns the index of the named vCenter, or nil.
func (inv *Inventory) Index(vcenter string) *Index {
	for _, ix := range inv.indexes {
		if ix.VCenter() == vcenter {
			return ix
		}
	}
	return nil
}

// FindByUUID finds the VM with this BIOS UUID, in either byte order, in any
// vCenter. It answers from the indexes; on a miss it asks directly only
// the vCenters whose index is not current (see find).
func (inv *Inventory) FindByUUID(ctx context.Context, uuid string) (VM, error) {
	lk, err := uuidLookup(uuid)
	if err != nil {
		return VM{}, err
	}
	key := func() string { return fmt.Sprintf("BIOS UUID %s (or byte-swapped %s)", lk.uuid, lk.uuid.swap()) }
	return inv.find(ctx, key, lk,
		func(ctx context.Context, ix *Index) ([]VM, error) { return ix.searchUUID(ctx, lk.uuidStrings()) })
}

// uuidLookup returns the key of a lookup by uuid: it, and its
// byte-swapped form if different. It allocates nothing: the framework's
// loops look up thousands of Nodes a second by UUID.
func uuidLookup(uuid string) (lookupKey, error) {
	k, ok := parseUUID(uuid)
	if !ok {
		return lookupKey{}, fmt.Errorf("%q is not a UUID", uuid)
	}
	return k.lookup(), nil
}

// uuidStrings are the UUIDs of a lookup by UUID as vCenter writes them
// (lower case): the UUID, then its byte-swapped form if different.
func (k lookupKey) uuidStrings() []string {
	out := []string{k.uuid.String()}
	if k.swapped != (uuidKey{}) {
		out = append(out, k.swapped.String())
	}
	return out
}

// FindByName finds the VM with this name in any vCenter. Names are only
// looked up in the index: a vCenter whose index is not complete makes a
// miss an error, not ErrNotFound.
func (inv *Inventory) FindByName(ctx context.Context, name string) (VM, error) {
	return inv.find(ctx, func() string { return fmt.Sprintf("VM name %q", name) }, lookupKey{name: name}, nil)
}

// FindByGuestHostname finds the VM whose guest host name (VMware Tools) is
// name, case-insensitively, falling back to a direct search by DNS name.
func (inv *Inventory) FindByGuestHostname(ctx context.Context, name string) (VM, error) {
	if !inv.opts.GuestHostnames && !inv.opts.AllDetails {
		return VM{}, fmt.Errorf("guest host name %q: guest host names are not indexed (Options.GuestHostnames is off)", name)
	}
	lower := strings.ToLower(name)
	return inv.find(ctx, func() string { return fmt.Sprintf("guest host name %q", name) },
		lookupKey{host: lower},
		func(ctx context.Context, ix *Index) ([]VM, error) { return ix.searchDNSName(ctx, name) })
}

type searchFunc func(context.Context, *Index) ([]VM, error)

// find answers from the indexes. A vCenter whose index is current is
// authoritative; one that has been read once but is not current (a resync
// after a new session, failing updates), or is in its first read with its
// hosts, clusters and folders known, is asked directly on a miss; one
// never read, or down, makes a miss an error without a request: a lookup
// must not become one vSphere request per node (and per retry, and per
// lifecycle pass) exactly when a vCenter is busiest. For the same reason,
// a first read whose pages are arriving answers from them: a VM in the
// pages read so far is found there (its details read directly), and a
// miss waits for the next pages (Paged wakes the retry) instead of
// searching.
//
// key says what was looked up, for errors only: built when one is.
func (inv *Inventory) find(ctx context.Context, key func() string, lk lookupKey, search searchFunc) (VM, error) {
	var buf [2]match // one is the usual answer: no allocation for it
	found := buf[:0]
	var incomplete []error
	var ask []*Index // searchable, not current: worth a direct search on a miss
	var stale error  // a match in a vCenter whose index is not current
	// In their first read, pages arriving: searched on a miss only within
	// the budget (Options.FirstReadSearches).
	var paging []*Index
	var pagingErrs []error
	for _, ix := range inv.indexes {
		// The status first: data read after the index said it is current
		// is that read's or a newer one's, never a resync's old data
		// taken for current.
		ok, _, err := ix.Status()
		before := len(found)
		found = ix.lookup(lk, found)
		vms := found[before:]
		switch {
		case ok:
		case search != nil && ix.searchedOnMiss():
			ask = append(ask, ix)
		case search != nil && ix.searchable():
			paging, pagingErrs = append(paging, ix), append(pagingErrs, err)
		default:
			incomplete = append(incomplete, err)
		}
		answers := ix.answers() || (len(vms) > 0 && vms[0].paged && ix.pagesAnswer())
		if len(vms) > 0 && stale == nil && !answers {
			stale = fmt.Errorf("%s is in vCenter %q, which cannot be asked now: %w", vms[0].vm.Location(), ix.VCenter(), err)
		}
	}
	switch {
	case len(found) > 1:
		return VM{}, &AmbiguousError{Key: key(), Candidates: sortVMs(vmsOf(ctx, found))}
	case len(found) == 1 && stale != nil:
		// Known, but its state may have changed: an error, not stale data.
		return VM{}, &IncompleteError{Key: key(), Causes: []error{stale}}
	case len(found) == 1 && found[0].detailed:
		return found[0].vm, nil
	case len(found) == 1 && found[0].paged:
		vm, err := found[0].ix.fetchPaged(ctx, found[0].vm.Ref)
		if err != nil {
			return VM{}, &IncompleteError{Key: key(), Causes: []error{err}}
		}
		return vm, nil
	case len(found) == 1:
		return found[0].ix.detail(ctx, found[0].ref)
	}
	if len(paging) > 0 {
		if inv.searches != nil && inv.searches.AllowN(inv.clock.Now(), len(paging)) {
			ask = append(ask, paging...)
		} else {
			incomplete = append(incomplete, pagingErrs...)
		}
	}
	switch {
	case len(ask) == 0 && len(incomplete) > 0:
		return VM{}, &IncompleteError{Key: key(), Causes: incomplete}
	case len(ask) == 0:
		return VM{}, &NotFoundError{Key: key(), VCenters: inv.names()}
	}

	// Not in any index: ask the vCenters whose index is not current, in parallel.
	type result struct {
		vms []VM
		err error
	}
	results := make([]result, len(ask))
	var wg sync.WaitGroup
	for i, ix := range ask {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, inv.opts.SearchTimeout)
			defer cancel()
			firstRead := !ix.HasSynced() // before the search: the read may complete meanwhile
			vms, err := search(ctx, ix)
			switch {
			case err != nil:
				err = fmt.Errorf("vCenter %q: %w", ix.VCenter(), err)
			case len(vms) == 0 && firstRead:
				// A miss during the first read proves nothing: "absent" is
				// the index's word (see AbsenceError).
				err = fmt.Errorf("vCenter %q: not found by a direct search during the inventory's first read; absence is unproven until the read completes", ix.VCenter())
			}
			results[i] = result{vms, err}
		}()
	}
	wg.Wait()
	causes := incomplete
	var searched []VM
	for _, r := range results {
		searched = append(searched, r.vms...)
		if r.err != nil {
			causes = append(causes, r.err)
		}
	}
	switch {
	case len(searched) > 1:
		return VM{}, &AmbiguousError{Key: key(), Candidates: sortVMs(searched)}
	case len(searched) == 1:
		if ix := inv.Index(searched[0].VCenter); ix != nil {
			ix.interest.want(searched[0].Ref.Value) // follow it from now on
		}
		return searched[0], nil
	case len(causes) > 0:
		return VM{}, &IncompleteError{Key: key(), Causes: causes}
	}
	return VM{}, &NotFoundError{Key: key(), VCenters: inv.names()}
}

func (inv *Inventory) names() []string {
	out := make([]string, len(inv.indexes))
	for i, ix := range inv.indexes {
		out[i] = ix.VCenter()
	}
	return out
}

// vmsOf returns the VMs of matches, with their details where they can be
// read (an operator needs to know where each duplicate is).
func vmsOf(ctx context.Context, ms []match) []VM {
	out := make([]VM, len(ms))
	for i, m := range ms {
		out[i] = m.vm
		if !m.detailed && m.ix.answers() {
			if vm, err := m.ix.detail(ctx, m.ref); err == nil {
				out[i] = vm
			}
		}
	}
	return out
}

func sortVMs(vms []VM) []VM {
	slices.SortFunc(vms, func(a, b VM) int { return strings.Compare(a.Location(), b.Location()) })
	return vms
}
