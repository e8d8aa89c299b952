package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// revert undoes a fault at a time.
type revert struct {
	at   time.Time
	what string
	fn   func(context.Context) error
}

// fault is one kind of fault: it applies itself and returns how to undo
// it (nil: permanent, or nothing to undo).
type fault struct {
	name   string
	weight int
	apply  func(ctx context.Context, s *soak) (*revert, error)
}

func (s *soak) faultKinds() []fault {
	front := func(mode vcsim.FrontMode) func(ctx context.Context, s *soak) (*revert, error) {
		return func(ctx context.Context, s *soak) (*revert, error) {
			v := s.randomVCenter()
			if !s.hold("front/" + v.Name) {
				return nil, errSkip
			}
			if err := v.SetMode(mode); err != nil {
				return nil, err
			}
			return s.after(3, 12, fmt.Sprintf("%s %s", v.Name, mode), func(context.Context) error {
				s.release("front/" + v.Name)
				return v.SetMode(vcsim.Up)
			}), nil
		}
	}
	return []fault{
		{"vCenter refusing", 3, front(vcsim.Down)},
		{"vCenter black-holed", 3, front(vcsim.Hung)},
		{"vCenter silent on open connections", 3, front(vcsim.Silent)},
		{"latency spike", 2, func(ctx context.Context, s *soak) (*revert, error) {
			v := s.randomVCenter()
			if !s.hold("delay/" + v.Name) {
				return nil, errSkip
			}
			v.SetDelay(time.Duration(100+s.rnd.IntN(900)) * time.Millisecond)
			return s.after(3, 10, v.Name+" latency back to normal", func(context.Context) error {
				s.release("delay/" + v.Name)
				v.SetDelay(0)
				return nil
			}), nil
		}},
		{"DRS VM group changed (stretched cluster)", 2, func(ctx context.Context, s *soak) (*revert, error) {
			if !s.hold("drs") {
				return nil, errSkip
			}
			defer s.release("drs")
			s.truth.mu.Lock()
			var members []key
			for k := range s.truth.siteOf {
				members = append(members, k)
			}
			s.truth.mu.Unlock()
			if len(members) == 0 {
				return nil, errSkip
			}
			slices.SortFunc(members, func(a, b key) int { return strings.Compare(a.ref.Value, b.ref.Value) })
			k := members[s.rnd.IntN(len(members))]
			s.truth.mu.Lock()
			s.truth.siteOf[k] = map[string]string{"a": "b", "b": "a"}[s.truth.siteOf[k]]
			s.truth.mu.Unlock()
			s.truth.recomputeZones()
			return nil, s.fleet.VCenter(k.vc).SetGroups(ctx, s.truth.stretched.ref, s.truth.vmGroups(), nil)
		}},
		{"session termination", 3, func(ctx context.Context, s *soak) (*revert, error) {
			_, err := s.randomVCenter().TerminateSessions(ctx)
			return nil, err
		}},
		{"password rotation", 2, func(ctx context.Context, s *soak) (*revert, error) {
			v := s.randomVCenter()
			if !s.hold("secret/" + v.Name) {
				return nil, errSkip
			}
			pw := fmt.Sprintf("rotated-%d", s.rnd.Uint32())
			if s.rnd.IntN(2) == 0 { // the Secret first: no login fails
				if err := s.setSecret(ctx, v, pw, false); err != nil {
					return nil, err
				}
				v.SetPassword(pw)
				s.release("secret/" + v.Name)
				return nil, nil
			}
			v.SetPassword(pw) // vCenter first: at most one rejected login until the Secret follows
			return s.after(1, 6, "Secret of "+v.Name+" follows the rotation", func(ctx context.Context) error {
				s.release("secret/" + v.Name)
				return s.setSecret(ctx, v, pw, false)
			}), nil
		}},
		{"Secret key removed", 2, func(ctx context.Context, s *soak) (*revert, error) {
			v := s.randomVCenter()
			if !s.hold("secret/" + v.Name) {
				return nil, errSkip
			}
			if err := s.setSecret(ctx, v, "", false); err != nil {
				return nil, err
			}
			return s.after(3, 10, "Secret key of "+v.Name+" restored", func(ctx context.Context) error {
				s.release("secret/" + v.Name)
				return s.setSecret(ctx, v, v.CurrentPassword(), false)
			}), nil
		}},
		{"VM powered off", 2, func(ctx context.Context, s *soak) (*revert, error) {
			n, ok := s.pickVM()
			if !ok {
				return nil, errSkip
			}
			vm := object.NewVirtualMachine(s.fleet.VCenter(n.vc).Admin(), n.ref)
			if err := waitTask(ctx, vm.PowerOff); err != nil {
				s.release("vm/" + n.name)
				return nil, err
			}
			return s.after(3, 10, "power on "+n.name, func(ctx context.Context) error {
				defer s.release("vm/" + n.name)
				return waitTask(ctx, vm.PowerOn)
			}), nil
		}},
		{"VM identity unreadable", 2, func(ctx context.Context, s *soak) (*revert, error) {
			n, ok := s.pickVM()
			if !ok {
				return nil, errSkip
			}
			v := s.fleet.VCenter(n.vc)
			s.truth.mu.Lock()
			s.truth.hidden[n.name] = true
			s.truth.mu.Unlock()
			v.SetUUID(n.ref, "")
			v.SetConnectionState(n.ref, types.VirtualMachineConnectionStateInaccessible)
			return s.after(3, 12, "identity of "+n.name+" readable", func(context.Context) error {
				v.SetUUID(n.ref, n.uuid)
				v.SetConnectionState(n.ref, types.VirtualMachineConnectionStateConnected)
				s.truth.mu.Lock()
				delete(s.truth.hidden, n.name)
				s.truth.mu.Unlock()
				s.release("vm/" + n.name)
				return nil
			}), nil
		}},
		{"VM moved to another host", 2, func(ctx context.Context, s *soak) (*revert, error) {
			n, ok := s.pickVM()
			if !ok {
				return nil, errSkip
			}
			defer s.release("vm/" + n.name)
			v := s.fleet.VCenter(n.vc)
			s.truth.mu.Lock()
			cluster := s.truth.clusterOf[key{n.vc, n.ref}]
			s.truth.mu.Unlock()
			hosts := v.ClusterHosts(cluster.ref)
			return nil, v.Relocate(ctx, n.ref, hosts[s.rnd.IntN(len(hosts))])
		}},
		{"VM moved to another site (cluster)", 2, func(ctx context.Context, s *soak) (*revert, error) {
			n, ok := s.pickVM()
			if !ok {
				return nil, errSkip
			}
			defer s.release("vm/" + n.name)
			v := s.fleet.VCenter(n.vc)
			s.truth.mu.Lock()
			from := s.truth.clusterOf[key{n.vc, n.ref}].ref
			s.truth.mu.Unlock()
			var to types.ManagedObjectReference
			for _, c := range v.Model.Map().All("ClusterComputeResource") {
				if c.Reference() != from {
					to = c.Reference()
				}
			}
			if to.Value == "" {
				return nil, errSkip // one cluster only
			}
			cl := v.Model.Map().Get(to).(*simulator.ClusterComputeResource)
			host, pool := cl.Host[s.rnd.IntN(len(cl.Host))], *cl.ResourcePool
			spec := types.VirtualMachineRelocateSpec{Host: &host, Pool: &pool}
			if err := waitTask(ctx, func(ctx context.Context) (*object.Task, error) {
				return object.NewVirtualMachine(v.Admin(), n.ref).Relocate(ctx, spec, types.VirtualMachineMovePriorityDefaultPriority)
			}); err != nil {
				return nil, err
			}
			s.truth.mu.Lock()
			s.truth.clusterOf[key{n.vc, n.ref}] = key{n.vc, to}
			s.truth.mu.Unlock()
			s.truth.recomputeZones()
			return nil, nil
		}},
		{"VM moved to another vCenter", 1, func(ctx context.Context, s *soak) (*revert, error) {
			n, ok := s.pickVM()
			if !ok {
				return nil, errSkip
			}
			defer s.release("vm/" + n.name)
			var to *vcsim.VCenter
			var spare vcsim.VM
			s.truth.mu.Lock()
			for _, v := range s.fleet.VCenters {
				if list := s.truth.spares[v.Name]; v.Name != n.vc && len(list) > 0 {
					to, spare = v, list[0]
					s.truth.spares[v.Name] = list[1:]
					break
				}
			}
			s.truth.mu.Unlock()
			if to == nil {
				return nil, errSkip
			}
			// The VM is registered in the other vCenter first (both hold it
			// for a moment), then removed from the old one.
			to.SetUUID(spare.Ref, n.uuid)
			s.truth.update(n.name, func(r *nodeVM) { r.vc, r.ref = to.Name, spare.Ref })
			s.truth.recomputeZones()
			s.truth.update(n.name, func(r *nodeVM) { r.region = "region-" + spare.Datacenter })
			s.truth.gone(n.vc, n.ref)
			return nil, s.destroyInGroups(ctx, n.vc, n.ref)
		}},
		{"zone tag changed", 1, func(ctx context.Context, s *soak) (*revert, error) {
			v := s.randomVCenter()
			s.truth.mu.Lock()
			var clusters []types.ManagedObjectReference
			for _, vm := range v.VMs {
				if !slices.Contains(clusters, vm.ClusterRef) {
					clusters = append(clusters, vm.ClusterRef)
				}
			}
			c := clusters[s.rnd.IntN(len(clusters))]
			old := s.truth.zones[key{v.Name, c}]
			now := fmt.Sprintf("zone-%s-%d", v.Name, s.rnd.IntN(1000))
			s.truth.mu.Unlock()
			if err := v.Untag(ctx, "k8s-zone", old, c); err != nil {
				return nil, err
			}
			if err := v.Tag(ctx, "k8s-zone", now, c); err != nil {
				return nil, err
			}
			s.truth.mu.Lock()
			s.truth.zones[key{v.Name, c}] = now
			s.truth.mu.Unlock()
			s.truth.recomputeZones()
			return nil, nil
		}},
		// The CCM user's permission on a Node VM removed, then granted
		// again: the VM leaves views and searches, and a read of its
		// reference is NoPermission. Its Node must stay (the invariant:
		// no Node of an existing VM deleted).
		{"permission on a VM removed", 2, func(ctx context.Context, s *soak) (*revert, error) {
			n, ok := s.pickVM()
			if !ok {
				return nil, errSkip
			}
			v := s.fleet.VCenter(n.vc)
			v.Hide(n.ref)
			return s.after(10, 40, "permission on "+n.name+" granted again", func(context.Context) error {
				v.Unhide(n.ref)
				s.release("vm/" + n.name)
				return nil
			}), nil
		}},
		{"VM destroyed", 1, func(ctx context.Context, s *soak) (*revert, error) {
			n, ok := s.pickVM()
			if !ok {
				return nil, errSkip
			}
			if existing := s.truth.existing(); existing < 8 {
				s.release("vm/" + n.name)
				return nil, errSkip // keep most Nodes
			}
			defer s.release("vm/" + n.name)
			s.truth.update(n.name, func(r *nodeVM) { r.exists = false })
			s.truth.gone(n.vc, n.ref)
			return nil, s.destroyInGroups(ctx, n.vc, n.ref)
		}},
		{"leader killed", 2, func(ctx context.Context, s *soak) (*revert, error) {
			if !s.hold("ccm") {
				return nil, errSkip
			}
			// The leader, unless it is the observer or the faults end
			// soon (a new leader's role change would reset the observer's
			// baseline): then a standby that is not the observer.
			slot := s.leader()
			if slot == observer || time.Until(s.faultsEnd) < quietEnd {
				slot = s.rnd.IntN(observer)
				if slot == s.leader() {
					s.release("ccm")
					return nil, errSkip
				}
			}
			s.mu.Lock()
			p := s.ccms[slot]
			s.killedAt = append(s.killedAt, time.Now())
			s.mu.Unlock()
			p.Kill()
			return s.after(2, 8, fmt.Sprintf("replica %d restarted", slot), func(context.Context) error {
				defer s.release("ccm")
				return s.startCCM(slot)
			}), nil
		}},
		{"vCenter removed from the config", 1, func(ctx context.Context, s *soak) (*revert, error) {
			if !s.hold("ccm") {
				return nil, errSkip
			}
			if s.countOf(s.faults, "vCenter removed from the config") > 0 || time.Until(s.faultsEnd) < quietEnd+30*time.Second {
				s.release("ccm")
				return nil, errSkip // once per run, early: every replica restarts twice, the observer too
			}
			v := s.randomVCenter()
			if err := s.writeConfig(v.Name); err != nil {
				return nil, err
			}
			if err := s.restartAll(); err != nil {
				return nil, err
			}
			return s.after(20, 30, v.Name+" back in the config", func(context.Context) error {
				defer s.release("ccm")
				if err := s.writeConfig(""); err != nil {
					return err
				}
				return s.restartAll()
			}), nil
		}},
	}
}

