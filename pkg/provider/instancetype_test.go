package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// The reference's guestId table, not substrings: the whole table is
// compared with the reference's by make parity.
func TestInstanceType(t *testing.T) {
	cases := []struct {
		guestID string
		mem     int32
		want    string
	}{
		{"ubuntu64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-ubuntu"},
		{"vmwarePhoton64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-photon"},
		{"rhel7_64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-rhel7"},
		{"rhel9_64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-rhel9"}, // the reference added rhel8/9/10 in 58ab86d (v1.37)
		{"rhel10_64Guest", 8192, "vsphere-vm.cpu-4.mem-8gb.os-rhel10"},
		{"windows9Server64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-win10server"},
		{"debian12_64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-unknown"},
		{"darwin16_64Guest", 16384, "vsphere-vm.cpu-4.mem-16gb.os-darwin"},
		{"otherLinux64Guest", 1536, "vsphere-vm.cpu-4.mem-1gb.os-linux"},
		{"", 512, "vsphere-vm.cpu-4.mem-0gb.os-unknown"},
	}
	for _, tc := range cases {
		if got := provider.InstanceType(inventory.VM{GuestID: tc.guestID, NumCPU: 4, MemoryMB: tc.mem}); got != tc.want {
			t.Errorf("%q, %d MB: %s, want %s", tc.guestID, tc.mem, got, tc.want)
		}
	}
}

// TestInstanceTypeFromTag: labels.instanceType gives the Node's instance
// type from a vSphere tag; a VM without one gets the generated type, and
// explain says where each came from.
func TestInstanceTypeFromTag(t *testing.T) {
	// Tags attached after the start are seen at the next refresh (10 s).
	e := stretchedWith(t, "global:\n  connectTimeout: 5s\n  requestTimeout: 3s\n  tagRefreshInterval: 10s\n",
		"labels:\n  zone: k8s-zone\n  region: k8s-region\n  instanceType: k8s-instance-type\n", nil, provider.Options{})
	b := e.fleet.VCenter("vc-b")
	tagged, plain := b.VMs[0], b.VMs[1]
	must.OK(t, b.Tag(e.ctx, "k8s-instance-type", "db-large", tagged.Ref))
	poll.NoError(t, "the tag seen", time.Minute, func() error {
		md, err := e.p.InstanceMetadata(e.ctx, node(tagged))
		if err == nil && md.InstanceType != "db-large" {
			err = fmt.Errorf("instance type %q", md.InstanceType)
		}
		return err
	})
	md, err := e.p.InstanceMetadata(e.ctx, node(plain))
	must.OK(t, err)
	if !strings.HasPrefix(md.InstanceType, "vsphere-vm.cpu-") {
		t.Errorf("untagged VM: instance type %q, want the generated one", md.InstanceType)
	}
	ex := e.p.Explain(e.ctx, provider.ExplainOptions{})
	for _, pl := range ex.Placements {
		switch pl.VM {
		case tagged.Name:
			if pl.InstanceType.Value != "db-large" || !strings.Contains(pl.InstanceType.From, "tag k8s-instance-type:db-large on VM") {
				t.Errorf("explain, tagged: %+v", pl.InstanceType)
			}
		case plain.Name:
			if !strings.HasPrefix(pl.InstanceType.Value, "vsphere-vm.") || !strings.Contains(pl.InstanceType.From, "CPUs, memory and guest OS") {
				t.Errorf("explain, untagged: %+v", pl.InstanceType)
			}
		}
	}
}

// TestCustomAttributes: a VM custom attribute gives the instance type
// (labels.instanceTypeAttribute, when no instance type tag does) and a
// label (labels.additional with attribute); a value that cannot be a
// label value is an error naming the attribute, the VM and the value.
func TestCustomAttributes(t *testing.T) {
	var b *vcsim.VCenter
	var typed, plain, bad vcsim.VM
	e := stretchedWith(t, "", "labels:\n  zone: k8s-zone\n  region: k8s-region\n  instanceTypeAttribute: instance-type\n"+
		"  additional:\n  - attribute: cost-center\n    label: example.com/cost-center\n", nil, provider.Options{},
		func(ctx context.Context, f *vcsim.Fleet) {
			b = f.VCenter("vc-b")
			typed, plain, bad = b.VMs[0], b.VMs[1], f.VCenter("vc-c").VMs[0]
			must.OK(t, b.SetAttribute(ctx, typed.Ref, "instance-type", "db.large"))
			must.OK(t, b.SetAttribute(ctx, typed.Ref, "cost-center", "cc-42"))
			must.OK(t, f.VCenter("vc-c").SetAttribute(ctx, bad.Ref, "cost-center", "not a label!"))
		})
	md, err := e.p.InstanceMetadata(e.ctx, node(typed))
	must.OK(t, err)
	if md.InstanceType != "db.large" || md.AdditionalLabels["example.com/cost-center"] != "cc-42" {
		t.Errorf("attributes: instance type %q, labels %v", md.InstanceType, md.AdditionalLabels)
	}
	md, err = e.p.InstanceMetadata(e.ctx, node(plain))
	must.OK(t, err)
	if !strings.HasPrefix(md.InstanceType, "vsphere-vm.") || md.AdditionalLabels["example.com/cost-center"] != "" {
		t.Errorf("no attributes: instance type %q, labels %v", md.InstanceType, md.AdditionalLabels)
	}
	_, err = e.p.InstanceMetadata(e.ctx, node(bad))
	if err == nil || !strings.Contains(err.Error(), `custom attribute "cost-center"`) || !strings.Contains(err.Error(), `"not a label!"`) {
		t.Errorf("invalid attribute value: %v", err)
	}
}

// TestInstanceTypeTagBeatsAttribute: with both labels.instanceType and
// labels.instanceTypeAttribute, a tag wins over the custom attribute (as
// docs/configuration.md says); the attribute counts only for a VM without
// the tag, and the generated type only for a VM with neither.
func TestInstanceTypeTagBeatsAttribute(t *testing.T) {
	var both, attrOnly, neither vcsim.VM
	e := stretchedWith(t, "", "labels:\n  zone: k8s-zone\n  region: k8s-region\n  instanceType: k8s-instance-type\n  instanceTypeAttribute: instance-type\n",
		nil, provider.Options{},
		func(ctx context.Context, f *vcsim.Fleet) {
			b := f.VCenter("vc-b")
			both, attrOnly, neither = b.VMs[0], b.VMs[1], f.VCenter("vc-c").VMs[0]
			must.OK(t, b.Tag(ctx, "k8s-instance-type", "from-tag", both.Ref))
			must.OK(t, b.SetAttribute(ctx, both.Ref, "instance-type", "from-attribute"))
			must.OK(t, b.SetAttribute(ctx, attrOnly.Ref, "instance-type", "attribute-only"))
		})
	for vm, want := range map[vcsim.VM]string{both: "from-tag", attrOnly: "attribute-only"} {
		md, err := e.p.InstanceMetadata(e.ctx, node(vm))
		must.OK(t, err)
		if md.InstanceType != want {
			t.Errorf("%s: instance type %q, want %q", vm.Name, md.InstanceType, want)
		}
	}
	md, err := e.p.InstanceMetadata(e.ctx, node(neither))
	must.OK(t, err)
	if !strings.HasPrefix(md.InstanceType, "vsphere-vm.") {
		t.Errorf("%s: instance type %q, want the generated one", neither.Name, md.InstanceType)
	}
}
