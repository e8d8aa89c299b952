package provider

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/providerid"
)

// Absence verdicts, as counted by the metric vsphere_ccm_vm_absence_verdicts_total.
const (
	// VerdictGone: the VM's absence is proven; the Node will be deleted.
	VerdictGone = "gone"
	// VerdictKept: proven absent, but nodes.deletion is never.
	VerdictKept = "kept_by_policy"
	// VerdictUnproven: not found, but without proof; an error is returned.
	VerdictUnproven = "unproven"
	// VerdictDelayed: proven absent, but not yet for nodes.deletionDelay;
	// an error is returned.
	VerdictDelayed = "delayed"
	// VerdictNoPermission: found by no view or search, and vCenter refused
	// to read the VM's recorded reference (NoPermission), or the CCM's
	// user lacks System.Read on a datacenter or folder of a vCenter (the
	// last privilege check): the user may not see the VM. Kept, with an
	// error and a VMNotVisible event.
	VerdictNoPermission = "no_permission"
	// VerdictUnrecorded: found by no view or search, and the Node carries
	// no record of its VM's reference (LabelVM) to ask vCenter about. Kept
	// until an operator acts, with an error and a VMReferenceUnrecorded
	// event.
	VerdictUnrecorded = "unrecorded"
)

// UnprovenAbsenceError says a Node's VM was not found but its absence is
// not proven, so the Node is kept.
type UnprovenAbsenceError struct {
	Node string
	// Proof is why the absence is not proven.
	Proof error
	// Cause is the lookup's error.
	Cause error
}

func (e *UnprovenAbsenceError) Error() string {
	return fmt.Sprintf("node %s: VM not found, but its absence is not proven (%v); the Node is kept: %v", e.Node, e.Proof, e.Cause)
}

// Unwrap returns why the absence is not proven and the lookup's error.
func (e *UnprovenAbsenceError) Unwrap() []error { return []error{e.Proof, e.Cause} }

// NotConfiguredError: the Node's labels say its VM is in a vCenter or
// datacenter that is not in the config (removed, renamed, misspelt), so
// the configured vCenters cannot prove it absent.
type NotConfiguredError struct {
	Node, VCenter, Datacenter string
	// Other: Node is another Node, whose label shows that the cluster has
	// Nodes in a vCenter or datacenter the config no longer has: a VM not
	// found in the configured ones may have moved there.
	Other bool
}

func (e *NotConfiguredError) Error() string {
	if e.Other {
		where := fmt.Sprintf("%s=%s", LabelVCenter, e.VCenter)
		if e.Datacenter != "" {
			where += fmt.Sprintf(" and %s=%s", LabelDatacenter, e.Datacenter)
		}
		return fmt.Sprintf("node %s (and perhaps others) is labelled %s, which is not configured: a VM not found in the configured vCenters may have moved there (a cross-vCenter vMotion), so no absence is proven while such Nodes exist; add the vCenter or datacenter back, or delete those Nodes once their VMs are gone",
			e.Node, where)
	}
	if e.Datacenter != "" {
		return fmt.Sprintf("node %s is labelled %s=%s and %s=%s, but that datacenter is not among vcenter.%s.datacenters: its VM may still be there; add the datacenter back, or delete the Node yourself if its VM is gone",
			e.Node, LabelVCenter, e.VCenter, LabelDatacenter, e.Datacenter, e.VCenter)
	}
	return fmt.Sprintf("node %s is labelled %s=%s, but no vCenter of that name is configured: its VM may still be there; add the vCenter back (or correct its name), or delete the Node yourself if its VM is gone",
		e.Node, LabelVCenter, e.VCenter)
}

