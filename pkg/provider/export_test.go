package provider

import v1 "k8s.io/api/core/v1"

// Due is due, for the tests of package provider_test.
func (p *Provider) Due(n *v1.Node, progressed, missed bool) bool {
	return p.due(n, progressed, missed)
}
