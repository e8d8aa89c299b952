package vcsim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// TestAbandonedPollEnds drives the simulator as a faulted front does: a
// long poll's connection is cut while the server still serves it, and the
// client polls the same collector again. The abandoned poll ends on the
// server long before its MaxWaitSeconds (without the guard it would run on
// for 50 s, and two polls together race on the collector's pending
// updates), and the new poll gets the next update.
func TestAbandonedPollEnds(t *testing.T) {
	ctx, v, c, pc := hostNameCollector(t)
	vm := v.VMs[0]
	first, err := methods.WaitForUpdatesEx(ctx, c, &types.WaitForUpdatesEx{This: pc.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	long := func(ctx context.Context) (*types.WaitForUpdatesExResponse, error) {
		wait := int32(50)
		return methods.WaitForUpdatesEx(ctx, c, &types.WaitForUpdatesEx{This: pc.Reference(),
			Version: first.Returnval.Version, Options: &types.WaitOptions{MaxWaitSeconds: &wait}})
	}

	cut := make(chan error, 1)
	go func() { _, err := long(ctx); cut <- err }()
	poll.True(t, "the first long poll to reach the simulator", func() bool { return v.guard.polls() == 1 })
	// The front cuts the connection (as a fault does); the server side stays.
	if err := v.SetMode(Down); err != nil {
		t.Fatal(err)
	}
	if err := <-cut; err == nil {
		t.Fatal("the cut long poll returned no error")
	}
	if err := v.SetMode(Up); err != nil {
		t.Fatal(err)
	}
	// Well before its MaxWaitSeconds (50 s): the guard ended it.
	poll.True(t, "the abandoned poll to end on the server", func() bool { return v.guard.polls() == 0 })
	type result struct {
		res *types.WaitForUpdatesExResponse
		err error
	}
	again := make(chan result, 1)
	go func() { res, err := long(ctx); again <- result{res, err} }()
	// Changes until the new poll reports one; an update the abandoned poll
	// took before it ended is lost, as the simulator loses it.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case r := <-again:
			if r.err != nil {
				t.Fatalf("the second poll: %v", r.err)
			}
			if r.res.Returnval == nil || len(r.res.Returnval.FilterSet) == 0 {
				t.Fatalf("the second poll returned no update: %+v", r.res)
			}
			return
		case <-tick.C:
			v.SetGuest(vm.Ref, fmt.Sprintf("renamed-%d", i), nil)
		case <-ctx.Done():
			t.Fatal("the second poll never returned")
		}
	}
}

// TestPollGuard checks the guard's two rules with a stand-in for the
// simulator: a second poll of a collector reaches it only after the first
// returned, and a poll whose client is gone is cancelled in its session.
func TestPollGuard(t *testing.T) {
	type call struct {
		method, cookie string
		done           chan struct{} // closed to let a poll return
	}
	calls := make(chan call, 10)
	g := newPollGuard(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c := call{method: "other", cookie: r.Header.Get("Cookie"), done: make(chan struct{})}
		switch {
		case strings.Contains(string(b), "<WaitForUpdatesEx"):
			c.method = "wait"
		case strings.Contains(string(b), "<CancelWaitForUpdates"):
			c.method = "cancel"
			close(c.done)
		case strings.Contains(string(b), "<Logout"):
			c.method = "logout"
			close(c.done)
		}
		calls <- c
		<-c.done
	})
	poll := func(ctx context.Context, collector string) *http.Request {
		body := `<Envelope><Body><WaitForUpdatesEx xmlns="urn:vim25"><_this type="PropertyCollector">` +
			collector + `</_this><version>1</version></WaitForUpdatesEx></Body></Envelope>`
		r := httptest.NewRequest(http.MethodPost, "/sdk", strings.NewReader(body)).WithContext(ctx)
		r.Header.Set("Cookie", "vmware_soap_session=s1")
		return r
	}
	serve := func(r *http.Request) chan struct{} {
		done := make(chan struct{})
		go func() { g.ServeHTTP(httptest.NewRecorder(), r); close(done) }()
		return done
	}
	next := func(want string) call {
		t.Helper()
		select {
		case c := <-calls:
			if c.method != want {
				t.Fatalf("the simulator got %s, want %s", c.method, want)
			}
			return c
		case <-time.After(10 * time.Second):
			t.Fatalf("the simulator never got %s", want)
		}
		return call{}
	}

	// The first poll's client goes away: the guard cancels it in its session.
	gone, leave := context.WithCancel(context.Background())
	firstDone := serve(poll(gone, "pc-1"))
	first := next("wait")
	secondDone := serve(poll(context.Background(), "pc-1"))
	other := serve(poll(context.Background(), "pc-2")) // another collector is not held
	otherCall := next("wait")
	leave()
	if c := next("cancel"); c.cookie != "vmware_soap_session=s1" {
		t.Fatalf("cancel sent with cookie %q, want the poll's session", c.cookie)
	}
	select {
	case c := <-calls:
		t.Fatalf("the simulator got %s while the first poll still ran", c.method)
	default:
	}
	close(first.done) // the simulator ends the cancelled poll
	<-firstDone
	second := next("wait") // only now
	close(second.done)
	<-secondDone
	close(otherCall.done)
	<-other
	if n := g.polls(); n != 0 {
		t.Fatalf("%d polls still held", n)
	}

	// A logout first ends the session's polls (the simulator panics in a
	// poll whose filter went with its session).
	thirdDone := serve(poll(context.Background(), "pc-3"))
	third := next("wait")
	logout := httptest.NewRequest(http.MethodPost, "/sdk", strings.NewReader(`<Envelope><Body><Logout xmlns="urn:vim25"/></Body></Envelope>`))
	logout.Header.Set("Cookie", "vmware_soap_session=s1")
	logoutDone := serve(logout)
	next("cancel")
	close(third.done)
	<-thirdDone
	next("logout")
	<-logoutDone
}

