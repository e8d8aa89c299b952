//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/nodetopology"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

// TestAddressesWithoutStatusPass: with the framework's node status pass an
// hour away, a guest's new address reaches its Node from the inventory's
// long poll, written by the node-topology controller as that pass would
// write it (the old address gone, the guest's host name kept), once:
// another Node's change, written after it, brings no second write of the
// first.
func TestAddressesWithoutStatusPass(t *testing.T) {
	t.Parallel()
	h := setup(t)
	c := h.startCCM("--node-status-update-frequency=1h")
	h.registerAll(t)
	vms := h.fleet.VMs()
	h.waitInitialized(t, vms...)
	nics := func(ips ...string) []types.GuestNicInfo {
		return []types.GuestNicInfo{{Network: "VM Network", IpAddress: ips, Connected: true, DeviceConfigId: 4000}}
	}
	first, second := vms[0], vms[1]
	const newFirst, newSecond = "10.123.0.1", "10.123.0.2"

	h.fleet.VCenter(first.VCenter).SetGuest(first.Ref, first.Name, nics(newFirst, first.IPv6))
	n := h.waitAddress(t, first.Name, newFirst)
	if slices.ContainsFunc(n.Status.Addresses, func(a v1.NodeAddress) bool { return a.Address == first.IPv4 }) {
		t.Errorf("Node %s still has the old address %s: %v", first.Name, first.IPv4, n.Status.Addresses)
	}
	if !slices.ContainsFunc(n.Status.Addresses, func(a v1.NodeAddress) bool { return a.Type == "Hostname" && a.Address == first.Name }) {
		t.Errorf("Node %s lost its Hostname address: %v", first.Name, n.Status.Addresses)
	}

	// The sync point: the second Node's write comes after every pass that
	// saw the first Node's change.
	h.fleet.VCenter(second.VCenter).SetGuest(second.Ref, second.Name, nics(newSecond, second.IPv6))
	h.waitAddress(t, second.Name, newSecond)

	// The counter moves once the write's answer is back, and the audit
	// log may trail the Node: both waited for, then compared.
	writes := map[string]int{}
	poll.NoError(t, "both writes counted and logged", time.Minute, func() error {
		clear(writes)
		ws, err := h.cp.NodeWrites()
		if err != nil {
			return err
		}
		for _, w := range ws {
			if w.Subresource == "status" && w.Code < 300 && strings.HasSuffix(w.UserAgent, "/"+nodetopology.ClientName) {
				writes[w.Node]++
			}
		}
		if v := c.metric(t, "vsphere_ccm_node_address_updates_total"); v < 2 || writes[second.Name] < 1 {
			return fmt.Errorf("vsphere_ccm_node_address_updates_total %v, status writes %v: %w", v, writes, errNotYet)
		}
		return nil
	})
	// No other Node: the framework writes a new Node's addresses itself.
	if len(writes) != 2 || writes[first.Name] != 1 || writes[second.Name] != 1 {
		t.Errorf("status writes by %s: %v, want one for %s and one for %s", nodetopology.ClientName, writes, first.Name, second.Name)
	}
	if v := c.metric(t, "vsphere_ccm_node_address_updates_total"); v != 2 {
		t.Errorf("vsphere_ccm_node_address_updates_total %v, want 2", v)
	}
}
