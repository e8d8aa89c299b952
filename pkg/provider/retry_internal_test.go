package provider

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// TestInitFailedWakesWhenProgressWasMissed: a failure recorded after the
// inventories made progress during its lookup (the page with its VM
// arrived while it failed) wakes Recovered's waiters, so that a pass
// after the record retries it; a failure without progress meanwhile, or
// a success, wakes nobody.
func TestInitFailedWakesWhenProgressWasMissed(t *testing.T) {
	p := &Provider{}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	now := func() mark { return mark{progress: p.progress.Load(), arrivals: p.arrivals.Load()} }
	ch := p.recovered.C()
	failed := errors.New("no VM")
	p.initFailed("quiet", failed, now())
	p.initFailed("ok", nil, now())
	if closed(ch) {
		t.Error("Recovered woken by a failure without progress during its lookup")
	}

	at := now()
	p.progress.Add(1) // a page arrived while the lookup failed
	p.initFailed("missed", failed, at)
	if !closed(ch) {
		t.Error("Recovered not woken by a failure that missed progress")
	}

	ch = p.recovered.C()
	at = now()
	p.arrivals.Add(1) // a VM entered a vCenter's scope meanwhile
	p.initFailed("missed arrival", failed, at)
	if !closed(ch) {
		t.Error("Recovered not woken by a failure that missed an arrival")
	}
}

// TestFailedInitsTake: a failed Node is returned once its lookup is
// answerable and the inventories made progress after its lookup began;
// once returned, it is not returned again; a success forgets it; a Node
// no longer waiting is forgotten.
func TestFailedInitsTake(t *testing.T) {
	var f failedInits
	node := func(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	a, b, c, d := node("a"), node("b"), node("c"), node("d")
	at := func(progress uint64) mark { return mark{progress: progress} }
	f.set("a", true, failure{at: at(1)})
	f.set("b", true, failure{at: at(2)})
	f.set("c", true, failure{at: at(1)})
	f.set("c", false, failure{at: at(1)}) // succeeded since
	f.set("d", true, failure{at: at(1)})
	yes := func(*v1.Node, bool, bool) bool { return true }
	names := func(ns []*v1.Node) (out []string) {
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}

	if got := names(f.take([]*v1.Node{a, b, c, d}, at(1), yes)); len(got) != 0 {
		t.Errorf("no progress since any failure: %v", got)
	}
	if got := names(f.take([]*v1.Node{a, b, c, d}, at(2), func(n *v1.Node, _, _ bool) bool { return n.Name != "d" })); len(got) != 1 || got[0] != "a" {
		t.Errorf("progress 2: %v, want [a] (b failed at 2, c succeeded, d not answerable)", got)
	}
	if got := names(f.take([]*v1.Node{a, b, d}, at(3), yes)); len(got) != 2 || got[0] != "b" || got[1] != "d" {
		t.Errorf("progress 3: %v, want [b d] (a was returned already)", got)
	}
	f.set("gone", true, failure{at: at(1)})
	f.take([]*v1.Node{a}, at(1), yes)
	if got := names(f.take([]*v1.Node{node("gone")}, at(5), yes)); len(got) != 0 {
		t.Errorf("a Node forgotten when no longer waiting was returned: %v", got)
	}

	// Arrivals alone: due is told there was no progress, and whether the
	// Node's lookup found no VM, and decides.
	f.set("e", true, failure{at: mark{progress: 3, arrivals: 1}, missed: true})
	f.set("f", true, failure{at: mark{progress: 3, arrivals: 1}})
	var told [][2]bool
	got := names(f.take([]*v1.Node{node("e"), node("f")}, mark{progress: 3, arrivals: 2}, func(_ *v1.Node, progressed, missed bool) bool {
		told = append(told, [2]bool{progressed, missed})
		return false
	}))
	if want := [][2]bool{{false, true}, {false, false}}; len(got) != 0 || !slices.Equal(told, want) {
		t.Errorf("an arrival only: returned %v, due told %v; want none returned, due told %v", got, told, want)
	}
}

// TestLookupMissed: a failure whose lookup found no VM, for certain or with a
// vCenter that could not answer, is one a VM becoming findable can mend;
// an ambiguous VM, or a VM found without an address, is not.
func TestLookupMissed(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"found nowhere", &nodeNotFound{node: "n", misses: []string{"no VM"}}, true},
		{"providerID's VM found nowhere", fmt.Errorf("node n (providerID vsphere://x): %w", &inventory.NotFoundError{Key: "x"}), true},
		{"a vCenter down", fmt.Errorf("node n: %w", &inventory.IncompleteError{Key: "x", Causes: []error{errors.New("vc-b is down")}}), true},
		{"ambiguous", fmt.Errorf("node n: %w", &inventory.AmbiguousError{Key: "x"}), false},
		{"no address", errors.New("node n (VM vc-a/dc-1/vm-1): no address in nodes.internalNetworkSubnetCidr"), false},
	} {
		if got := lookupMissed(c.err); got != c.want {
			t.Errorf("%s: missed %v, want %v", c.name, got, c.want)
		}
	}
}
