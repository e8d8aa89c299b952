// Package notify is a broadcast of "something changed" to any number of
// waiters: each takes the current channel with C and waits for it to be
// closed; Notify closes it and puts a fresh one in its place. A waiter that
// took C before a Notify always sees it; nothing is queued or dropped, so a
// burst of changes wakes a slow waiter once.
package notify

import "sync"

// Notifier is ready to use at its zero value. It must not be copied.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// C returns the channel the next Notify closes.
func (n *Notifier) C() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Notify wakes every waiter of C.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
	}
	n.ch = make(chan struct{})
}
