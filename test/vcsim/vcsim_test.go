package vcsim

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

func login(ctx context.Context, t *testing.T, v *VCenter, user, pass string) (*vim25.Client, error) {
	t.Helper()
	sc := soap.NewClient(v.URL(), false)
	if err := sc.SetRootCAs(v.CAFile); err != nil {
		t.Fatal(err)
	}
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, err
	}
	return c, session.NewManager(c).Login(ctx, url.UserPassword(user, pass))
}

func TestFleet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx,
		Spec{Name: "vc-a", Datacenters: []string{"dc-1", "dc-2"}, Clusters: 2},
		Spec{Name: "vc-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	vms := f.VMs()
	if want := 2*2*2 + 2; len(vms) != want {
		t.Fatalf("got %d VMs, want %d", len(vms), want)
	}
	uuids, names, ips := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, vm := range vms {
		if uuids[vm.UUID] || names[vm.Name] || ips[vm.IPv4] || ips[vm.IPv6] {
			t.Errorf("VM %+v repeats a UUID, name or IP", vm)
		}
		uuids[vm.UUID], names[vm.Name], ips[vm.IPv4], ips[vm.IPv6] = true, true, true, true
	}

	a := f.VCenter("vc-a")
	c, err := login(ctx, t, a, a.User, a.Password)
	if err != nil {
		t.Fatalf("login through the front with the spec's credentials: %v", err)
	}
	want := a.VMs[3]
	ref, err := object.NewSearchIndex(c).FindByUuid(ctx, nil, want.UUID, true, nil)
	if err != nil || ref == nil || ref.Reference() != want.Ref {
		t.Fatalf("FindByUuid(%s) = %v, %v; want %v", want.UUID, ref, err, want.Ref)
	}
	var vm mo.VirtualMachine
	if err := object.NewVirtualMachine(c, want.Ref).Properties(ctx, want.Ref,
		[]string{"name", "guest", "runtime.host"}, &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Name != want.Name || vm.Guest.HostName != want.Name || vm.Guest.IpAddress != want.IPv4 ||
		len(vm.Guest.Net) != 1 || vm.Guest.Net[0].IpAddress[1] != want.IPv6 || *vm.Runtime.Host != want.HostRef {
		t.Errorf("VM properties %+v do not match %+v", vm, want)
	}
	var dc mo.Datacenter
	dcs, err := object.NewRootFolder(c).Children(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dcNames []string
	for _, d := range dcs {
		if err := object.NewCommon(c, d.Reference()).Properties(ctx, d.Reference(), []string{"name"}, &dc); err != nil {
			t.Fatal(err)
		}
		dcNames = append(dcNames, dc.Name)
	}
	if len(dcNames) != 2 || dcNames[0] != "dc-1" || dcNames[1] != "dc-2" {
		t.Errorf("datacenters %v, want [dc-1 dc-2]", dcNames)
	}

	// A wrong password is rejected and counted on the server side.
	if _, err := login(ctx, t, a, a.User, "wrong"); err == nil {
		t.Fatal("login with a wrong password succeeded")
	}
	if n := len(a.FailedLogins()); n != 1 {
		t.Errorf("failed logins = %d, want 1", n)
	}
	a.SetPassword("rotated")
	if _, err := login(ctx, t, a, a.User, "rotated"); err != nil {
		t.Errorf("login with the new password: %v", err)
	}

	// Tags, read back with the batch call.
	if err := a.Tag(ctx, "k8s-zone", "zone-a", want.ClusterRef, want.HostRef); err != nil {
		t.Fatal(err)
	}
	rc := rest.NewClient(c)
	if err := rc.Login(ctx, url.UserPassword(a.User, "rotated")); err != nil {
		t.Fatal(err)
	}
	att, err := tags.NewManager(rc).ListAttachedTagsOnObjects(ctx, []mo.Reference{want.ClusterRef, want.HostRef})
	if err != nil || len(att) != 2 || len(att[0].TagIDs) != 1 {
		t.Errorf("ListAttachedTagsOnObjects = %+v, %v", att, err)
	}

	// Down refuses connections, Up brings the same state back.
	if err := a.SetMode(Down); err != nil {
		t.Fatal(err)
	}
	if _, err := login(ctx, t, a, a.User, "rotated"); err == nil {
		t.Fatal("login while down succeeded")
	}
	if err := a.SetMode(Up); err != nil {
		t.Fatal(err)
	}
	if _, err := login(ctx, t, a, a.User, "rotated"); err != nil {
		t.Fatalf("login after Up: %v", err)
	}
	// Hung never answers: the client's own deadline ends the call.
	if err := a.SetMode(Hung); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer hcancel()
	start := time.Now()
	_, err = about(hctx, c)
	if err == nil {
		t.Fatal("call to a hung vCenter succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("hung call took %v", d)
	}
	if err := a.SetMode(Up); err != nil {
		t.Fatal(err)
	}
}

func about(ctx context.Context, c *vim25.Client) (*types.AboutInfo, error) {
	var si mo.ServiceInstance
	err := object.NewCommon(c, c.ServiceContent.RootFolder).Properties(ctx, vim25.ServiceInstance, []string{"content"}, &si)
	return &si.Content.About, err
}
