//go:build parity

package parity

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// A layout is one VM as production has them: its guest networking as
// VMware Tools reports it, its hardware and guest OS, its power and
// connection state, and the cloud-init metadata provisioners leave in its
// extraConfig.
type layout struct {
	name string
	// host is guest.hostName ("" for none).
	host string
	nics []types.GuestNicInfo
	// guestID, cpus and memMB are the VM's config (0 and "": unchanged).
	guestID string
	cpus    int32
	memMB   int32
	// metadata is guestinfo.metadata; encoding guestinfo.metadata.encoding.
	metadata, encoding string
	// state: "" (powered on), "off" (guest info kept, as the simulator
	// does), "off-cleared" (guest info gone, as vCenter shows it once
	// Tools stops), "suspended", "orphaned", "template".
	state string
}

// lastIP is the last address the guest reports on its last NIC with one,
// as a kubelet's --node-ip would give it ("" for none): in most multi-NIC
// layouts not the address the rules choose.
func (l layout) lastIP() string {
	for i := len(l.nics) - 1; i >= 0; i-- {
		if ips := l.nics[i].IpAddress; len(ips) > 0 {
			return ips[len(ips)-1]
		}
	}
	return ""
}

func nic(network string, key int32, ips ...string) types.GuestNicInfo {
	return types.GuestNicInfo{Network: network, DeviceConfigId: key, Connected: true, IpAddress: ips,
		MacAddress: fmt.Sprintf("00:50:56:00:%02x:%02x", key/256%256, key%256)}
}

// cloudInit is network config as CAPV writes it into guestinfo.metadata.
func cloudInit(addrs ...string) string {
	return "instance-id: \"vm\"\nlocal-hostname: \"vm\"\nwait-on-network:\n  ipv4: true\nnetwork:\n  version: 2\n  ethernets:\n" +
		"    id0:\n      match:\n        macaddress: \"00:50:56:00:0f:a0\"\n      set-name: \"eth0\"\n      wakeonlan: true\n      dhcp4: false\n      addresses:\n" +
		"      - " + strings.Join(addrs, "\n      - ") + "\n      gateway4: \"10.20.0.1\"\n"
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// nestedMetadata is metadata whose network key is itself encoded
// (network.encoding base64).
func nestedMetadata(addrs ...string) string {
	net := strings.SplitN(cloudInit(addrs...), "network:\n", 2)[1]
	return b64("instance-id: \"vm\"\nnetwork: " + b64(dedent(net)) + "\nnetwork.encoding: base64\n")
}

// gzipMetadata is metadata whose network key is gzip+base64, as CAPV
// writes it for large configs.
func gzipMetadata(addrs ...string) string {
	net := strings.SplitN(cloudInit(addrs...), "network:\n", 2)[1]
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	_, _ = w.Write([]byte(dedent(net)))
	_ = w.Close()
	return b64("instance-id: \"vm\"\nnetwork: " + base64.StdEncoding.EncodeToString(z.Bytes()) + "\nnetwork.encoding: gzip+base64\n")
}

func dedent(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		out = append(out, strings.TrimPrefix(l, "  "))
	}
	return strings.Join(out, "\n")
}

