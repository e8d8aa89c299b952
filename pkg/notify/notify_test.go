package notify

import "testing"

func TestNotifier(t *testing.T) {
	var n Notifier
	before := n.C()
	select {
	case <-before:
		t.Fatal("closed before Notify")
	default:
	}
	n.Notify()
	<-before // a waiter that took C before Notify sees it
	after := n.C()
	select {
	case <-after:
		t.Fatal("the next channel is closed already")
	default:
	}
	n.Notify()
	n.Notify() // a burst: one wake-up, no block
	<-after
}
