package vcenter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// TestPagesAgreeWithGovmomi: the inventory's pages and direct reads read
// through pages are what the SOAP client reads, for identities and
// details with guest.net (decoded by collectorxml), a field collectorxml does
// not read (govmomi's decoder) and faults.
func TestPagesAgreeWithGovmomi(t *testing.T) {
	m := simulator.VPX()
	defer m.Remove()
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	// What VMware Tools reports of a Node's VM, as the simulated fleet has it.
	for i, obj := range m.Map().All("VirtualMachine") {
		ip := fmt.Sprintf("10.0.0.%d", i+10)
		m.Map().AtomicUpdate(m.Service.Context, obj, []types.PropertyChange{{Name: "guest.net", Val: []types.GuestNicInfo{{
			Network: "VM Network", IpAddress: []string{ip, "fd00::1"}, Connected: true, DeviceConfigId: 4000, MacAddress: "00:50:56:00:00:01",
			IpConfig: &types.NetIpConfigInfo{IpAddress: []types.NetIpConfigInfoIpAddress{{IpAddress: ip, PrefixLength: 24, State: "preferred"}}},
		}}}, {Name: "config.extraConfig", Val: []types.BaseOptionValue{
			&types.OptionValue{Key: "guestinfo.metadata", Value: "bmV0d29yazoge30="},
			&types.OptionValue{Key: "guestinfo.metadata.encoding", Value: "base64"},
		}}})
	}
	err := m.Run(func(ctx context.Context, c *vim25.Client) error {
		p := newPages(c.Client, &Decoding{}, "vc", nopObserver{})
		fast := *c
		fast.RoundTripper = p

		v, err := view.NewManager(c).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine", "HostSystem"}, true)
		if err != nil {
			t.Fatal(err)
		}
		// read makes a property collector with the filter and returns the
		// objects of its first page, read by vc, ordered by reference.
		read := func(vc *vim25.Client, props map[string][]string) ([]types.ObjectUpdate, *property.Collector, error) {
			pc, err := property.DefaultCollector(c).Create(ctx)
			if err != nil {
				t.Fatal(err)
			}
			spec := types.PropertyFilterSpec{ObjectSet: []types.ObjectSpec{{Obj: v.Reference(), Skip: types.NewBool(true),
				SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{Type: "ContainerView", Path: "view"}}}}}
			for kind, paths := range props {
				spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: kind, PathSet: paths})
			}
			if _, err := pc.CreateFilter(ctx, types.CreateFilter{Spec: spec}); err != nil {
				t.Fatal(err)
			}
			secs := int32(0)
			res, err := methods.WaitForUpdatesEx(ctx, vc, &types.WaitForUpdatesEx{This: pc.Reference(),
				Options: &types.WaitOptions{MaxWaitSeconds: &secs}})
			if err != nil {
				return nil, pc, err
			}
			objs := res.Returnval.FilterSet[0].ObjectSet
			slices.SortFunc(objs, func(a, b types.ObjectUpdate) int { return strings.Compare(a.Obj.Value, b.Obj.Value) })
			return objs, pc, nil
		}

		for _, tc := range []struct {
			name       string
			props      map[string][]string
			fast, slow int64
		}{
			{"identities", map[string][]string{
				"VirtualMachine": {"name", "config.uuid", "config.template", "runtime.connectionState"},
				"HostSystem":     {"name", "parent"}}, 1, 0},
			{"details", map[string][]string{
				"VirtualMachine": {"name", "guest.net", "runtime.powerState", "runtime.host", "config.hardware.numCPU",
					`config.extraConfig["guestinfo.metadata"]`, `config.extraConfig["guestinfo.metadata.encoding"]`}}, 1, 0},
			{"a field collectorxml does not read", map[string][]string{
				"VirtualMachine": {"name", "config.hardware.device"}}, 0, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before, slowBefore := p.fast.Load(), p.slow.Load()
				want, _, err := read(c, tc.props)
				if err != nil {
					t.Fatal(err)
				}
				got, _, err := read(&fast, tc.props)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("differs from the SOAP client's (-soap client +pages):\n%s", diff)
				}
				if n, s := p.fast.Load()-before, p.slow.Load()-slowBefore; n != tc.fast || s != tc.slow {
					t.Errorf("%d pages decoded by collectorxml and %d by govmomi, want %d and %d", n, s, tc.fast, tc.slow)
				}
				if len(got) == 0 {
					t.Error("no objects read")
				}
				for _, ch := range got[0].ChangeSet {
					if o, ok := ch.Val.(types.OptionValue); ok && o.Value == nil {
						t.Errorf("%s read without its value", ch.Name)
					}
				}
			})
		}

		t.Run("direct read", func(t *testing.T) {
			refs, err := v.Find(ctx, []string{"VirtualMachine"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			spec := types.PropertyFilterSpec{PropSet: []types.PropertySpec{{Type: "VirtualMachine",
				PathSet: []string{"name", "config.uuid", "guest.net", "config.hardware.memoryMB", "runtime.powerState",
					`config.extraConfig["guestinfo.metadata"]`}}}}
			for _, r := range refs {
				spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: r})
			}
			// Pages of 2: the rest is read by ContinueRetrievePropertiesEx.
			req := types.RetrievePropertiesEx{This: c.ServiceContent.PropertyCollector, SpecSet: []types.PropertyFilterSpec{spec},
				Options: types.RetrieveOptions{MaxObjects: 2}}
			before, slowBefore := p.fast.Load(), p.slow.Load()
			want, err := mo.RetrievePropertiesEx(ctx, c, req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := mo.RetrievePropertiesEx(ctx, &fast, req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("differs from the SOAP client's (-soap client +pages):\n%s", diff)
			}
			if len(got) < 3 {
				t.Fatalf("%d VMs read, want more than a page", len(got))
			}
			if n, s := p.fast.Load()-before, p.slow.Load()-slowBefore; n != int64(len(got)+1)/2 || s != 0 {
				t.Errorf("%d answers decoded by collectorxml and %d by govmomi, want %d and 0", n, s, (len(got)+1)/2)
			}
		})

		t.Run("fault", func(t *testing.T) {
			_, pc, _ := read(c, map[string][]string{"VirtualMachine": {"name"}})
			if err := pc.Destroy(ctx); err != nil {
				t.Fatal(err)
			}
			secs := int32(0)
			req := &types.WaitForUpdatesEx{This: pc.Reference(), Options: &types.WaitOptions{MaxWaitSeconds: &secs}}
			_, want := methods.WaitForUpdatesEx(ctx, c, req)
			_, got := methods.WaitForUpdatesEx(ctx, &fast, req)
			if got == nil || want == nil || got.Error() != want.Error() {
				t.Fatalf("error %v, want the SOAP client's %v", got, want)
			}
			if !fault.Is(got, &types.ManagedObjectNotFound{}) {
				t.Errorf("error %v is not the vCenter's ManagedObjectNotFound fault", got)
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPagesDeclinedLate: an answer collectorxml declines at its very end
// (here a comment after the envelope) is govmomi's decoding alone, not
// added to what collectorxml read.
func TestPagesDeclinedLate(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		res     func() soap.HasFault
	}{
		{"vcenter-retrieve.xml", func() soap.HasFault { return &methods.RetrievePropertiesExBody{} }},
		{"vcenter-continue.xml", func() soap.HasFault { return &methods.ContinueRetrievePropertiesExBody{} }},
		{"vcenter-identity.xml", func() soap.HasFault { return &methods.WaitForUpdatesExBody{} }},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "collectorxml", "testdata", tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			body = append(body, "<!-- after the envelope -->\n"...)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
			defer srv.Close()
			u, _ := url.Parse(srv.URL + "/sdk")
			sc := soap.NewClient(u, true)
			req := &methods.RetrievePropertiesExBody{Req: &types.RetrievePropertiesEx{}}
			want, got := tc.res(), tc.res()
			if err := sc.RoundTrip(context.Background(), req, want); err != nil {
				t.Fatal(err)
			}
			p := newPages(sc, &Decoding{}, "vc", nopObserver{})
			if err := p.RoundTrip(context.Background(), req, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("differs from the SOAP client's (-soap client +pages):\n%s", diff)
			}
			if p.slow.Load() != 1 {
				t.Errorf("%d answers decoded by govmomi, want 1", p.slow.Load())
			}
		})
	}
}

// TestPagesHTTPStatus: an HTTP status other than 200 and 500 is the
// error the SOAP client returns, temporary for a 502 as there.
func TestPagesHTTPStatus(t *testing.T) {
	for _, code := range []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusUnauthorized} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
		u, _ := url.Parse(srv.URL + "/sdk")
		sc := soap.NewClient(u, true)
		req := &types.WaitForUpdatesEx{This: types.ManagedObjectReference{Type: "PropertyCollector", Value: "pc"}}
		var wantRes, gotRes methods.WaitForUpdatesExBody
		want := sc.RoundTrip(context.Background(), &methods.WaitForUpdatesExBody{Req: req}, &wantRes)
		got := newPages(sc, &Decoding{}, "vc", nopObserver{}).RoundTrip(context.Background(), &methods.WaitForUpdatesExBody{Req: req}, &gotRes)
		srv.Close()
		if got == nil || want == nil || got.Error() != want.Error() {
			t.Errorf("%d: error %v, want the SOAP client's %v", code, got, want)
			continue
		}
		if g, w := vim25.IsTemporaryNetworkError(got), vim25.IsTemporaryNetworkError(want); g != w {
			t.Errorf("%d: temporary %v, the SOAP client's %v", code, g, w)
		}
	}
}

