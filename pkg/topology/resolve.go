package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// Value is one resolved label value and where it came from.
type Value struct {
	Value string `json:"value"`
	// From says where the value came from, for example
	// "tag k8s-zone:zone-a on cluster site-a (domain-c7)".
	From string `json:"from"`
	// Source is the kind of source; vSphere CSI sees only SourceHostTag.
	Source Source `json:"source"`
}

// Source is the kind of source of a Value.
type Source string

// The sources of values.
const (
	// SourceHostTag: a tag on the VM's host, cluster, host folders,
	// datacenter or its folders: the objects vSphere CSI reads too.
	SourceHostTag Source = "hostTag"
	// SourceVMTag: a tag on the VM or its VM folders (vSphere CSI does not
	// look there).
	SourceVMTag Source = "vmTag"
	// SourceStatic: staticTopology in the config.
	SourceStatic Source = "static"
	// SourceHostGroup: a DRS host group (config hostGroupZones).
	SourceHostGroup Source = "hostGroup"
)

// Result is the topology of one VM. Zone and Region are nil when not
// configured (no category and no static value).
type Result struct {
	Zone   *Value           `json:"zone,omitempty"`
	Region *Value           `json:"region,omitempty"`
	Labels map[string]Value `json:"labels,omitempty"`
	// InstanceType is the tag of labels.instanceType nearest the VM, if any.
	InstanceType *Value `json:"instanceType,omitempty"`
	// Placement is set when a hostGroupZones entry applies to the VM's
	// cluster: its intended and actual zone.
	Placement *Placement `json:"placement,omitempty"`
}

// Resolver resolves VMs of every vCenter.
type Resolver struct {
	cfg    *config.Config
	inv    *inventory.Inventory
	caches map[string]*Cache
	opts   ResolverOptions
	wg     sync.WaitGroup
}

// ResolverOptions tunes a Resolver.
type ResolverOptions struct {
	// MissRefreshAfter: when a required tag is missing on a VM's chain and
	// the cache is older than this, the cache is refreshed and the VM
	// resolved again (default 30s): a tag attached since the last refresh
	// is seen at once, at the cost of at most one refresh per interval.
	MissRefreshAfter time.Duration
	// Clock tells the tag caches' age (default: the real clock).
	Clock clock.Clock
}

