package provider

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Due is due, for the tests of package provider_test.
func (p *Provider) Due(n *v1.Node, progressed, missed bool) bool {
	return p.due(n, progressed, missed)
}

// SetAbsenceClock gives the deletion delay (nodes.deletionDelay) its own
// clock, for the tests of package provider_test: the rest of the provider
// keeps the real one.
func (p *Provider) SetAbsenceClock(c clock.PassiveClock) {
	p.absences.mu.Lock()
	defer p.absences.mu.Unlock()
	p.absences.clock = c
}
