package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// churnRates are the changes made each minute of the day scenario.
type churnRates struct {
	// PowerCycles non-Node VMs are powered off, and powered on again the
	// next minute.
	PowerCycles int
	// Creates non-Node VMs are cloned; Destroys of the VMs created (the
	// oldest first, once they have lived a minute) are destroyed.
	Creates, Destroys int
	// VMotions Node VMs move to another host of their cluster, and
	// CrossZone of them, every CrossZoneEvery minutes, to another cluster
	// (another zone).
	VMotions, CrossZone, CrossZoneEvery int
	// Addresses Node VMs get a new guest IPv4 address.
	Addresses int
	// TagEdits clusters or hosts get a tag of a category the CCM does not
	// read attached, detached the next minute.
	TagEdits int
	// NodeDestroyEvery minutes one Node VM is powered off and destroyed,
	// and its Node marked NotReady (what the node lifecycle controller of
	// kube-controller-manager does once its kubelet stops posting).
	NodeDestroyEvery int
}

// defaultChurn is the day scenario's churn for a fleet of vms VMs of which
// nodes are Nodes: per minute 0.02 % of the VMs power-cycled, 0.005 %
// created and as many destroyed, 0.1 % of the Nodes moved (one across
// zones every 5 minutes) and 0.1 % given a new address, two tag edits, one
// Node VM destroyed every 10 minutes. At 100,000 VMs and 5,000 Nodes, an
// hour is 1,200 power cycles, 300 VMs created and 300 destroyed, 300
// vMotions (12 across zones), 300 address changes, 240 tag edits and 6
// Nodes lost: what the simulated vCenters (one CPU for ten) sustain with
// their 20 ms per call, made 8 at a time.
func defaultChurn(vms, nodes int) churnRates {
	return churnRates{
		PowerCycles: max(vms/5000, 1), Creates: max(vms/20000, 1), Destroys: max(vms/20000, 1),
		VMotions: max(nodes/1000, 1), CrossZone: 1, CrossZoneEvery: 5,
		Addresses: max(nodes/1000, 1), TagEdits: 2, NodeDestroyEvery: 10,
	}
}

// change is one change of a Node's truth whose arrival on the Node is
// timed: a new address, or its VM destroyed (the Node deleted).
type change struct {
	kind string // "address", "zone", "deleted"
	node string
	ip   string // the new address (kind "address") or zone ("zone")
	at   time.Time
}

// churn applies churnRates to a fleet, seeded, one minute at a time.
type churn struct {
	fleet *vcsim.Fleet
	kube  kubernetes.Interface
	rng   *rand.Rand
	rates churnRates

	nodes   []vcsim.VM // alive Node VMs, as last moved
	others  []vcsim.VM // non-Node VMs the churn may power-cycle
	created []vcsim.VM // VMs the churn made, oldest first
	off     []vcsim.VM // powered off last minute
	tagged  []tagged   // tags attached last minute
	// clusters are each vCenter's clusters and their hosts.
	clusters map[string][]placement
	nextIP   int
	runNo    int // which run of the scenario: names and addresses differ by run
	minute   int
	clones   int

	// sink gets every change made, as it is made.
	sink func(change)

	mu   sync.Mutex
	done map[string]int // operations done, by kind
	// benchNodeWrites are this process's writes to Nodes (NotReady).
	benchNodeWrites int
}

type tagged struct {
	vc  *vcsim.VCenter
	obj types.ManagedObjectReference
}

// newChurn makes a churn of nodes in fleet, for run (0, 1, ...: the VMs
// it creates and the addresses it gives differ by run); everNodes are
// every VM that was a Node, never powered off or cloned by the churn.
func newChurn(fleet *vcsim.Fleet, kube kubernetes.Interface, nodes, everNodes []vcsim.VM, rates churnRates, seed uint64, run int) *churn {
	// Not the Node VMs of earlier runs either: some were destroyed.
	isNode := map[string]bool{}
	for _, vm := range everNodes {
		isNode[vm.Name] = true
	}
	var others []vcsim.VM
	for _, vm := range fleet.VMs() {
		if !isNode[vm.Name] {
			others = append(others, vm)
		}
	}
	return &churn{fleet: fleet, kube: kube, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rates: rates,
		nodes: slices.Clone(nodes), others: others, done: map[string]int{}, clusters: placements(fleet), runNo: run}
}

