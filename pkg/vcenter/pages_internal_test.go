package vcenter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// TestPagesAgreeWithGovmomi: the inventory's pages read through pages are
// what the SOAP client reads, for identities (decoded by updateset),
// details with guest.net (declined: govmomi's decoder) and faults.
func TestPagesAgreeWithGovmomi(t *testing.T) {
	simulator.Test(func(ctx context.Context, c *vim25.Client) {
		p := newPages(c.Client)
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
				"VirtualMachine": {"name", "guest.net", "runtime.powerState", "runtime.host"}}, 0, 1},
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
					t.Errorf("%d pages decoded by updateset and %d by govmomi, want %d and %d", n, s, tc.fast, tc.slow)
				}
				if len(got) == 0 {
					t.Error("no objects read")
				}
			})
		}

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
	})
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
		got := newPages(sc).RoundTrip(context.Background(), &methods.WaitForUpdatesExBody{Req: req}, &gotRes)
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