// NewResolver builds one tag cache per vCenter client.
func NewResolver(cfg *config.Config, inv *inventory.Inventory, clients []Client, opts ResolverOptions) *Resolver {
	if opts.MissRefreshAfter <= 0 {
		opts.MissRefreshAfter = 30 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	cats := []string{}
	if cfg.Labels.Zone != "" {
		cats = append(cats, cfg.Labels.Zone)
	}
	if cfg.Labels.Region != "" {
		cats = append(cats, cfg.Labels.Region)
	}
	for _, a := range cfg.Labels.Additional {
		if a.Category != "" {
			cats = append(cats, a.Category)
		}
	}
	if cfg.Labels.InstanceType != "" {
		cats = append(cats, cfg.Labels.InstanceType)
	}
	r := &Resolver{cfg: cfg, inv: inv, caches: map[string]*Cache{}, opts: opts}
	for _, c := range clients {
		r.caches[c.Name()] = NewCache(c, cats, opts.Clock)
	}
	return r
}

// Cache returns the tag cache of the named vCenter.
func (r *Resolver) Cache(vcenter string) *Cache { return r.caches[vcenter] }

// Start starts refreshing every cache on the configured interval until
// ctx ends, and returns (Wait waits for the loops to stop).
func (r *Resolver) Start(ctx context.Context) {
	for _, c := range r.caches {
		r.wg.Go(func() { c.Run(ctx, r.cfg.Global.TagRefreshInterval) })
	}
}

// Wait waits for the loops started by Start to stop (their ctx ended),
// then ends the refreshes lookups started and waits for them.
func (r *Resolver) Wait() {
	r.wg.Wait()
	for _, c := range r.caches {
		c.Close()
	}
}

// WaitForSync waits until every cache has been filled once, or ctx ends.
func (r *Resolver) WaitForSync(ctx context.Context) error {
	var errs []error
	for _, c := range r.caches {
		if err := c.WaitSynced(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Chain returns the objects searched for a VM's tags, nearest first:
//
//	host, cluster (or standalone compute resource), its host folders,
//	datacenter, the datacenter's folders, then the VM and its VM folders.
//
// The physical placement comes first: a zone is a failure domain, and the
// host chain follows the VM after a vMotion. Tags on the VM and its folders
// are a fallback for sites where only VMs may be tagged. The first
// hostLen objects are the host chain, which is all vSphere CSI reads.
func Chain(ix *inventory.Index, vm inventory.VM) (chain []inventory.Object, hostLen int) {
	return chainOf(HostChain(ix, vm), vm, ix.Ancestors(vm.Folder))
}

// chainOf is Chain from the VM's host chain and its folder's ancestors,
// which Resolve reads once for Chain and referenceChains.
func chainOf(host []inventory.Object, vm inventory.VM, folders []inventory.Object) (chain []inventory.Object, hostLen int) {
	chain = slices.Clip(host) // appended to: never into the caller's array
	hostLen = len(chain)
	chain = append(chain, inventory.Object{Ref: vm.Ref, Name: vm.Name, Parent: vm.Folder})
	for _, o := range folders {
		if o.Ref.Type == "Datacenter" {
			break
		}
		chain = append(chain, o)
	}
	return chain, hostLen
}

// HostChain is the part of Chain that vSphere CSI walks: the VM's host and
// its ancestors, nearest first.
func HostChain(ix *inventory.Index, vm inventory.VM) []inventory.Object {
	if vm.Host.Value == "" {
		return nil
	}
	return ix.Ancestors(vm.Host)
}

func describe(o inventory.Object) string {
	return fmt.Sprintf("%s %s (%s)", inventory.Kind(o.Ref), o.Name, o.Ref.Value)
}

// Resolve returns the zone, region and additional labels of vm. It makes
// no request when the tags of the VM and its ancestors are cached, and at
// most one otherwise.
func (r *Resolver) Resolve(ctx context.Context, vm inventory.VM) (Result, error) {
	vc, ok := r.cfg.VCenter(vm.VCenter)
	if !ok {
		return Result{}, fmt.Errorf("VM %s: vCenter %q is not configured", vm.Location(), vm.VCenter)
	}
	ix := r.inv.Index(vm.VCenter)
	cache := r.caches[vm.VCenter]
	if ix == nil || cache == nil {
		return Result{}, fmt.Errorf("VM %s: no inventory for vCenter %q", vm.Location(), vm.VCenter)
	}
	if !ix.ObjectsKnown() {
		// A VM found before its vCenter's hosts, clusters and folders were
		// read (they are read ahead of the VMs, so this is rare). The Node
		// is retried when they are.
		return Result{}, fmt.Errorf("VM %s: the inventory of vCenter %q is not read yet, so the VM's host and folders are unknown; retried when it is", vm.Location(), vm.VCenter)
	}
	if _, ok := ix.Object(vm.Host); vm.Host.Value != "" && !ok {
		// A host newer than the objects read ahead of the first read: its
		// cluster is unknown, and a zone from the VM's folders would be a
		// guess (zones are labelled once).
		return Result{}, fmt.Errorf("VM %s: its host %s is not in the inventory of vCenter %q yet; retried when it is", vm.Location(), vm.Host.Value, vm.VCenter)
	}
	host, folders := HostChain(ix, vm), ix.Ancestors(vm.Folder)
	chain, hostLen := chainOf(host, vm, folders)
	// The instance type is the VM's own: its chain starts at the VM and
	// its folders, then its host's (not cut short for CSI).
	vmFirst := append(slices.Clone(chain[hostLen:]), chain[:hostLen]...)
	if r.cfg.Labels.CSICompatible {
		chain = chain[:hostLen]
	}
	// Precedence: a hostGroupZones entry for the VM's cluster, then
	// staticTopology, then tags.
	staticZone, staticRegion := static(vc, vm.Datacenter)
	groups, err := resolveGroups(r.cfg.HostGroupZones, ix, vm)
	if err != nil {
		return Result{}, err
	}
	if groups != nil {
		if groups.zone != nil {
			staticZone = groups.zone
		}
		if groups.region != nil {
			staticRegion = groups.region
		}
	}

	needTags := (r.cfg.Labels.Zone != "" && staticZone == nil) || (r.cfg.Labels.Region != "" && staticRegion == nil) ||
		slices.ContainsFunc(r.cfg.Labels.Additional, func(a config.AdditionalLabel) bool { return a.Category != "" }) ||
		r.cfg.Labels.InstanceType != ""
	if needTags {
		if err := cache.Ensure(ctx); err != nil {
			return Result{}, fmt.Errorf("VM %s: read tags: %w", vm.Location(), err)
		}
	}
	var refChains [][]inventory.Object
	if !r.cfg.Labels.CSICompatible && staticZone == nil && staticRegion == nil && r.cfg.Labels.Zone != "" && r.cfg.Labels.Region != "" {
		refChains = referenceChains(ix, vm, host, folders)
	}
	res, err := r.resolve(vm, cache, chain, hostLen, vmFirst, staticZone, staticRegion, refChains)
	var me *MissingTagError
	var ce *CSIMissingError
	if (errors.As(err, &me) && !me.NoCategory) || errors.As(err, &ce) {
		// A tag may have been attached since the last refresh.
		if again, rerr := cache.RefreshIfOlder(ctx, r.opts.MissRefreshAfter); again && rerr == nil {
			res, err = r.resolve(vm, cache, chain, hostLen, vmFirst, staticZone, staticRegion, refChains)
		}
	}
	if groups != nil {
		res.Placement = groups.placement
		if err == nil && res.Zone == nil && groups.noZone != nil {
			// An entry applies to the VM but yields no zone, and nothing
			// else does: no Node without the zone it was promised.
			return res, groups.noZone
		}
	}
	return res, err
}

// resolve resolves vm from the cache as it is; vmFirst is the chain the
// instance type is searched on.
// With refChains (both categories, no static zone or region), zone and
// region are the reference CCM's (reference.go); otherwise each is the
// nearest tag of its category on chain.
func (r *Resolver) resolve(vm inventory.VM, cache *Cache, chain []inventory.Object, hostLen int, vmFirst []inventory.Object, staticZone, staticRegion *Value, refChains [][]inventory.Object) (Result, error) {
	var res Result
	var errs []error
	resolve := func(static *Value, category, label string) *Value {
		if static != nil {
			return static
		}
		if category == "" {
			return nil
		}
		v, err := r.walk(cache, vm, chain, hostLen, category, label, true)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	if r.cfg.Labels.CSICompatible {
		// Exactly what vSphere CSI computes (csi.go); config validation
		// allows neither static zones nor host groups with it.
		csi, err := csiWalk(cache, vm, chain, r.cfg.Labels.Zone, r.cfg.Labels.Region, nil)
		if err != nil {
			errs = append(errs, err)
		}
		res.Zone, res.Region = csi.Zone, csi.Region
	} else if refChains != nil {
		ref, err := referenceWalk(cache, vm, refChains, r.cfg.Labels.Zone, r.cfg.Labels.Region, "labels.zone", "labels.region")
		if err != nil {
			errs = append(errs, err)
		}
		res.Zone, res.Region = ref.Zone, ref.Region
	} else {
		res.Zone = resolve(staticZone, r.cfg.Labels.Zone, "labels.zone")
		res.Region = resolve(staticRegion, r.cfg.Labels.Region, "labels.region")
	}
	for _, a := range r.cfg.Labels.Additional {
		if a.Attribute != "" {
			v, err := attribute(vm, a.Attribute)
			if err != nil {
				errs = append(errs, err)
			} else if v != nil {
				if res.Labels == nil {
					res.Labels = map[string]Value{}
				}
				res.Labels[a.Label] = *v
			}
			continue
		}
		v, err := r.walk(cache, vm, chain, hostLen, a.Category, a.Label, false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v != nil {
			if res.Labels == nil {
				res.Labels = map[string]Value{}
			}
			res.Labels[a.Label] = *v
		}
	}
	if c := r.cfg.Labels.InstanceType; c != "" {
		// Every object of vmFirst counts as the VM's for the CSI notice
		// (which is about zone and region only).
		v, err := r.walk(cache, vm, vmFirst, 0, c, "labels.instanceType", false)
		if err != nil {
			errs = append(errs, err)
		}
		res.InstanceType = v
	}
	if a := r.cfg.Labels.InstanceTypeAttribute; a != "" && res.InstanceType == nil {
		v, err := attribute(vm, a)
		if err != nil {
			errs = append(errs, err)
		}
		res.InstanceType = v
	}
	if len(errs) > 0 {
		return res, joinErrors(errs)
	}
	return res, nil
}

// attribute returns the value of the VM's custom attribute name as a
// label value, nil when the VM has none.
func attribute(vm inventory.VM, name string) (*Value, error) {
	s, ok := vm.Attributes[name]
	if !ok || s == "" {
		return nil, nil
	}
	if errs := validation.IsValidLabelValue(s); len(errs) > 0 {
		return nil, &InvalidAttributeError{VCenter: vm.VCenter, VM: vm.Location(), Attribute: name, Value: s, Reason: strings.Join(errs, "; ")}
	}
	return &Value{s, fmt.Sprintf("custom attribute %s of VM %s", name, vm.Name), SourceVMTag}, nil
}

func static(vc config.VCenter, datacenter string) (zone, region *Value) {
	st := vc.StaticTopology
	if st.Zone != "" {
		zone = &Value{st.Zone, fmt.Sprintf("staticTopology of vcenter %s", vc.Name), SourceStatic}
	}
	if st.Region != "" {
		region = &Value{st.Region, fmt.Sprintf("staticTopology of vcenter %s", vc.Name), SourceStatic}
	}
	if d, ok := st.Datacenters[datacenter]; ok {
		from := fmt.Sprintf("staticTopology of vcenter %s, datacenter %s", vc.Name, datacenter)
		if d.Zone != "" {
			zone = &Value{d.Zone, from, SourceStatic}
		}
		if d.Region != "" {
			region = &Value{d.Region, from, SourceStatic}
		}
	}
	return zone, region
}

// walk finds the nearest object in chain with a tag of category.
func (r *Resolver) walk(cache *Cache, vm inventory.VM, chain []inventory.Object, hostLen int, category, what string, required bool) (*Value, error) {
	for i, o := range chain {
		names, _ := cache.tagsOn(o.Ref, category)
		switch len(names) {
		case 0:
			continue
		case 1:
			if errs := validation.IsValidLabelValue(names[0]); len(errs) > 0 {
				return nil, &InvalidTagError{VCenter: vm.VCenter, Object: describe(o), Category: category, Tag: names[0], Reason: strings.Join(errs, "; ")}
			}
			src := SourceHostTag
			if i >= hostLen {
				src = SourceVMTag
			}
			return &Value{names[0], fmt.Sprintf("tag %s:%s on %s", category, names[0], describe(o)), src}, nil
		default:
			return nil, &ConflictError{VCenter: vm.VCenter, Object: describe(o), Category: category, Tags: names}
		}
	}
	if !required {
		return nil, nil
	}
	if !cache.hasCategory(category) {
		return nil, &MissingTagError{VCenter: vm.VCenter, VM: vm.Location(), Category: category, What: what, NoCategory: true}
	}
	checked := make([]string, len(chain))
	for i, o := range chain {
		checked[i] = describe(o)
	}
	return nil, &MissingTagError{VCenter: vm.VCenter, VM: vm.Location(), Category: category, What: what, Checked: checked}
}