// Nodes are the Node VMs still alive.
func (c *churn) Nodes() []vcsim.VM { return slices.Clone(c.nodes) }

// take returns the operations done so far and this process's Node
// writes.
func (c *churn) take() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.done), c.benchNodeWrites
}

func (c *churn) did(kind string, n int) {
	c.mu.Lock()
	c.done[kind] += n
	c.mu.Unlock()
}

// record hands a change to the sink (the watcher timing it).
func (c *churn) record(ch change) {
	if c.sink != nil {
		c.sink(ch)
	}
}

// run makes one minute's changes each minute until soft ends (a minute
// under way is finished: none is cut short, leaving VMs off that the
// churn does not know of); hard cancels everything. A minute whose changes
// took longer than a minute is counted (late) and the next starts at once.
func (c *churn) run(soft, hard context.Context) error {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		began := time.Now()
		sctx, cancel := context.WithTimeout(hard, 5*time.Minute)
		err := c.step(sctx)
		cancel()
		if err != nil {
			return err
		}
		if time.Since(began) > time.Minute {
			c.did("minutes late", 1)
		}
		select {
		case <-soft.Done():
			return nil
		case <-hard.Done():
			return hard.Err()
		case <-t.C:
		}
	}
}

// step makes one minute's changes: chosen first, in the seed's order,
// then made in parallel (as many administrators and automations would),
// so that a minute's changes take about a minute of the simulators' time
// at most.
func (c *churn) step(ctx context.Context) error {
	c.minute++
	r := c.rates
	var ops, later []func(context.Context) error
	// Power: last minute's back on, others off.
	for _, vm := range c.off {
		ops = append(ops, func(ctx context.Context) error { return c.power(ctx, vm, true) })
	}
	c.did("power on", len(c.off))
	var off []vcsim.VM
	for range r.PowerCycles {
		vm := c.others[c.rng.IntN(len(c.others))]
		if slices.ContainsFunc(off, func(o vcsim.VM) bool { return o.Ref == vm.Ref }) ||
			slices.ContainsFunc(c.off, func(o vcsim.VM) bool { return o.Ref == vm.Ref }) {
			continue
		}
		off = append(off, vm)
		ops = append(ops, func(ctx context.Context) error { return c.power(ctx, vm, false) })
	}
	c.did("power off", len(off))
	c.off = off
	// Creations and destructions of non-Node VMs.
	var mu sync.Mutex
	for range r.Creates {
		src := c.others[c.rng.IntN(len(c.others))]
		c.clones++
		name := fmt.Sprintf("churn%d-%s-%d", c.runNo, src.VCenter, c.clones)
		ops = append(ops, func(ctx context.Context) error {
			ref, err := c.fleet.VCenter(src.VCenter).Clone(ctx, src.Ref, name, "")
			if err != nil {
				return fmt.Errorf("clone %s: %w", src.Name, err)
			}
			mu.Lock()
			c.created = append(c.created, vcsim.VM{Name: name, Ref: ref, VCenter: src.VCenter})
			mu.Unlock()
			return nil
		})
	}
	c.did("created", r.Creates)
	for i := 0; i < r.Destroys && len(c.created) > 0; i++ {
		vm := c.created[0]
		c.created = c.created[1:]
		ops = append(ops, func(ctx context.Context) error { return c.destroy(ctx, vm) })
		c.did("destroyed", 1)
	}
	// vMotions of Node VMs, some across zones every CrossZoneEvery minutes.
	cross := 0
	if r.CrossZoneEvery > 0 && c.minute%r.CrossZoneEvery == 0 {
		cross = r.CrossZone
	}
	moved := map[int]bool{}
	for i := range r.VMotions {
		k := c.rng.IntN(len(c.nodes))
		if moved[k] {
			continue
		}
		vm := c.nodes[k]
		v := c.fleet.VCenter(vm.VCenter)
		host, ok := v.OtherHost(vm)
		if i < cross {
			host, ok = c.otherClusterHost(v, vm)
		}
		if !ok {
			continue
		}
		moved[k] = true
		across := i < cross
		zone := "zone-" + c.clusterName(v, host)
		ops = append(ops, func(ctx context.Context) error {
			if err := v.Relocate(ctx, vm.Ref, host); err != nil {
				return err
			}
			if across {
				c.record(change{kind: "zone", node: vm.Name, ip: zone, at: time.Now()})
			}
			return nil
		})
		if across {
			c.did("vMotion across zones", 1)
		} else {
			c.did("vMotion", 1)
		}
		vm.HostRef = host
		vm.ClusterRef = c.clusterOf(v, host)
		c.nodes[k] = vm
	}
	// New guest addresses.
	for range r.Addresses {
		k := c.rng.IntN(len(c.nodes))
		vm, ip := c.nodes[k], c.nextAddress()
		ops = append(ops, func(ctx context.Context) error { return c.readdress(ctx, vm, ip) })
	}
	c.did("address changed", r.Addresses)
	// Tags: last minute's detached, then new ones attached.
	for _, tg := range c.tagged {
		ops = append(ops, func(ctx context.Context) error { return tg.vc.Untag(ctx, "ops", "maintenance", tg.obj) })
	}
	c.tagged = c.tagged[:0]
	for i := range r.TagEdits {
		vm := c.nodes[c.rng.IntN(len(c.nodes))]
		v := c.fleet.VCenter(vm.VCenter)
		obj := vm.ClusterRef
		if i%2 == 1 {
			obj = vm.HostRef
		}
		if slices.ContainsFunc(c.tagged, func(t tagged) bool { return t.obj == obj && t.vc == v }) {
			continue
		}
		c.tagged = append(c.tagged, tagged{vc: v, obj: obj})
		later = append(later, func(ctx context.Context) error { return v.Tag(ctx, "ops", "maintenance", obj) })
	}
	c.did("tag edits", len(c.tagged)*2)
	// A Node VM lost.
	if r.NodeDestroyEvery > 0 && c.minute%r.NodeDestroyEvery == 0 && len(c.nodes) > 1 {
		k := c.rng.IntN(len(c.nodes))
		vm := c.nodes[k]
		c.nodes = slices.Delete(c.nodes, k, k+1)
		later = append(later, func(ctx context.Context) error {
			if err := c.power(ctx, vm, false); err != nil {
				return err
			}
			if err := c.destroy(ctx, vm); err != nil {
				return err
			}
			c.record(change{kind: "deleted", node: vm.Name, at: time.Now()})
			return c.notReady(ctx, vm.Name)
		})
		c.did("Node VM destroyed", 1)
	}
	if err := parallel(ctx, 8, ops); err != nil {
		return err
	}
	return parallel(ctx, 8, later)
}

