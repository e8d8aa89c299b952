package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
)

// Absence verdicts, as counted by the metric vsphere_ccm_vm_absence_verdicts_total.
const (
	// VerdictGone: the VM's absence is proven; the Node will be deleted.
	VerdictGone = "gone"
	// VerdictKept: proven absent, but nodes.deletion is never.
	VerdictKept = "kept_by_policy"
	// VerdictUnproven: not found, but without proof; an error is returned.
	VerdictUnproven = "unproven"
)

// UnprovenAbsenceError says a Node's VM was not found but its absence is
// not proven, so the Node is kept.
type UnprovenAbsenceError struct {
	Node   string
	Reason string
	Cause  error
}

func (e *UnprovenAbsenceError) Error() string {
	return fmt.Sprintf("node %s: VM not found, but its absence is not proven (%s); the Node is kept: %v", e.Node, e.Reason, e.Cause)
}

// Unwrap returns the lookup's error.
func (e *UnprovenAbsenceError) Unwrap() error { return e.Cause }

// InstanceExists is false only on proof that the VM is gone: its BIOS
// UUID (providerID, or the Node's systemUUID) is absent from every vCenter
// in scope, each connected with a complete inventory (a VM deleted in
// vCenter leaves the index that way too). A miss by VM name or guest host
// name alone is an error, never a deletion; so is any doubt. With
// nodes.deletion never, it is never false. Every verdict is logged and
// counted, naming the vCenters consulted.
func (p *Provider) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	_, err := p.FindVM(ctx, node)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, inventory.ErrNotFound) {
		p.events.warn(node, err, false)
		return false, err
	}
	log := klog.FromContext(ctx).WithValues("node", node.Name)
	vcenters, perr := p.proveAbsent(ctx, node)
	switch {
	case perr != nil:
		p.countVerdict(VerdictUnproven)
		uerr := &UnprovenAbsenceError{Node: node.Name, Reason: perr.Error(), Cause: err}
		log.Info("VM of node not found, absence not proven; keeping the Node", "detail", uerr)
		p.events.warn(node, uerr, true)
		return false, uerr
	case p.cfg.Nodes.Deletion == config.DeletionNever:
		p.countVerdict(VerdictKept)
		log.Info("VM of node is gone; the Node is kept because nodes.deletion is never", "vcenters", vcenters, "detail", err)
		return true, nil
	}
	p.countVerdict(VerdictGone)
	log.Info("VM of node is gone: its BIOS UUID is in no vCenter; Kubernetes will delete the Node", "vcenters", vcenters, "detail", err)
	return false, nil
}

// proveAbsent checks, after a lookup said "not found", that the absence is
// proven by BIOS UUID in every vCenter; it returns the vCenters consulted.
func (p *Provider) proveAbsent(ctx context.Context, node *v1.Node) ([]string, error) {
	uuid, ok := strings.CutPrefix(node.Spec.ProviderID, ProviderIDPrefix)
	if node.Spec.ProviderID == "" {
		uuid, ok = node.Status.NodeInfo.SystemUUID, node.Status.NodeInfo.SystemUUID != ""
	}
	if !ok {
		return nil, errors.New("the Node has neither a vSphere providerID nor a systemUUID, and a miss by VM name or guest host name is no proof")
	}
	var names []string
	for _, ix := range p.inv.Indexes() {
		names = append(names, ix.VCenter())
		if complete, _, err := ix.Status(); !complete {
			return nil, err
		}
	}
	if _, err := p.inv.FindByUUID(ctx, uuid); !errors.Is(err, inventory.ErrNotFound) {
		if err == nil {
			return nil, fmt.Errorf("a VM with BIOS UUID %s exists (the Node's lookup methods did not find it)", uuid)
		}
		return nil, err
	}
	return names, nil
}

func (p *Provider) countVerdict(v string) {
	if p.opts.Metrics != nil {
		p.opts.Metrics.verdicts.WithLabelValues(v).Inc()
	}
}