// inject applies faults at random for duration, checking sessions as it
// goes, and reverts each when its time comes.
func (s *soak) inject(ctx context.Context, duration time.Duration) error {
	kinds := s.faultKinds()
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	end := time.Now().Add(duration)
	s.faultsEnd = end
	next := time.Now()
	for time.Now().Before(end) {
		if err := s.dueReverts(ctx, time.Now()); err != nil {
			return err
		}
		s.checkSessions(ctx)
		s.sampleResources("baseline")
		if time.Now().After(next) {
			r := s.rnd.IntN(total)
			for _, k := range kinds {
				if r -= k.weight; r < 0 {
					rev, err := k.apply(ctx, s)
					if errors.Is(err, errSkip) {
						break // what it needs is taken by another fault
					}
					if err != nil {
						return fmt.Errorf("fault %q: %w", k.name, err)
					}
					s.journal("fault %s", k.name)
					s.count(s.faults, k.name)
					if rev != nil {
						s.reverts = append(s.reverts, *rev)
					}
					break
				}
			}
			next = time.Now().Add(time.Duration(1000+s.rnd.IntN(2000)) * time.Millisecond)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// after schedules an undo in lo..hi seconds.
func (s *soak) after(lo, hi int, what string, fn func(context.Context) error) *revert {
	d := time.Duration(lo)*time.Second + time.Duration(s.rnd.IntN((hi-lo)*1000+1))*time.Millisecond
	return &revert{at: time.Now().Add(d), what: what, fn: fn}
}

func (s *soak) dueReverts(ctx context.Context, now time.Time) error {
	sort.SliceStable(s.reverts, func(i, j int) bool { return s.reverts[i].at.Before(s.reverts[j].at) })
	for len(s.reverts) > 0 && !s.reverts[0].at.After(now) {
		r := s.reverts[0]
		s.reverts = s.reverts[1:]
		if err := r.fn(ctx); err != nil {
			return fmt.Errorf("undo %q: %w", r.what, err)
		}
		s.journal("undone: %s", r.what)
	}
	return nil
}

// revertAll undoes every pending fault now.
func (s *soak) revertAll(ctx context.Context) {
	for len(s.reverts) > 0 {
		if err := s.dueReverts(ctx, time.Now().Add(time.Hour)); err != nil {
			s.fail("%v", err)
		}
	}
}

func (s *soak) hold(what string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[what] {
		return false
	}
	s.busy[what] = true
	return true
}

func (s *soak) release(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, what)
}

// pickVM picks a Node VM no other fault holds, and holds it.
func (s *soak) pickVM() (nodeVM, bool) {
	for range 5 {
		n, ok := s.truth.pick(s)
		if !ok {
			return n, false
		}
		if s.hold("vm/" + n.name) {
			s.journal("picked %s (%s %s)", n.name, n.vc, n.ref.Value)
			return n, true
		}
	}
	return nodeVM{}, false
}

func (s *soak) randomVCenter() *vcsim.VCenter {
	return s.fleet.VCenters[s.rnd.IntN(len(s.fleet.VCenters))]
}

// leader is the slot of the replica holding the lease (0 if unknown).
func (s *soak) leader() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := 0
	for i, p := range s.ccms {
		if p != nil && !p.Exited() && p.LogContains("Successfully acquired lease") {
			best = i
		}
	}
	return best
}

func (s *soak) restartAll() error {
	for i := range replicas {
		s.mu.Lock()
		p := s.ccms[i]
		s.mu.Unlock()
		if p != nil && !p.Exited() {
			p.Stop()
		}
		if err := s.startCCM(i); err != nil {
			return err
		}
	}
	return nil
}

// checkSessions: at most 2 SOAP sessions per vCenter per replica, the
// replicas killed within the session timeout (whose sessions the vCenter
// still holds) counted too.
func (s *soak) checkSessions(ctx context.Context) {
	s.mu.Lock()
	live := 0
	for _, p := range s.ccms {
		if p != nil && !p.Exited() {
			live++
		}
	}
	// Stopped replicas log out; killed ones leave sessions until expiry;
	// every start is counted like a kill, for restarts' overlap.
	recent := 0
	for _, at := range s.killedAt {
		if time.Since(at) < 2*sessionTimeout+10*time.Second {
			recent++
		}
	}
	s.mu.Unlock()
	limit := 2 * (live + recent + 1)
	for _, v := range s.fleet.VCenters {
		n, err := v.CountSessions(ctx)
		if err != nil {
			continue
		}
		s.count(s.checks, "session counts checked")
		if n > limit {
			s.fail("%s holds %d SOAP sessions of the CCM, more than %d (2 per replica, live or killed within the session timeout)", v.Name, n, limit)
		}
	}
}

// checkLogins: at most one rejected login per vCenter per replica within
// any loginBackoff window.
func (s *soak) checkLogins() {
	for _, v := range s.fleet.VCenters {
		failed := v.FailedLogins()
		for i := range failed {
			in := 0
			for _, at := range failed[i:] {
				if at.Sub(failed[i]) < loginBackoff {
					in++
				}
			}
			s.count(s.checks, "rejected-login windows checked")
			if in > replicas {
				s.fail("%s: %d rejected logins within %v from %s (at most one per replica)", v.Name, in, loginBackoff, failed[i].Format("15:04:05"))
			}
		}
	}
}

// destroyInGroups destroys a VM; in the stretched cluster, it leaves its
// VM group first, as an operator's cleanup would.
func (s *soak) destroyInGroups(ctx context.Context, vc string, ref types.ManagedObjectReference) error {
	if vc == s.truth.stretched.vc {
		for !s.hold("drs") {
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
		defer s.release("drs")
		if err := s.fleet.VCenter(vc).SetGroups(ctx, s.truth.stretched.ref, s.truth.vmGroups(), nil); err != nil {
			return err
		}
	}
	return destroy(ctx, s.fleet.VCenter(vc), ref)
}

// errSkip: the fault was not applied (what it needs is held by another).
var errSkip = errors.New("skipped")

func waitTask(ctx context.Context, start func(context.Context) (*object.Task, error)) error {
	task, err := start(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

func destroy(ctx context.Context, v *vcsim.VCenter, ref types.ManagedObjectReference) error {
	vm := object.NewVirtualMachine(v.Admin(), ref)
	_ = waitTask(ctx, vm.PowerOff) // may be off already
	return waitTask(ctx, vm.Destroy)
}

// report prints the faults injected and the checks made.
func (s *soak) report() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	b.WriteString("soak: faults injected:\n")
	total := 0
	for _, k := range sortedKeys(s.faults) {
		fmt.Fprintf(&b, "  %-40s %5d\n", k, s.faults[k])
		total += s.faults[k]
	}
	fmt.Fprintf(&b, "  %-40s %5d\nsoak: invariants checked:\n", "total", total)
	for _, k := range sortedKeys(s.checks) {
		fmt.Fprintf(&b, "  %-40s %5d\n", k, s.checks[k])
	}
	fmt.Fprintf(&b, "  %-40s %5d\n", "violations", len(s.failures))
	fmt.Print(b.String())
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// journal appends a timestamped line to the work directory's faults.log:
// what was done to whom and when, to read beside the replicas' logs.
func (s *soak) journal(format string, args ...any) {
	f, err := os.OpenFile(filepath.Join(s.work, "faults.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