// parallel runs fns, at most n at a time, and joins their errors.
func parallel(ctx context.Context, n int, fns []func(context.Context) error) error {
	sem := make(chan struct{}, n)
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(ctx)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nextAddress is a new guest address: 10.250-253.x.y, unique across the
// runs (the run picks the block), so that no Node registered for a later
// run already shows it.
func (c *churn) nextAddress() string {
	c.nextIP++
	n := c.runNo<<14 + c.nextIP
	return netip.AddrFrom4([4]byte{10, byte(250 + n>>16), byte(n >> 8), byte(n)}).String()
}

func (c *churn) power(ctx context.Context, vm vcsim.VM, on bool) error {
	o := object.NewVirtualMachine(c.fleet.VCenter(vm.VCenter).Admin(), vm.Ref)
	var task *object.Task
	var err error
	if on {
		task, err = o.PowerOn(ctx)
	} else {
		task, err = o.PowerOff(ctx)
	}
	if err == nil {
		err = task.Wait(ctx)
	}
	// InvalidPowerState: the VM is already in the state asked for.
	if err != nil && !fault.Is(err, &types.InvalidPowerState{}) {
		return fmt.Errorf("power %s: %w", vm.Name, err)
	}
	return nil
}

func (c *churn) destroy(ctx context.Context, vm vcsim.VM) error {
	o := object.NewVirtualMachine(c.fleet.VCenter(vm.VCenter).Admin(), vm.Ref)
	task, err := o.Destroy(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("destroy %s: %w", vm.Name, err)
	}
	return nil
}

// readdress gives Node VM vm the guest IPv4 address ip (its other
// addresses and NIC kept), as a DHCP lease change would.
func (c *churn) readdress(ctx context.Context, vm vcsim.VM, ip string) error {
	v := c.fleet.VCenter(vm.VCenter)
	var m mo.VirtualMachine
	if err := property.DefaultCollector(v.Admin()).RetrieveOne(ctx, vm.Ref, []string{"guest.net", "guest.hostName"}, &m); err != nil {
		return err
	}
	if m.Guest == nil || len(m.Guest.Net) == 0 {
		return fmt.Errorf("VM %s has no guest NIC", vm.Name)
	}
	nics := slices.Clone(m.Guest.Net)
	addrs := slices.Clone(nics[0].IpAddress)
	if len(addrs) == 0 {
		addrs = []string{ip}
	} else {
		addrs[0] = ip
	}
	nics[0].IpAddress = addrs
	nics[0].IpConfig = nil
	v.SetGuest(vm.Ref, m.Guest.HostName, nics)
	c.record(change{kind: "address", node: vm.Name, ip: ip, at: time.Now()})
	return nil
}

// notReady sets the Node's Ready condition Unknown.
func (c *churn) notReady(ctx context.Context, name string) error {
	for {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		setReady(n, v1.ConditionUnknown)
		_, err = c.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue // a concurrent write of the CCM's
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.benchNodeWrites++
		c.mu.Unlock()
		return nil
	}
}

// setReady sets n's Ready condition to s.
func setReady(n *v1.Node, s v1.ConditionStatus) {
	now := metav1.Now()
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].LastTransitionTime = s, now
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: v1.NodeReady, Status: s,
		LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletReady"})
}

