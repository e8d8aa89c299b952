package nodeevents_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/nodeevents"
)

// TestDeduplicated: an identical event is sent once per Interval, on the
// injected clock; another reason, message or Node is sent at once; no
// sink drops events; a nil Recorder is usable.
func TestDeduplicated(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1e9, 0))
	r := nodeevents.New(clk)
	n1 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n2 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	r.Event(n1, v1.EventTypeWarning, "R", "before the sink") // dropped
	fake := record.NewFakeRecorder(10)
	r.SetSink(fake)
	steps := []struct {
		node        *v1.Node
		reason, msg string
		advance     time.Duration
		want        bool
	}{
		{n1, "R", "m", 0, true},
		{n1, "R", "m", time.Minute, false},
		{n1, "R", "other", 0, true},
		{n1, "S", "m", 0, true},
		{n2, "R", "m", 0, true},
		{n1, "R", "m", nodeevents.Interval, true},
	}
	for i, s := range steps {
		clk.SetTime(clk.Now().Add(s.advance))
		r.Event(s.node, v1.EventTypeWarning, s.reason, s.msg)
		select {
		case e := <-fake.Events:
			if !s.want {
				t.Errorf("step %d: sent %q, want it suppressed", i, e)
			}
		default:
			if s.want {
				t.Errorf("step %d: nothing sent", i)
			}
		}
	}
	var none *nodeevents.Recorder
	none.Event(n1, v1.EventTypeWarning, "R", "m")
}
