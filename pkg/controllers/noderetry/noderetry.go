package noderetry

import (
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Tee hands out a Node informer whose event handlers it keeps, so that
// Retry can give them a Node as an update. The zero value is not usable:
// use New.
type Tee struct {
	nodes coreinformers.NodeInformer
	mu    sync.Mutex
	// handlers are those registered through Informer's informer and not
	// removed, each with its registration.
	handlers []registered
}

type registered struct {
	reg cache.ResourceEventHandlerRegistration
	h   cache.ResourceEventHandler
}

// New returns a Tee over nodes (the shared Node informer).
func New(nodes coreinformers.NodeInformer) *Tee { return &Tee{nodes: nodes} }

// Informer returns the Node informer to give the framework's node
// controller: nodes, whose informer also keeps the handlers registered on
// it.
func (t *Tee) Informer() coreinformers.NodeInformer { return teeNodes{NodeInformer: t.nodes, t: t} }

// Retry gives node, as an update, to the handlers registered through
// Informer, and reports whether there was one. The framework's node
// controller then queues the Node (its work queue folds repeats), as for
// any change of it. It makes no request.
func (t *Tee) Retry(node *v1.Node) bool {
	t.mu.Lock()
	hs := t.handlers
	t.mu.Unlock()
	for _, r := range hs {
		r.h.OnUpdate(node, node)
	}
	return len(hs) > 0
}

// keep records a handler registered as reg. Each change makes a new
// slice: Retry ranges over the one it read without the lock.
func (t *Tee) keep(reg cache.ResourceEventHandlerRegistration, h cache.ResourceEventHandler) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handlers = append(slices.Clip(t.handlers), registered{reg: reg, h: h})
}

// drop forgets the handler registered as reg.
func (t *Tee) drop(reg cache.ResourceEventHandlerRegistration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handlers = slices.DeleteFunc(slices.Clone(t.handlers), func(r registered) bool { return r.reg == reg })
}

// teeNodes is the NodeInformer Informer returns.
type teeNodes struct {
	coreinformers.NodeInformer
	t *Tee
}

func (n teeNodes) Informer() cache.SharedIndexInformer {
	return teeInformer{SharedIndexInformer: n.NodeInformer.Informer(), t: n.t}
}

// teeInformer is the shared informer, keeping the handlers registered on
// it by any of the three registration methods until they are removed.
type teeInformer struct {
	cache.SharedIndexInformer
	t *Tee
}

func (i teeInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := i.SharedIndexInformer.AddEventHandler(h)
	if err == nil {
		i.t.keep(reg, h)
	}
	return reg, err
}

func (i teeInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync)
	if err == nil {
		i.t.keep(reg, h)
	}
	return reg, err
}

func (i teeInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := i.SharedIndexInformer.AddEventHandlerWithOptions(h, opts)
	if err == nil {
		i.t.keep(reg, h)
	}
	return reg, err
}

func (i teeInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	err := i.SharedIndexInformer.RemoveEventHandler(reg)
	if err == nil {
		i.t.drop(reg)
	}
	return err
}