// InstanceExists is false only on proof that the VM is gone (see
// proveAbsent). A miss by VM name or guest host name alone is an error,
// never a deletion; so is any doubt. With nodes.deletion never, it is
// never false. Every verdict is logged and counted, naming the vCenters
// consulted.
func (p *Provider) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	p.opts.Metrics.call("InstanceExists")
	_, err := p.FindVM(ctx, node) // found: forgets any absence (nodes.deletionDelay)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, inventory.ErrNotFound) {
		p.warn(node, err, false)
		return false, err
	}
	log := klog.FromContext(ctx).WithValues("node", node.Name)
	vcenters, perr := p.proveAbsent(ctx, node)
	switch {
	case perr != nil:
		p.countVerdict(absenceVerdict(perr))
		uerr := &UnprovenAbsenceError{Node: node.Name, Proof: perr, Cause: err}
		log.Info("VM of node not found, absence not proven; keeping the Node", "detail", uerr)
		p.warn(node, uerr, true)
		return false, uerr
	case p.cfg.Nodes.SkipNodeDeletion:
		// As the reference: "not found" as an error, so the Node is kept.
		p.countVerdict(VerdictKept)
		log.Info("VM of node is gone; the Node is kept because SKIP_NODE_DELETION is set", "vcenters", vcenters, "detail", err)
		return false, fmt.Errorf("node %s: VM gone, but %s is set: the Node is kept: %w", node.Name, config.SkipNodeDeletionEnv, err)
	case p.cfg.Nodes.Deletion == config.DeletionNever:
		p.countVerdict(VerdictKept)
		log.Info("VM of node is gone; the Node is kept because nodes.deletion is never", "vcenters", vcenters, "detail", err)
		return true, nil
	}
	if d := p.cfg.Nodes.DeletionDelay; d > 0 {
		uuid, _ := providerid.UUID(node.Spec.ProviderID) // proven absent: the Node has one
		gap := max(minAbsenceGap, d)
		since, now, restarted := p.absences.proven(uuid, gap)
		if restarted {
			log.Info("VM of node proven gone again after a silence longer than the gap; nodes.deletionDelay starts over", "gap", gap)
		}
		if now.Sub(since) < d {
			p.countVerdict(VerdictDelayed)
			derr := &DeletionDelayedError{Node: node.Name, Since: since, Until: since.Add(d), Delay: d}
			log.Info("VM of node is gone; the Node is kept until nodes.deletionDelay has passed", "vcenters", vcenters, "detail", derr)
			p.warn(node, derr, false)
			return false, derr
		}
	}
	p.countVerdict(VerdictGone)
	log.Info("VM of node is gone: its BIOS UUID is in no vCenter; Kubernetes will delete the Node", "vcenters", vcenters, "detail", err)
	return false, nil
}

// proveAbsent checks, after a lookup said "not found", that the VM's
// absence is proven, and returns the vCenters consulted. Proof needs all
// of:
//   - a providerID vsphere://<bios-uuid> (providerid.Owned): a Node
//     without one is not this provider's, and a miss by systemUUID or name
//     proves nothing;
//   - the vCenter and datacenter the Node's labels name (where its VM was)
//     are configured, and so are those every other Node's labels name (a
//     VM may have moved to a vCenter no longer configured: othersInScope);
//   - every vCenter's index is current and holds no VM whose identity is
//     unreadable (inventory.Index.AbsenceError);
//   - the UUID, in either byte order, is in no index;
//   - every vCenter, asked directly within a short timeout, has no VM with
//     it in any datacenter (inventory.Inventory.ConfirmAbsent);
//   - vCenter's own word about the VM: a read of the VM's reference
//     recorded on the Node (LabelVM, in the vCenter LabelVCenter names) is
//     answered ManagedObjectNotFound (proveGoneByRef). Views and searches
//     leave out what the CCM's user may not see; only this answer is about
//     the object itself. NoPermission, any other fault, silence or no
//     record proves nothing.
func (p *Provider) proveAbsent(ctx context.Context, node *v1.Node) ([]string, error) {
	if !providerid.Owned(node.Spec.ProviderID) {
		// A Node this provider never initialized (another cloud's, bare
		// metal in a hybrid cluster, or one not initialized yet) is not
		// its to delete, whatever its systemUUID; the reference never
		// reports one gone either.
		return nil, fmt.Errorf("the Node has no %s providerID: only Nodes this provider initialized are ever reported gone", providerid.Prefix)
	}
	uuid, _ := providerid.UUID(node.Spec.ProviderID)
	if err := p.InScope(node); err != nil {
		return nil, err
	}
	if err := p.othersInScope(ctx); err != nil {
		return nil, err
	}
	var names []string
	for _, ix := range p.inv.Indexes() {
		names = append(names, ix.VCenter())
		if err := ix.AbsenceError(); err != nil {
			return nil, err
		}
	}
	if _, err := p.inv.FindByUUID(ctx, uuid); !errors.Is(err, inventory.ErrNotFound) {
		if err == nil {
			return nil, fmt.Errorf("a VM with BIOS UUID %s exists (the Node's lookup methods did not find it)", uuid)
		}
		return nil, err
	}
	if err := p.inv.ConfirmAbsent(ctx, uuid); err != nil {
		return nil, err
	}
	if err := p.proveGoneByRef(ctx, node); err != nil {
		return nil, err
	}
	return names, nil
}

