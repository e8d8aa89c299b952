package vcsim

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/vapi/tags"
)

// TestTagConcurrently: Tags of one new category made at once (the day
// bench's churn makes 8 at a time) create it once, and each attaches.
func TestTagConcurrently(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx, Spec{Name: "vc-a", Hosts: 2, VMs: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := f.VCenter("vc-a")
	errs := make([]error, len(v.VMs))
	var wg sync.WaitGroup
	for i, vm := range v.VMs {
		wg.Go(func() { errs[i] = v.Tag(ctx, "ops", "maintenance", vm.Ref) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Tag %d: %v", i, err)
		}
	}
	m := tags.NewManager(v.rest)
	cats, err := m.GetCategories(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cats {
		if c.Name == "ops" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d categories named ops, want 1", n)
	}
	tag, err := m.GetTag(ctx, v.tags[[2]string{"ops", "maintenance"}])
	if err != nil {
		t.Fatal(err)
	}
	attached, err := m.ListAttachedObjects(ctx, tag.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(attached) != len(v.VMs) {
		t.Errorf("the tag is on %d objects, want %d", len(attached), len(v.VMs))
	}
}