// TestLostAnswerRedelivered: as a real vCenter, the simulator behind the
// guard answers a poll made again with the version of an answer its
// client never got with that answer, so no update is lost; every answer
// with updates carries a new version, and a poll with the newest version
// gets only what changed after.
func TestLostAnswerRedelivered(t *testing.T) {
	ctx, v, c, pc := hostNameCollector(t)
	vm := v.VMs[0]
	wait := func(version string, seconds int32) *types.UpdateSet {
		t.Helper()
		res, err := methods.WaitForUpdatesEx(ctx, c, &types.WaitForUpdatesEx{This: pc.Reference(), Version: version,
			Options: &types.WaitOptions{MaxWaitSeconds: &seconds}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Returnval
	}
	hostName := func(set *types.UpdateSet) string {
		for _, fs := range set.FilterSet {
			for _, o := range fs.ObjectSet {
				for _, ch := range o.ChangeSet {
					if ch.Name == "guest.hostName" {
						return fmt.Sprint(ch.Val)
					}
				}
			}
		}
		return ""
	}
	first := wait("", 0)
	v.SetGuest(vm.Ref, "renamed-1", nil)
	lost := wait(first.Version, 10) // its client "never got it"
	if lost == nil || hostName(lost) != "renamed-1" || lost.Version == first.Version {
		t.Fatalf("the change: %+v, want guest.hostName renamed-1 under a new version", lost)
	}
	again := wait(first.Version, 10)
	if again == nil || hostName(again) != "renamed-1" || again.Version != lost.Version {
		t.Fatalf("polled again with the version of the lost answer: %+v, want that answer (renamed-1, version %s)", again, lost.Version)
	}
	v.SetGuest(vm.Ref, "renamed-2", nil)
	next := wait(again.Version, 10)
	if next == nil || hostName(next) != "renamed-2" || next.Version == again.Version {
		t.Fatalf("polled with the newest version: %+v, want only the next change (renamed-2) under a new version", next)
	}
	if none := wait(next.Version, 0); none != nil {
		t.Fatalf("nothing changed since: %+v, want no update", none)
	}
	if none := wait(next.Version, 0); none != nil {
		t.Fatalf("polled again after an answer without updates: %+v, want none (nothing is replayed)", none)
	}
}

// hostNameCollector starts a vCenter of one VM, logs in, and creates a
// collector with a filter on the VM's guest.hostName.
func hostNameCollector(t *testing.T) (context.Context, *VCenter, *vim25.Client, *property.Collector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f, err := Start(ctx, Spec{Name: "vc-a", Hosts: 1, VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	v := f.VCenter("vc-a")
	c, err := login(ctx, t, v, v.User, v.Password)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := property.DefaultCollector(c).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.CreateFilter(ctx, types.CreateFilter{Spec: types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{Obj: v.VMs[0].Ref}},
		PropSet:   []types.PropertySpec{{Type: "VirtualMachine", PathSet: []string{"guest.hostName"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	return ctx, v, c, pc
}
