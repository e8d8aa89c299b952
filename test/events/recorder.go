package events

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Event is one event, with the name of the object it is on.
type Event struct {
	Object, Type, Reason, Message string
}

// Recorder is a record.EventRecorder that keeps every event, with its
// object's name (which client-go's FakeRecorder drops), on C.
type Recorder struct {
	C chan Event
}

// NewRecorder returns a Recorder holding up to n events.
func NewRecorder(n int) *Recorder { return &Recorder{C: make(chan Event, n)} }

// Event implements record.EventRecorder.
func (r *Recorder) Event(obj runtime.Object, eventType, reason, message string) {
	name := ""
	if m, err := meta.Accessor(obj); err == nil {
		name = m.GetName()
	}
	r.C <- Event{Object: name, Type: eventType, Reason: reason, Message: message}
}

// Eventf implements record.EventRecorder.
func (r *Recorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

// AnnotatedEventf implements record.EventRecorder.
func (r *Recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	r.Eventf(obj, eventType, reason, format, args...)
}

// Wait returns the next event with this object and reason, dropping
// the others before it; it fails the test after 30 seconds.
func (r *Recorder) Wait(t *testing.T, object, reason string) Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-r.C:
			if e.Object == object && e.Reason == reason {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event on %s", reason, object)
			return Event{}
		}
	}
}

// None fails the test if an event is held now (sent and not read).
func (r *Recorder) None(t *testing.T) {
	t.Helper()
	select {
	case e := <-r.C:
		t.Errorf("unexpected event %+v", e)
	default:
	}
}

// WaitAll waits until an event has been seen for every "object/reason"
// given, in any order, dropping the others, and returns them by key; it
// fails the test after 30 seconds.
func (r *Recorder) WaitAll(t *testing.T, keys ...string) map[string]Event {
	t.Helper()
	got := map[string]Event{}
	deadline := time.After(30 * time.Second)
	for {
		missing := 0
		for _, k := range keys {
			if _, ok := got[k]; !ok {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		select {
		case e := <-r.C:
			got[e.Object+"/"+e.Reason] = e
		case <-deadline:
			t.Fatalf("events seen %v, want %v", got, keys)
			return nil
		}
	}
}
