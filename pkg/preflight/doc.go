// Package preflight compares what a running CCM (the reference
// kubernetes/cloud-provider-vsphere, the in-tree provider, or an earlier
// configuration of this one) has set on each Node with what this CCM would
// set, before switching to it. The framework sets providerID, zone, region
// and instance type only when it initializes a Node, so a Node whose
// providerID or zone would differ keeps the old value and drifts: those
// differences block the switch. Addresses are rewritten on every status
// pass: their differences are reported, not blocking.
package preflight