// countingObserver counts the decodes by decoder and the mismatches.
type countingObserver struct {
	nopObserver
	mu         sync.Mutex
	decoded    map[string]int
	mismatches int
}

func (o *countingObserver) Decoded(_, decoder string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.decoded == nil {
		o.decoded = map[string]int{}
	}
	o.decoded[decoder]++
}

func (o *countingObserver) DecodeMismatch(string) { o.mu.Lock(); o.mismatches++; o.mu.Unlock() }

// TestPagesShadow: one page in ShadowEvery is decoded by both decoders and
// compared. Agreeing, the fast one counts; disagreeing (a fault made in
// the fast decoder's result here), govmomi's answer is used, the mismatch
// counted, and the fast decoder switched off for every later page of
// every client of the policy. The operator's switch turns it off from the
// start.
func TestPagesShadow(t *testing.T) {
	body, err := os.ReadFile("../collectorxml/testdata/vcenter-details-typed.xml")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/sdk")
	sc := soap.NewClient(u, true)
	req := &methods.WaitForUpdatesExBody{Req: &types.WaitForUpdatesEx{This: types.ManagedObjectReference{Type: "PropertyCollector", Value: "pc"}}}
	var want methods.WaitForUpdatesExBody
	if err := sc.RoundTrip(context.Background(), req, &want); err != nil {
		t.Fatal(err)
	}
	round := func(p *pages) methods.WaitForUpdatesExBody {
		t.Helper()
		var got methods.WaitForUpdatesExBody
		if err := p.RoundTrip(context.Background(), req, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.Res, got.Res); diff != "" {
			t.Fatalf("differs from the SOAP client's (-soap client +pages):\n%s", diff)
		}
		return got
	}

	policy := &Decoding{ShadowEvery: 2}
	obs := &countingObserver{}
	p := newPages(sc, policy, "vc-a", obs)
	for range 4 {
		round(p)
	}
	if obs.decoded["fast"] != 4 || obs.mismatches != 0 || !policy.Enabled() {
		t.Fatalf("agreeing: %v, %d mismatches, enabled %v; want 4 fast pages", obs.decoded, obs.mismatches, policy.Enabled())
	}
	p.corrupt = func(res any) { res.(*types.WaitForUpdatesExResponse).Returnval.Version = "forged" }
	round(p) // page 5, shadowed (1, 3, 5 are): the forged version is caught, govmomi's answer used
	if obs.mismatches != 1 || policy.Enabled() {
		t.Fatalf("after a disagreement: %d mismatches, enabled %v", obs.mismatches, policy.Enabled())
	}
	round(p)                                   // page 6: govmomi's decoder alone
	other := newPages(sc, policy, "vc-b", obs) // another vCenter's client, same process
	round(other)
	if obs.decoded["govmomi"] != 3 || obs.decoded["fast"] != 4 {
		t.Errorf("decoded %v; want the shadowed page and every later one by govmomi", obs.decoded)
	}

	off := &countingObserver{}
	round(newPages(sc, &Decoding{Off: true}, "vc-a", off))
	if off.decoded["govmomi"] != 1 || off.decoded["fast"] != 0 {
		t.Errorf("switched off: %v", off.decoded)
	}
}