// layouts is the corpus: every VM of the fleet gets one.
func layouts() []layout {
	const pg, mgmt, stor = "pg-k8s", "pg-mgmt", "pg-storage"
	vip := "10.20.0.5"
	return []layout{
		{name: "one-nic-ipv4", host: "one-nic-ipv4", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.11")}},
		{name: "one-nic-dual", host: "one-nic-dual", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.12", "fd00:20::12")}},
		{name: "ipv4-linklocal6", host: "ipv4-linklocal6", nics: []types.GuestNicInfo{nic(pg, 4000, "fe80::250:56ff:fe00:1", "10.20.0.13")}},
		{name: "vip-first", host: "cp-vip-first", nics: []types.GuestNicInfo{nic(pg, 4000, vip, "10.20.0.14", "fd00:20::14")}},
		{name: "vip-first-static-b64", host: "cp-static-b64", nics: []types.GuestNicInfo{nic(pg, 4000, vip, "10.20.0.15", "fd00:20::15")},
			metadata: b64(cloudInit("10.20.0.15/24", "fd00:20::15/64")), encoding: "base64"},
		{name: "vip-first-static-plain", host: "cp-static-plain", nics: []types.GuestNicInfo{nic(pg, 4000, vip, "10.20.0.16")},
			metadata: cloudInit("10.20.0.16/24")},
		{name: "vip-first-static-nested", host: "cp-static-nested", nics: []types.GuestNicInfo{nic(pg, 4000, vip, "10.20.0.17")},
			metadata: nestedMetadata("10.20.0.17/24"), encoding: "base64"},
		{name: "static-ipv6-text", host: "static-ipv6", nics: []types.GuestNicInfo{nic(pg, 4000, "fd00:20::5", "fd00:20:0:0::18", "10.20.0.18")},
			metadata: b64(cloudInit("fd00:20::18/64", "10.20.0.18/24")), encoding: "base64"},
		{name: "vip-first-static-gzip", host: "cp-static-gzip", nics: []types.GuestNicInfo{nic(pg, 4000, vip, "10.20.0.70", "fd00:20::70")},
			metadata: gzipMetadata("10.20.0.70/24", "fd00:20::70/64"), encoding: "base64"},
		{name: "static-repeated", host: "static-repeated", nics: []types.GuestNicInfo{nic(pg, 4000, vip, "10.20.0.72", "10.20.0.71")},
			metadata: b64(cloudInit("10.20.0.71/24", "10.20.0.72/24", "10.20.0.71/24")), encoding: "base64"},
		{name: "static-ipv4-mapped", host: "static-mapped", nics: []types.GuestNicInfo{nic(pg, 4000, vip, "::ffff:10.20.0.73", "10.20.0.74")},
			metadata: b64(cloudInit("10.20.0.73/24", "10.20.0.74/24")), encoding: "base64"},
		{name: "static-set-name-list", host: "static-set-name", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.75")},
			metadata: b64(strings.Replace(cloudInit("10.20.0.75/24"), `set-name: "eth0"`, "set-name: [eth0]", 1)), encoding: "base64"},
		{name: "static-unreadable", host: "static-bad", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.19")},
			metadata: "not base64 %%", encoding: "base64"},
		{name: "two-nics-mgmt-first", host: "two-nics-a", nics: []types.GuestNicInfo{nic(mgmt, 4000, "192.168.10.21"), nic(pg, 4001, "10.20.0.21")}},
		{name: "two-nics-k8s-first", host: "two-nics-b", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.22"), nic(mgmt, 4001, "192.168.10.22")}},
		{name: "three-nics-storage", host: "three-nics", nics: []types.GuestNicInfo{nic(stor, 4000, "172.16.5.23"), nic(mgmt, 4001, "192.168.10.23", "fd00:10::23"), nic(pg, 4002, "10.20.0.23", "2001:db8:20::23")}},
		{name: "docker0-first", host: "docker0", nics: []types.GuestNicInfo{nic("", -1, "172.17.0.1"), nic(pg, 4000, "10.20.0.24")}},
		{name: "cni-bridges", host: "cni-bridges", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.25"), nic("", -1, "10.244.1.1"), nic("", -1, "169.254.25.10")}},
		{name: "nic-without-ip-first", host: "no-ip-first", nics: []types.GuestNicInfo{nic(mgmt, 4000), nic(pg, 4001, "10.20.0.26")}},
		{name: "no-ip-yet", host: "no-ip-yet", nics: []types.GuestNicInfo{nic(pg, 4000)}},
		{name: "no-nic-reported", host: "no-nic"},
		{name: "no-hostname", host: "", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.27")}},
		{name: "fqdn-hostname", host: "fqdn.k8s.example.test", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.28")}},
		{name: "ipv6-only", host: "ipv6-only", nics: []types.GuestNicInfo{nic(pg, 4000, "fe80::1", "2001:db8:20::29")}},
		{name: "ipv6-uppercase", host: "ipv6-upper", nics: []types.GuestNicInfo{nic(pg, 4000, "2001:DB8:20:0::30", "10.20.0.30")}},
		{name: "ipv4-mapped", host: "ipv4-mapped", nics: []types.GuestNicInfo{nic(pg, 4000, "::ffff:10.20.0.31")}},
		{name: "loopback-and-real", host: "loopback", nics: []types.GuestNicInfo{nic(pg, 4000, "127.0.0.1", "::1", "10.20.0.32")}},
		{name: "public-second-nic", host: "public", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.33"), nic("pg-public", 4001, "203.0.113.33")}},
		{name: "vip-on-second-nic", host: "vip-second", nics: []types.GuestNicInfo{nic(mgmt, 4000, "192.168.10.34"), nic(pg, 4001, vip, "10.20.0.34")}},
		{name: "network-name-case", host: "net-case", nics: []types.GuestNicInfo{nic("PG-K8S", 4000, "10.20.0.35"), nic(mgmt, 4001, "192.168.10.35")}},
		{name: "rhel9", host: "rhel9", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.40")}, guestID: "rhel9_64Guest", cpus: 4, memMB: 16384},
		{name: "rhel7", host: "rhel7", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.41")}, guestID: "rhel7_64Guest", cpus: 2, memMB: 8192},
		{name: "windows2019", host: "win2019", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.42")}, guestID: "windows2019srv_64Guest", cpus: 4, memMB: 8192},
		{name: "windows9server", host: "win9srv", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.43")}, guestID: "windows9Server64Guest", cpus: 8, memMB: 32768},
		{name: "debian12", host: "debian12", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.44")}, guestID: "debian12_64Guest", cpus: 2, memMB: 4096},
		{name: "debian10", host: "debian10", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.45")}, guestID: "debian10_64Guest", cpus: 2, memMB: 4096},
		{name: "ubuntu", host: "ubuntu", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.46")}, guestID: "ubuntu64Guest", cpus: 2, memMB: 4096},
		{name: "photon", host: "photon", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.47")}, guestID: "vmwarePhoton64Guest", cpus: 2, memMB: 4096},
		{name: "darwin", host: "darwin", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.48")}, guestID: "darwin19_64Guest", cpus: 2, memMB: 4096},
		{name: "centos8", host: "centos8", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.49")}, guestID: "centos8_64Guest", cpus: 2, memMB: 4096},
		{name: "other-linux", host: "other-linux", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.50")}, guestID: "otherLinux64Guest", cpus: 1, memMB: 2048},
		{name: "sles15", host: "sles15", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.51")}, guestID: "sles15_64Guest", cpus: 2, memMB: 4096},
		{name: "mem-512mb", host: "mem-512", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.52")}, guestID: "ubuntu64Guest", cpus: 1, memMB: 512},
		{name: "mem-1536mb", host: "mem-1536", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.53")}, guestID: "ubuntu64Guest", cpus: 3, memMB: 1536},
		{name: "powered-off-stale-guest", host: "off-stale", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.60")}, state: "off"},
		{name: "powered-off", host: "off", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.61")}, state: "off-cleared"},
		{name: "suspended", host: "suspended", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.62")}, state: "suspended"},
		{name: "orphaned", host: "orphaned", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.63")}, state: "orphaned"},
		{name: "template", host: "template", nics: []types.GuestNicInfo{nic(pg, 4000, "10.20.0.64")}, state: "template"},
	}
}

// apply gives vm the layout through the vSphere API, as an administrator
// or VMware Tools would.
func (l layout) apply(ctx context.Context, v *vcsim.VCenter, vm vcsim.VM) error {
	obj := object.NewVirtualMachine(v.Admin(), vm.Ref)
	spec := types.VirtualMachineConfigSpec{GuestId: l.guestID, NumCPUs: l.cpus, MemoryMB: int64(l.memMB)}
	if l.metadata != "" {
		spec.ExtraConfig = append(spec.ExtraConfig, &types.OptionValue{Key: "guestinfo.metadata", Value: l.metadata})
	}
	if l.encoding != "" {
		spec.ExtraConfig = append(spec.ExtraConfig, &types.OptionValue{Key: "guestinfo.metadata.encoding", Value: l.encoding})
	}
	if err := wait(ctx)(obj.Reconfigure(ctx, spec)); err != nil {
		return fmt.Errorf("%s: reconfigure: %w", l.name, err)
	}
	v.SetGuest(vm.Ref, l.host, l.nics)
	switch l.state {
	case "off", "off-cleared", "template":
		if err := wait(ctx)(obj.PowerOff(ctx)); err != nil {
			return fmt.Errorf("%s: power off: %w", l.name, err)
		}
		if l.state == "off-cleared" {
			v.SetGuest(vm.Ref, "", nil)
		}
		if l.state == "template" {
			if err := obj.MarkAsTemplate(ctx); err != nil {
				return fmt.Errorf("%s: mark as template: %w", l.name, err)
			}
		}
	case "suspended":
		if err := wait(ctx)(obj.Suspend(ctx)); err != nil {
			return fmt.Errorf("%s: suspend: %w", l.name, err)
		}
	case "orphaned":
		v.SetConnectionState(vm.Ref, types.VirtualMachineConnectionStateOrphaned)
	}
	return nil
}

// wait(ctx)(obj.Method(ctx)) waits for the task a method started.
func wait(ctx context.Context) func(*object.Task, error) error {
	return func(task *object.Task, err error) error {
		if err != nil {
			return err
		}
		return task.Wait(ctx)
	}
}

// A ruleSet is one cloud-config: the rules of nodes, the IP families and
// the labels, written in the reference's own YAML schema so that both read
// the same file.
type ruleSet struct {
	name     string
	families string // vCenter ipFamily list, e.g. "[ipv4, ipv6]"
	nodes    map[string]string
	labels   bool
	// env is set for both (the reference's VSPHERE_* overrides).
	env []string
	// ini writes the legacy INI vsphere.conf instead of YAML.
	ini bool
}

func ruleSets() []ruleSet {
	return []ruleSet{
		{name: "default", families: "[ipv4]", labels: true},
		{name: "ipv6", families: "[ipv6]"},
		{name: "dual-ipv4-first", families: "[ipv4, ipv6]"},
		{name: "dual-ipv6-first", families: "[ipv6, ipv4]"},
		{name: "one-cidr", families: "[ipv4]", nodes: map[string]string{"internalNetworkSubnetCidr": "10.20.0.0/16"}},
		{name: "two-cidrs-k8s-first", families: "[ipv4]", nodes: map[string]string{"internalNetworkSubnetCidr": "10.20.0.0/16,192.168.10.0/24"}},
		{name: "two-cidrs-mgmt-first", families: "[ipv4]", nodes: map[string]string{"internalNetworkSubnetCidr": "192.168.10.0/24,10.20.0.0/16"}},
		{name: "internal-and-external-cidr", families: "[ipv4, ipv6]", nodes: map[string]string{
			"internalNetworkSubnetCidr": "10.20.0.0/16,fd00::/8", "externalNetworkSubnetCidr": "203.0.113.0/24,2001:db8::/32"}},
		{name: "exclude-vip", families: "[ipv4]", nodes: map[string]string{
			"excludeInternalNetworkSubnetCidr": "10.20.0.5/32", "excludeExternalNetworkSubnetCidr": "10.20.0.5/32"}},
		{name: "cidr-excluding-vip", families: "[ipv4]", nodes: map[string]string{
			"internalNetworkSubnetCidr": "10.20.0.0/16", "excludeInternalNetworkSubnetCidr": "10.20.0.5/32"}},
		{name: "network-names-present", families: "[ipv4]", nodes: map[string]string{
			"internalVmNetworkName": "pg-k8s", "externalVmNetworkName": "pg-public"}},
		{name: "network-name-internal-only", families: "[ipv4]", nodes: map[string]string{"internalVmNetworkName": "pg-k8s"}},
		{name: "network-names-absent", families: "[ipv4]", nodes: map[string]string{
			"internalVmNetworkName": "pg-nowhere", "externalVmNetworkName": "pg-neither"}},
		{name: "env-overrides", families: "[ipv4]", nodes: map[string]string{"internalNetworkSubnetCidr": "172.16.0.0/12"},
			env: []string{"VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR=192.168.10.0/24,10.20.0.0/16", "VSPHERE_NODES_EXTERNAL_VM_NETWORK_NAME=pg-public"}},
		{name: "ini-two-cidrs", families: "ipv6,ipv4", ini: true, labels: true, nodes: map[string]string{
			"internalNetworkSubnetCidr": "10.20.0.0/16,fd00::/8", "excludeInternalNetworkSubnetCidr": "10.20.0.5/32"}},
	}
}

// config writes the rule set as a cloud-config for the fleet.
func (r ruleSet) config(f *vcsim.Fleet) string {
	if r.ini {
		return r.iniConfig(f)
	}
	var b strings.Builder
	b.WriteString("global:\n  port: 443\n")
	if r.labels {
		b.WriteString("labels:\n  zone: " + vcsim.ZoneCategory + "\n  region: " + vcsim.RegionCategory + "\n")
	}
	if len(r.nodes) > 0 {
		b.WriteString("nodes:\n")
		for _, k := range sortedKeys(r.nodes) {
			fmt.Fprintf(&b, "  %s: %q\n", k, r.nodes[k])
		}
	}
	b.WriteString("vcenter:\n")
	for _, v := range f.VCenters {
		fmt.Fprintf(&b, "  %s:\n    server: %s\n    port: %d\n    caFile: %s\n    user: %s\n    password: %s\n    datacenters: [%s]\n    ipFamily: %s\n",
			v.Name, v.Host, v.Port, v.CAFile, v.User, v.Password, strings.Join(v.Datacenters, ", "), r.families)
	}
	return b.String()
}

// iniConfig is the rule set as the legacy INI vsphere.conf.
func (r ruleSet) iniConfig(f *vcsim.Fleet) string {
	var b strings.Builder
	b.WriteString("[Global]\nport = \"443\"\n")
	for _, v := range f.VCenters {
		fmt.Fprintf(&b, "\n[VirtualCenter %q]\nserver = %q\nport = \"%d\"\nca-file = %q\nuser = %q\npassword = %q\ndatacenters = %q\nip-family = %q\n",
			v.Name, v.Host, v.Port, v.CAFile, v.User, v.Password, strings.Join(v.Datacenters, ","), r.families)
	}
	if r.labels {
		fmt.Fprintf(&b, "\n[Labels]\nzone = %q\nregion = %q\n", vcsim.ZoneCategory, vcsim.RegionCategory)
	}
	if len(r.nodes) > 0 {
		b.WriteString("\n[Nodes]\n")
		for _, k := range sortedKeys(r.nodes) {
			fmt.Fprintf(&b, "%s = %q\n", kebab(k), r.nodes[k])
		}
	}
	return b.String()
}

// kebab is the INI spelling of a YAML key (internalNetworkSubnetCidr:
// internal-network-subnet-cidr).
func kebab(k string) string {
	var b strings.Builder
	for _, c := range k {
		if c >= 'A' && c <= 'Z' {
			b.WriteByte('-')
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	return b.String()
}
