package inventory

import (
	"encoding/hex"
	"net/netip"
	"slices"
	"strings"
)

// ident is what the index keeps for every VM in scope: enough to find it
// by BIOS UUID, VM name or guest host name, and to say it is absent. It
// is a few hundred bytes per VM, so a vCenter with tens of thousands of
// VMs costs megabytes; everything else about a VM (its details) is kept
// only for the VMs lookups ask for: the Nodes.
type ident struct {
	ref      string  // managed object reference value; the type is VirtualMachine
	uuid     uuidKey // BIOS UUID; zero if none
	name     string
	host     string // guest host name, lower case
	template bool
	// ips are the guest's addresses (guest.net), when they are followed
	// for every VM (Options.GuestIPs): who else reports an address.
	ips []netip.Addr
	// kubeletKey is the kubelet key fingerprint the guest publishes
	// (Options.KubeletKeyProperty), "" when none.
	kubeletKey string
	// nodeName is the Node name the provisioner set in the VM's
	// extraConfig (Options.NodeNameProperty), "" when none.
	nodeName string
	// lost: runtime.connectionState is inaccessible, orphaned or invalid,
	// so the identity vCenter reports may not be the VM's.
	lost bool
}

// findKeys are what lookups find a VM by, and whether they may (a
// template is never found).
type findKeys struct {
	uuid       uuidKey
	name, host string
	template   bool
}

func (id *ident) keys() findKeys {
	return findKeys{uuid: id.uuid, name: id.name, host: id.host, template: id.template}
}

// gained reports whether a VM with keys now (not a template) has a key it
// did not have with was: a lookup that found nothing may find it now. A VM
// new to the scope (was is zero) gains its name; a template made a VM
// gains all its keys. A key lost (a guest host name cleared when VMware
// Tools stops, a BIOS UUID unset when the VM's files cannot be reached) or
// the same UUID in the other byte order (lookups match both) gains
// nothing.
func (now findKeys) gained(was findKeys) bool {
	switch {
	case now.template:
		return false
	case was.template:
		return true
	}
	return now.uuid != (uuidKey{}) && now.uuid != was.uuid && now.uuid != was.uuid.swap() ||
		now.name != "" && now.name != was.name ||
		now.host != "" && now.host != was.host
}

// Unreadable reasons: why a VM's identity cannot be read.
const (
	// UnreadableNoUUID: the VM has no BIOS UUID (config unset, as vSphere
	// reports it for a VM whose files cannot be reached).
	UnreadableNoUUID = "no BIOS UUID (config unset)"
	// UnreadableConnection: runtime.connectionState is inaccessible,
	// orphaned or invalid.
	UnreadableConnection = "connection state inaccessible, orphaned or invalid"
)

// unreadable says why the VM's identity cannot be trusted, or "". A VM
// whose identity is unreadable may be any Node's VM, so the vCenter
// holding it cannot prove any VM absent.
func (id *ident) unreadable() string {
	switch {
	case id.lost:
		return UnreadableConnection
	case id.uuid == (uuidKey{}):
		return UnreadableNoUUID
	}
	return ""
}

// uuidKey is a UUID in 16 bytes, the form the index keys by.
type uuidKey [16]byte

// parseUUID returns the key of a UUID string (any case), or false.
func parseUUID(s string) (uuidKey, bool) {
	var k uuidKey
	s = strings.TrimSpace(s)
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return k, false
	}
	// Each group into its bytes, without building the 32 digits.
	at := 0
	for _, g := range [5][2]int{{0, 8}, {9, 13}, {14, 18}, {19, 23}, {24, 36}} {
		for i := g[0]; i < g[1]; i += 2 {
			hi, ok1 := hexDigit(s[i])
			lo, ok2 := hexDigit(s[i+1])
			if !ok1 || !ok2 {
				return uuidKey{}, false
			}
			k[at] = hi<<4 | lo
			at++
		}
	}
	return k, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// multimap maps a key to the idents that have it; almost every key has
// one, so one ident is stored without a slice.
type multimap[K comparable] struct {
	one  map[K]*ident
	more map[K][]*ident // keys with two or more idents (all of them)
}

func newMultimap[K comparable]() multimap[K] {
	return multimap[K]{one: map[K]*ident{}, more: map[K][]*ident{}}
}

func (m multimap[K]) add(k K, id *ident) {
	if list, ok := m.more[k]; ok {
		m.more[k] = append(list, id)
		return
	}
	if prev, ok := m.one[k]; ok {
		delete(m.one, k)
		m.more[k] = []*ident{prev, id}
		return
	}
	m.one[k] = id
}

func (m multimap[K]) remove(k K, id *ident) {
	if m.one[k] == id {
		delete(m.one, k)
		return
	}
	list := slices.DeleteFunc(m.more[k], func(x *ident) bool { return x == id })
	switch len(list) {
	case 0:
		delete(m.more, k)
	case 1:
		delete(m.more, k)
		m.one[k] = list[0]
	default:
		m.more[k] = list
	}
}

// visit calls yield for each ident with key k, until it returns false
// (then visit does too), without allocating.
func (m multimap[K]) visit(k K, yield func(*ident) bool) bool {
	if id, ok := m.one[k]; ok {
		return yield(id)
	}
	if len(m.more) == 0 { // almost always: no second map access
		return true
	}
	for _, id := range m.more[k] {
		if !yield(id) {
			return false
		}
	}
	return true
}

func (m multimap[K]) get(k K) []*ident {
	if id, ok := m.one[k]; ok {
		return []*ident{id}
	}
	return m.more[k]
}

func (id *ident) uuidString() string {
	if id.uuid == (uuidKey{}) {
		return ""
	}
	return id.uuid.String()
}

// String writes k as vCenter does: lower case, dashed.
func (k uuidKey) String() string {
	h := hex.EncodeToString(k[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// swap returns k with its first three groups byte-reversed (SwapUUID):
// the same BIOS UUID as the other byte order reads it.
func (k uuidKey) swap() uuidKey {
	k[0], k[1], k[2], k[3] = k[3], k[2], k[1], k[0]
	k[4], k[5] = k[5], k[4]
	k[6], k[7] = k[7], k[6]
	return k
}

// complete copies vm with VCenter and Datacenter filled in.
