// Package provider is the vSphere cloud provider: it implements
// k8s.io/cloud-provider's Interface with InstancesV2 on top of the vSphere
// packages (vcenter, inventory, topology), and answers the questions the
// framework's controllers and the node-topology controller ask about a
// Node's VM (metadata, existence, power, placement), with the answers the
// reference CCM gives (make parity proves it). It writes no Node (the
// framework's controllers and pkg/controllers/nodetopology do) and keeps
// no record of the controllers' decisions: only the inventory-side state it
// needs to answer, and Warning events about its own lookups. Besides it,
// pkg/controllers, pkg/preflight and the credential manager's Secret watch
// speak Kubernetes types.
package provider
