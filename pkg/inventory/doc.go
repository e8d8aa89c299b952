// Package inventory knows where every VM is, in every configured vCenter
// and datacenter, without asking vSphere on each lookup.
//
// One Index per vCenter is kept current by a private property collector
// over container views of the configured datacenters (WaitForUpdatesEx):
// every VM's identity (BIOS UUID, name, and the guest host name when a
// lookup method needs it), the hosts, clusters (with their DRS groups and
// rules when zones come from host groups), folders, datacenters and
// resource pools above them, and, through a list view, the details of the
// VMs lookups ask for (every VM's while the vCenter has at most
// EagerDetailsMax). A lookup is a map read. A miss in an index that was
// read but is not current, or is in its first read with its hosts,
// clusters and folders read ahead, falls back to a direct search; a
// vCenter whose objects were never read, or that is down, is not asked. A lookup answers ErrNotFound only when every
// vCenter in scope has answered; a UUID or name found in two places is an
// AmbiguousError naming both.
//
// An Index's state is three types, each with its own lock and never two
// locks held at once: store (the data), syncStatus (how current it is)
// and interest (the VMs whose details are followed). The sync loop polls
// (Index.poll), installs a completed full read (installFullRead) or
// applies an increment (applyIncrement).
//
// The package knows vSphere, not Kubernetes: it imports vcenter for
// sessions and nothing from client-go.
package inventory
