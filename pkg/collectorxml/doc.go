// Package collectorxml decodes the property collector's answers:
// WaitForUpdatesEx (a vCenter's pages of its VMs' identities, and the
// details of the VMs the inventory follows) and RetrievePropertiesEx and
// ContinueRetrievePropertiesEx (its direct reads of details).
// govmomi's reflection-driven XML decoder spends most of the CPU time of
// reading 100,000 identities, and of the Nodes' details, on them.
//
// The decoder is strict: it reads the subset of XML that vCenter and the
// simulator write (a UTF-8 declaration, namespace declarations on the
// envelope or on a value, the five predefined entities, character
// references) and the values the inventory reads: strings, booleans,
// signed integers, references, and of the vSphere types only those of
// the values the inventory asks for (valueTypes: the power and connection
// state enums, guest.net's ArrayOfGuestNicInfo, a keyed extraConfig
// entry's OptionValue, the custom field definitions), data objects read
// field by field (complex.go). It
// declines everything else, a fault, a missing set, a field of another
// kind, a comment, CDATA, for govmomi's decoder to read from the same
// bytes, and returns nothing then. What it accepts it decodes exactly as
// govmomi's decoder does: FuzzDecode checks that on every input it
// accepts.
package collectorxml
