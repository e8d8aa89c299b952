// Package topology turns vSphere tags and DRS groups into zone, region and
// other node labels.
//
// Per vCenter, a Cache holds the categories and tags of interest and the
// objects each of those tags is attached to, refreshed on an interval with
// the batch call list-attached-objects-on-tags: the cost (requests and
// memory) grows with the number of tags and attachments, not with the
// number of VMs. Resolving a VM is then a walk over maps: with both zone
// and region categories, the reference CCM's own lookup (reference.go,
// proven by make parity), with one, the nearest tagged object (see
// Chain). For clusters matched by the config's
// hostGroupZones, the zone comes first from the cluster's DRS host groups,
// VM groups and VM-host rules (intended and actual zone, see Placement),
// then staticTopology, then tags. Every value says where it came from and
// of which kind (Source), and CSI computes what vSphere CSI would: tags on
// the host chain only, walked as CSI's own code walks them (csi.go).
package topology
