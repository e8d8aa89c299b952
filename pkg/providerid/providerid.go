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

// UUID returns the BIOS UUID of a vSphere providerID, as written (lookups
// match it in either case and byte order). An empty UUID, or a providerID
// that does not start with Prefix, is an error wrapping ErrNotVSphere.
func UUID(providerID string) (string, error) {
	uuid, ok := strings.CutPrefix(providerID, Prefix)
	if !ok {
		return "", fmt.Errorf("providerID %q does not start with %q: %w", providerID, Prefix, ErrNotVSphere)
	}
	if strings.TrimSpace(uuid) == "" {
		return "", fmt.Errorf("providerID %q has no UUID after %q: %w", providerID, Prefix, ErrNotVSphere)
	}
	return uuid, nil
}
