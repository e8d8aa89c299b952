// Package providerid reads and writes the Node providerIDs of vSphere VMs:
// vsphere://<bios-uuid>, the BIOS UUID in lower case, as the reference CCM
// and vSphere CSI write and read them (spec.providerID is immutable, so
// the format never changes).
package providerid

import (
	"errors"
	"fmt"
	"strings"
)

// Prefix starts every vSphere providerID.
const Prefix = "vsphere://"

// ErrNotVSphere is returned for a providerID of another provider.
var ErrNotVSphere = errors.New("not a vSphere providerID")

// For returns the providerID of the VM with the given BIOS UUID.
func For(uuid string) string { return Prefix + strings.ToLower(uuid) }

// UUID returns the BIOS UUID of a providerID, as written (lookups match
// it in either case and byte order). It accepts what the reference CCM
// accepts: Prefix followed by the UUID, or the UUID alone (the reference
// trims Prefix if there is one); surrounding spaces are ignored. Anything
// else (another provider's ID, an empty UUID) is an error wrapping
// ErrNotVSphere.
func UUID(providerID string) (string, error) {
	uuid, ok := strings.CutPrefix(providerID, Prefix)
	uuid = strings.TrimSpace(uuid)
	switch {
	case ok && uuid == "":
		return "", fmt.Errorf("providerID %q has no UUID after %q: %w", providerID, Prefix, ErrNotVSphere)
	case !ok && !isUUID(uuid):
		return "", fmt.Errorf("providerID %q does not start with %q: %w", providerID, Prefix, ErrNotVSphere)
	}
	return uuid, nil
}

// Owned reports whether providerID names a VM of this provider beyond
// doubt: it starts with Prefix. Only such a Node may be reported gone or
// tainted out of service; one with a bare UUID (which the reference also
// reads) is looked up, never acted on.
func Owned(providerID string) bool {
	_, err := UUID(providerID)
	return err == nil && strings.HasPrefix(providerID, Prefix)
}

// isUUID reports whether s is 8-4-4-4-12 hexadecimal digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F'):
			return false
		}
	}
	return true
}
