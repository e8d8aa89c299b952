// Package nodetopology is the node-topology controller: it keeps each
// Node's placement current without waiting for the framework's node
// status pass (--node-status-update-frequency, 5 minutes by default). It is
// fed by a Node informer and by the provider's change notifications (the
// inventory sees a VM restarted on another site, a DRS group change or a
// tag refresh at once), and it makes every Node write of this CCM beyond
// the framework's: the Node's addresses as soon as the inventory sees a
// guest's new one (addresses.go: what the framework's status pass would
// write, and only when it would), the relabel of drifted zone and region labels
// (labels.onDrift: relabel), the zone-moved taint (labels.onDrift: taint),
// the placement labels (labels.placement), the out-of-service taint on a
// proven power-off (nodes.outOfService). It also has the framework
// initialize at once the Nodes whose initialization failed, when their VM
// can be looked up (their vCenter returned, or the page of its first read
// with their VM arrived): handed back to the framework's node controller
// in this process (Options.Retry, pkg/controllers/noderetry) without a
// write, or, should that not be possible, through the retry annotation.
// It asks the provider only what the provider alone can answer (its
// Source, composed of one small interface per part that uses it, each
// declared where it is used: the topology pass's observer, the
// deletions-held gauge's scoper, the retries' retrier, the out-of-service
// policy's powerProver, adoption's previewer; none with effects but
// RetryDue's record of what it returned) and owns what it decides: the
// record of each Node's VM (the vcenter and vm labels, written as
// placement labels), the drift and out-of-service records, their events (through the shared,
// de-duplicating recorder of pkg/nodeevents) and its metrics (metrics.go),
// including the count of Nodes that hold deletions back. The Nodes waiting
// for initialization are those that carry the framework's uninitialized
// taint, read from the Node lister; they are not observed until the
// framework has initialized them.
package nodetopology
