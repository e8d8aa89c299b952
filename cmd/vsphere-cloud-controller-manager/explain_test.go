package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// TestTopologyExplain runs `topology explain` on a stretched fleet with one
// conflicting cluster and one untagged datacenter.
func TestTopologyExplain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "site-a", Datacenters: []string{"dc-east", "dc-lab"}, Hosts: 1, VMs: 2},
		vcsim.Spec{Name: "site-b", Datacenters: []string{"dc-east"}, Hosts: 1, VMs: 2},
		vcsim.Spec{Name: "site-c", Datacenters: []string{"dc-west"}, Hosts: 1, VMs: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var conflict, untagged vcsim.VM
	for _, v := range f.VCenters {
		for _, vm := range v.VMs {
			if vm.Datacenter == "dc-lab" {
				untagged = vm
				continue
			}
			tag(t, ctx, v, "k8s-zone", "zone-"+vm.Cluster, vm.ClusterRef)
			tag(t, ctx, v, "k8s-region", "region-"+v.Name, vm.ClusterRef)
		}
	}
	conflict = f.VCenter("site-c").VMs[0]
	tag(t, ctx, f.VCenter("site-c"), "k8s-zone", "zone-second", conflict.ClusterRef)

	path := filepath.Join(t.TempDir(), "vsphere.yaml")
	text := f.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 4s\nlabels:\n  zone: k8s-zone\n  region: k8s-region\n", nil)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCmd(t, nil, "topology", "explain", "--cloud-config", path)
	if code != 3 {
		t.Fatalf("exit %d, want 3 (problems found)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Log(out)
	for _, vm := range f.VMs() {
		line := lineOf(out, vm.Name+" ")
		if line == "" {
			t.Errorf("no row for %s", vm.Name)
			continue
		}
		switch {
		case vm.Datacenter == untagged.Datacenter, vm.VCenter == conflict.VCenter && vm.Cluster == conflict.Cluster:
			if !strings.Contains(line, "ERROR") {
				t.Errorf("row %q should show ERROR", line)
			}
		default:
			for _, want := range []string{vm.VCenter, vm.Datacenter, vm.Cluster, vm.Host, "zone-" + vm.Cluster, "region-" + vm.VCenter} {
				if !strings.Contains(line, want) {
					t.Errorf("row %q lacks %q", line, want)
				}
			}
		}
	}
	for _, want := range []string{
		"zone from tag k8s-zone:zone-site-a-dc-east-c0 on cluster site-a-dc-east-c0",
		"Conflicts: 1", "zone-second, zone-site-c-dc-west-c0",
		"Untagged placements: 4", "datacenter dc-lab",
		"Unreachable vCenters: 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// JSON, one VM.
	code, out, _ = runCmd(t, nil, "topology", "explain", "--cloud-config", path, "-o", "json", "--uuid", strings.ToUpper(f.VCenter("site-b").VMs[1].UUID))
	var ex provider.Explanation
	if err := json.Unmarshal([]byte(out), &ex); err != nil || code != 0 || len(ex.Placements) != 1 {
		t.Fatalf("json: exit %d, %v\n%s", code, err, out)
	}
	if p := ex.Placements[0]; p.VM != f.VCenter("site-b").VMs[1].Name || p.Zone == nil || p.Zone.Value != "zone-site-b-dc-east-c0" {
		t.Errorf("json placement %+v", p)
	}

	// One vCenter down: listed as unreachable.
	if err := f.VCenter("site-b").SetMode(vcsim.Down); err != nil {
		t.Fatal(err)
	}
	_, out, _ = runCmd(t, nil, "topology", "explain", "--cloud-config", path, "--timeout", "20s")
	if !strings.Contains(out, "Unreachable vCenters: 1") || !strings.Contains(out, "site-b") {
		t.Errorf("down vCenter not reported:\n%s", out)
	}
}

func tag(t *testing.T, ctx context.Context, v *vcsim.VCenter, cat, name string, ref types.ManagedObjectReference) {
	t.Helper()
	if err := v.Tag(ctx, cat, name, ref); err != nil {
		t.Fatal(err)
	}
}

func lineOf(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
