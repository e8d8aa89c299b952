package vcsim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Site is one site of a stretched cluster: a DRS host group, a VM group,
// and a VM-host rule that the group's VMs should (or, Mandatory, must) run
// on the site's hosts. Groups are named <Name>-hosts and <Name>-vms, the
// rule <Name>-vms-on-<Name>-hosts.
type Site struct {
	Name      string
	Hosts     []types.ManagedObjectReference
	VMs       []types.ManagedObjectReference
	Mandatory bool
}

// Stretch gives cluster one host group, VM group and rule per site.
func (v *VCenter) Stretch(ctx context.Context, cluster types.ManagedObjectReference, sites ...Site) error {
	var groups []types.BaseClusterGroupInfo
	var rules []types.BaseClusterRuleInfo
	for _, s := range sites {
		hosts, vms := s.Name+"-hosts", s.Name+"-vms"
		groups = append(groups,
			&types.ClusterHostGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: hosts}, Host: s.Hosts},
			&types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: vms}, Vm: s.VMs})
		rules = append(rules, &types.ClusterVmHostRuleInfo{
			ClusterRuleInfo:     types.ClusterRuleInfo{Name: vms + "-on-" + hosts, Enabled: types.NewBool(true), Mandatory: types.NewBool(s.Mandatory)},
			VmGroupName:         vms,
			AffineHostGroupName: hosts,
		})
	}
	return v.SetGroups(ctx, cluster, groups, rules)
}

// SetGroups adds or replaces (by name) DRS groups and rules of cluster the
// way an operator does (ReconfigureComputeResource_Task), then tells
// property collectors about the new configurationEx: the simulator changes
// it in place without notifying them, where vCenter would.
func (v *VCenter) SetGroups(ctx context.Context, cluster types.ManagedObjectReference, groups []types.BaseClusterGroupInfo, rules []types.BaseClusterRuleInfo) error {
	sim, ok := v.Model.Map().Get(cluster).(*simulator.ClusterComputeResource)
	if !ok {
		return fmt.Errorf("%s is not a cluster", cluster)
	}
	current := sim.ConfigurationEx.(*types.ClusterConfigInfoEx)
	spec := &types.ClusterConfigSpecEx{}
	for _, g := range groups {
		op := types.ArrayUpdateOperationAdd
		for _, c := range current.Group {
			if c.GetClusterGroupInfo().Name == g.GetClusterGroupInfo().Name {
				op = types.ArrayUpdateOperationEdit
			}
		}
		spec.GroupSpec = append(spec.GroupSpec, types.ClusterGroupSpec{ArrayUpdateSpec: types.ArrayUpdateSpec{Operation: op}, Info: g})
	}
	for _, r := range rules {
		op := types.ArrayUpdateOperationAdd
		for _, c := range current.Rule {
			if c.GetClusterRuleInfo().Name == r.GetClusterRuleInfo().Name {
				op = types.ArrayUpdateOperationEdit
				r.GetClusterRuleInfo().Key = c.GetClusterRuleInfo().Key
			}
		}
		spec.RulesSpec = append(spec.RulesSpec, types.ClusterRuleSpec{ArrayUpdateSpec: types.ArrayUpdateSpec{Operation: op}, Info: r})
	}
	task, err := object.NewClusterComputeResource(v.admin, cluster).Reconfigure(ctx, spec, true)
	if err != nil {
		return err
	}
	if err := task.Wait(ctx); err != nil {
		return fmt.Errorf("reconfigure cluster %s: %w", cluster.Value, err)
	}
	v.Model.Map().AtomicUpdate(v.Model.Service.Context, sim, []types.PropertyChange{
		{Name: "configurationEx", Val: sim.ConfigurationEx},
	})
	return nil
}

// Relocate moves a running VM to host (a vMotion, or where HA restarts it)
// with RelocateVM_Task.
func (v *VCenter) Relocate(ctx context.Context, vm, host types.ManagedObjectReference) error {
	task, err := object.NewVirtualMachine(v.admin, vm).Relocate(ctx, types.VirtualMachineRelocateSpec{Host: &host}, types.VirtualMachineMovePriorityDefaultPriority)
	if err != nil {
		return err
	}
	if err := task.Wait(ctx); err != nil {
		return fmt.Errorf("relocate VM %s to host %s: %w", vm.Value, host.Value, err)
	}
	return nil
}

// ClusterHosts returns the hosts of cluster, sorted by name.
func (v *VCenter) ClusterHosts(cluster types.ManagedObjectReference) []types.ManagedObjectReference {
	c, ok := v.Model.Map().Get(cluster).(*simulator.ClusterComputeResource)
	if !ok {
		return nil
	}
	hosts := slices.Clone(c.Host)
	name := func(r types.ManagedObjectReference) string { return v.Model.Map().Get(r).(mo.Entity).Entity().Name }
	slices.SortFunc(hosts, func(a, b types.ManagedObjectReference) int { return strings.Compare(name(a), name(b)) })
	return hosts
}

// OtherHost returns a host of vm's cluster that is not vm's host, and
// false if the cluster has none: where a vMotion within the cluster goes.
func (v *VCenter) OtherHost(vm VM) (types.ManagedObjectReference, bool) {
	for _, h := range v.ClusterHosts(vm.ClusterRef) {
		if h != vm.HostRef {
			return h, true
		}
	}
	return types.ManagedObjectReference{}, false
}

// SetHardware gives a VM CPUs, memory and a guest OS, as an administrator
// would (ReconfigVM_Task): the simulator's VMs have 1 CPU, 32 MB and no
// guest OS, which no real node has.
func (v *VCenter) SetHardware(ctx context.Context, vm types.ManagedObjectReference, cpus int32, memoryMB int64, guestID string) error {
	task, err := object.NewVirtualMachine(v.admin, vm).Reconfigure(ctx,
		types.VirtualMachineConfigSpec{NumCPUs: cpus, MemoryMB: memoryMB, GuestId: guestID})
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// PublishGuestInfo sets a guestinfo.* value of a VM as its guest does with
// VMware Tools (vmware-rpctool "info-set <key> <value>"): the simulator
// runs no guest, so the value is written into the VM's extraConfig, where
// vCenter shows what a guest sets.
func (v *VCenter) PublishGuestInfo(ctx context.Context, vm types.ManagedObjectReference, key, value string) error {
	task, err := object.NewVirtualMachine(v.admin, vm).Reconfigure(ctx,
		types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: key, Value: value}}})
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// AddHostAddress gives an ESXi host one more VMkernel adapter with ip
// (config.network.vnic), as a vMotion or vSAN network adds one.
func (v *VCenter) AddHostAddress(host types.ManagedObjectReference, ip string) {
	h, ok := v.Model.Map().Get(host).(*simulator.HostSystem)
	if !ok {
		return
	}
	v.Model.Map().WithLock(v.Model.Service.Context, h, func() {
		cfg := *h.Config // copies: the simulator's hosts may share the template's
		nw := *cfg.Network
		nw.Vnic = append(slices.Clone(nw.Vnic), types.HostVirtualNic{Device: fmt.Sprintf("vmk%d", len(nw.Vnic)),
			Spec: types.HostVirtualNicSpec{Ip: &types.HostIpConfig{IpAddress: ip, SubnetMask: "255.255.255.0"}}})
		cfg.Network = &nw
		h.Config = &cfg
	})
}
