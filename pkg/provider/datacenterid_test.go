package provider_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDatacenterByID: a datacenter named in datacenters by its managed
// object ID (datacenter-21), as the reference resolves it, in YAML and in
// INI, on a simulated vCenter with two datacenters: the VMs of that
// datacenter are found, under its name; the other datacenter's are not in
// scope; a Node labelled with the datacenter's name is in scope.
func TestDatacenterByID(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	f, err := vcsim.Start(ctx, vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1", "dc-2"}, Hosts: 1, VMs: 2})
	must.OK(t, err)
	t.Cleanup(f.Close)
	v := f.VCenter("vc-a")
	id := v.Datacenter("dc-2").Value
	if id == "" || id == "dc-2" {
		t.Fatalf("datacenter dc-2 has ID %q", id)
	}
	for format, text := range map[string]string{
		"yaml": fmt.Sprintf("vcenter:\n  vc-a:\n    server: %s\n    port: %d\n    caFile: %s\n    user: %s\n    password: %s\n    datacenters: [%s]\n",
			v.Host, v.Port, v.CAFile, strconv.Quote(v.User), strconv.Quote(v.Password), id),
		"conf": fmt.Sprintf("[VirtualCenter \"vc-a\"]\nserver = %s\nport = %d\nca-file = %s\nuser = %s\npassword = %s\ndatacenters = %s\n",
			v.Host, v.Port, v.CAFile, strconv.Quote(v.User), strconv.Quote(v.Password), id),
	} {
		t.Run(format, func(t *testing.T) {
			cfg, _, err := config.Parse("vsphere."+format, []byte(text), config.Options{})
			must.OK(t, err)
			p, err := provider.New(cfg, provider.Options{})
			must.OK(t, err)
			must.OK(t, p.Start(ctx, nil))
			t.Cleanup(p.Close)
			must.OK(t, p.WaitForSync(ctx))
			if got := p.Inventory().Index("vc-a").DatacenterNames(); len(got) != 1 || got[0] != "dc-2" {
				t.Errorf("datacenters in scope %v, want [dc-2]", got)
			}
			found := 0
			for _, vm := range v.VMs {
				got, err := p.FindVM(ctx, node(vm))
				switch {
				case vm.Datacenter == "dc-2" && (err != nil || got.Datacenter != "dc-2"):
					t.Errorf("%s in dc-2: %+v, %v", vm.Name, got, err)
				case vm.Datacenter == "dc-2":
					found++
				case !errors.Is(err, inventory.ErrNotFound):
					t.Errorf("%s in dc-1, out of scope: %+v, %v", vm.Name, got, err)
				}
			}
			if found == 0 {
				t.Fatal("no VM in dc-2")
			}
			labelled := func(dc string) *v1.Node {
				return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{provider.LabelVCenter: "vc-a", provider.LabelDatacenter: dc}}}
			}
			if ex := p.Explain(ctx, provider.ExplainOptions{}); len(ex.Scope) != 1 || ex.Scope[0] != "vc-a: "+id+" (dc-2)" {
				t.Errorf("explain's scope %q, want the ID and the name", ex.Scope)
			}
			if err := p.InScope(labelled("dc-2")); err != nil {
				t.Errorf("a Node of dc-2: %v", err)
			}
			if err := p.InScope(labelled("dc-1")); err == nil {
				t.Error("a Node of dc-1 is in scope")
			}
		})
	}
}