// otherClusterHost is a host of another cluster of vm's datacenter.
func (c *churn) otherClusterHost(v *vcsim.VCenter, vm vcsim.VM) (types.ManagedObjectReference, bool) {
	var others []placement
	for _, p := range c.clusters[v.Name] {
		if p.datacenter == vm.Datacenter && p.cluster != vm.ClusterRef && len(p.hosts) > 0 {
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		return types.ManagedObjectReference{}, false
	}
	p := others[c.rng.IntN(len(others))]
	return p.hosts[c.rng.IntN(len(p.hosts))], true
}

// clusterOf is the cluster host belongs to.
func (c *churn) clusterOf(v *vcsim.VCenter, host types.ManagedObjectReference) types.ManagedObjectReference {
	for _, p := range c.clusters[v.Name] {
		if slices.Contains(p.hosts, host) {
			return p.cluster
		}
	}
	return types.ManagedObjectReference{}
}

// clusterName is the name of the cluster host belongs to.
func (c *churn) clusterName(v *vcsim.VCenter, host types.ManagedObjectReference) string {
	for _, p := range c.clusters[v.Name] {
		if slices.Contains(p.hosts, host) {
			return p.name
		}
	}
	return ""
}

// placement is a cluster, its datacenter and its hosts.
type placement struct {
	datacenter string
	name       string
	cluster    types.ManagedObjectReference
	hosts      []types.ManagedObjectReference
}

// placements lists every cluster holding a VM, by vCenter.
func placements(fleet *vcsim.Fleet) map[string][]placement {
	out := map[string][]placement{}
	for _, v := range fleet.VCenters {
		seen := map[types.ManagedObjectReference]bool{}
		for _, vm := range v.VMs {
			if vm.ClusterRef.Value == "" || seen[vm.ClusterRef] {
				continue
			}
			seen[vm.ClusterRef] = true
			out[v.Name] = append(out[v.Name], placement{datacenter: vm.Datacenter, name: vm.Cluster, cluster: vm.ClusterRef, hosts: v.ClusterHosts(vm.ClusterRef)})
		}
	}
	return out
}
