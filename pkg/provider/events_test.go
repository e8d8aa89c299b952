package provider_test

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// eventsTo is a shared recorder that sends to rec.
func eventsTo(rec record.EventRecorder) *nodeevents.Recorder {
	r := nodeevents.New(nil)
	r.SetSink(rec)
	return r
}

// TestEvents: a lookup problem an operator can fix is a Warning event on
// the Node, once however often the Node is looked up; a VM proven gone is
// not a problem.
func TestEvents(t *testing.T) {
	e := stretched(t, "", nil)
	c := e.fleet.VCenter("vc-c")
	must.OK(t, c.Tag(e.ctx, "k8s-zone", "zone-other", c.VMs[0].ClusterRef))
	rec := record.NewFakeRecorder(10)
	cfg := e.p.Config()
	p, err := provider.New(cfg, provider.Options{Events: eventsTo(rec)})
	must.OK(t, err)
	must.OK(t, p.Start(e.ctx, nil))
	defer p.Close()
	must.OK(t, p.WaitForSync(e.ctx))
	for range 3 { // the same problem three times: one event
		if _, err := p.InstanceMetadata(e.ctx, node(c.VMs[0])); err == nil {
			t.Fatal("conflicting tags accepted")
		}
	}
	ghost := ghost("no-such-vm", "4299ffff-0000-4000-8000-000000000000")
	_, _ = p.InstanceMetadata(e.ctx, ghost)
	ok, err := p.InstanceExists(e.ctx, ghost) // proven gone: not a problem to report
	if ok || err != nil {
		t.Errorf("InstanceExists(ghost) = %v, %v", ok, err)
	}
	close(rec.Events)
	var got []string
	for ev := range rec.Events {
		got = append(got, ev)
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "Warning TopologyConflict ") || !strings.Contains(got[0], "zone-other") ||
		!strings.HasPrefix(got[1], "Warning VMNotFound ") || !strings.Contains(got[1], "no-such-vm") {
		t.Errorf("events: %q", got)
	}
}
