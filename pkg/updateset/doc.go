// Package updateset decodes the answers of the property collector's
// WaitForUpdatesEx whose values are all simple: strings, booleans, enums
// and managed object references. Those are the pages of a vCenter's
// full read of its VMs' identities (100 VMs each), and govmomi's
// reflection-driven XML decoder spends most of the CPU time of reading
// 100,000 VMs on them.
//
// The decoder is strict: it reads the subset of XML that vCenter and the
// simulator write (a UTF-8 declaration, namespace declarations on the
// envelope or on a value, the five predefined entities) and declines
// everything else, a fault, a missing set, a complex value, a comment,
// for govmomi's decoder to read from the same bytes. What it accepts it
// decodes exactly as govmomi's decoder does: FuzzDecode checks that on
// every input it accepts.
package updateset
