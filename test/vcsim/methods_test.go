package vcsim

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
)

// TestCountMethods: the requests a client makes are counted by method on
// the server; the administrator's (tagging here) are not.
func TestCountMethods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx, Spec{Name: "vc-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := f.VCenter("vc-a")
	a.CountMethods()
	c, err := login(ctx, t, a, a.User, a.Password)
	if err != nil {
		t.Fatal(err)
	}
	vm := a.VMs[0]
	for range 2 {
		if _, err := object.NewSearchIndex(c).FindByUuid(ctx, nil, vm.UUID, true, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Tag(ctx, "k8s-zone", "zone-a", vm.ClusterRef); err != nil { // the administrator's
		t.Fatal(err)
	}
	rc := rest.NewClient(c)
	if err := rc.Login(ctx, url.UserPassword(a.User, a.Password)); err != nil {
		t.Fatal(err)
	}
	if _, err := tags.NewManager(rc).ListAttachedTagsOnObjects(ctx, []mo.Reference{vm.ClusterRef}); err != nil {
		t.Fatal(err)
	}
	got := a.Methods()
	for _, m := range []string{"FindByUuid", "Login", "RetrieveServiceContent",
		"REST POST /rest/com/vmware/cis/session", "REST POST /rest/com/vmware/cis/tagging/tag-association?~action=list-attached-tags-on-objects"} {
		if got[m] == 0 {
			t.Errorf("%s not counted: %v", m, got)
		}
	}
	if got["FindByUuid"] != 2 {
		t.Errorf("FindByUuid counted %d times, want 2", got["FindByUuid"])
	}
	for m := range got {
		if m == "REST POST /rest/com/vmware/cis/tagging/tag-association/{id}?~action=attach" || m == "REST POST /rest/com/vmware/cis/tagging/tag" {
			t.Errorf("the administrator's request %s counted", m)
		}
	}
	var total int64
	for _, n := range got {
		total += n
	}
	if total > 12 {
		t.Errorf("%d requests counted, more than the client made: %v", total, got)
	}
}

func TestSOAPOperation(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="x"><soapenv:Body><RetrievePropertiesEx xmlns="urn:vim25"><_this>x</_this></RetrievePropertiesEx></soapenv:Body></soapenv:Envelope>`, "RetrievePropertiesEx"},
		{`<Envelope><Body><vim:WaitForUpdatesEx xmlns:vim="urn:vim25"/></Body></Envelope>`, "WaitForUpdatesEx"},
		{`<Envelope><Header/></Envelope>`, "unknown"},
		{``, "unknown"},
		{`<Body>`, "unknown"},
	} {
		if got := SOAPOperation([]byte(c.body)); got != c.want {
			t.Errorf("SOAPOperation(%q) = %q, want %q", c.body, got, c.want)
		}
	}
	if got := RESTRoute("/rest/com/vmware/cis/tagging/tag/id:urn:vmomi:InventoryServiceTag:1:GLOBAL", "x"); got != "/rest/com/vmware/cis/tagging/tag/{id}?~action=x" {
		t.Errorf("RESTRoute: %q", got)
	}
}

func FuzzSOAPOperation(f *testing.F) {
	f.Add([]byte(`<Envelope><Body><Login xmlns="urn:vim25"/></Body></Envelope>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if SOAPOperation(body) == "" {
			t.Fatal("empty operation name")
		}
	})
}