// InScope checks that the vCenter and datacenter the Node's labels name
// (set at initialization: where its VM was) are configured; a
// *NotConfiguredError says which is not. While any Node's are not, no
// Node is deleted for a missing VM (the node-topology controller counts
// those Nodes in a gauge).
func (p *Provider) InScope(node *v1.Node) error {
	name, ok := node.Labels[LabelVCenter]
	if !ok {
		return nil
	}
	dc, hasDC := node.Labels[LabelDatacenter]
	named := false
	// Every vCenter the label may name (two names may be made the same
	// valid value): in scope if the datacenter is in any of them.
	for _, vc := range p.cfg.VCenters {
		if !labelNames(name, vc.Name) {
			continue
		}
		named = true
		if !hasDC || len(vc.Datacenters) == 0 || // every datacenter of the vCenter is in scope
			slices.ContainsFunc(vc.Datacenters, func(d string) bool { return labelNames(dc, d) || labelNames(dc, path.Base(d)) }) ||
			slices.ContainsFunc(p.datacenterNames(vc.Name), func(d string) bool { return labelNames(dc, d) }) { // configured by ID
			return nil
		}
	}
	if !named {
		return &NotConfiguredError{Node: node.Name, VCenter: name}
	}
	return &NotConfiguredError{Node: node.Name, VCenter: name, Datacenter: dc}
}

// othersInScope checks that no Node names, in its labels, a vCenter or
// datacenter that is not configured. Such a Node shows that the cluster
// spans vSphere the CCM does not see now (a vCenter removed from the
// config, or not yet added back): a VM found in none of the configured
// vCenters may have moved there (a cross-vCenter vMotion leaves its Node
// labelled with the old vCenter until the node-topology controller has
// relabelled it), so its absence cannot be proven. Without a Kubernetes
// client (tools) there is nothing to list.
func (p *Provider) othersInScope(ctx context.Context) error {
	if p.kube == nil {
		return nil
	}
	// From the API server's cache: this runs only for a VM not found.
	nodes, err := p.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelVCenter, ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list the Nodes to check that every vCenter they name is configured: %w", err)
	}
	for i := range nodes.Items {
		var nc *NotConfiguredError
		if err := p.InScope(&nodes.Items[i]); errors.As(err, &nc) {
			nc.Other = true
			return nc
		}
	}
	return nil
}

func (p *Provider) countVerdict(v string) {
	if p.opts.Metrics != nil {
		p.opts.Metrics.verdicts.WithLabelValues(v).Inc()
	}
}

// datacenterNames are the names of vcenter's datacenters in scope as its
// inventory resolved them (none before the provider starts).
func (p *Provider) datacenterNames(vcenter string) []string {
	if p.inv == nil {
		return nil
	}
	if ix := p.inv.Index(vcenter); ix != nil {
		return ix.DatacenterNames()
	}
	return nil
}
