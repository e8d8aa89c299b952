// Package nodetopology is the node-topology controller: it keeps each
// Node's topology notices current without waiting for the framework's node
// status pass (--node-status-update-frequency, 5 minutes by default). It is
// fed by a Node informer and by the provider's change notifications (the
// inventory sees a VM restarted on another site, a DRS group change or a
// tag refresh at once), and it owns the Node writes this concerns: the
// relabel of drifted zone and region labels (labels.onDrift: relabel).
// Lookups come from the provider's Observe, which has no effects; events
// and gauges go through its Report.
package nodetopology
