package nodetopology

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// MergePatch applies a JSON merge patch (RFC 7386: a nil value removes
// the key) to the Node name, as this controller's field manager. Every
// label and annotation the controller writes goes through it; taints,
// a list without merge keys, are updated instead (updateNode).
func MergePatch(ctx context.Context, kube kubernetes.Interface, name string, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("node %s: patch: %w", name, err)
	}
	if _, err := kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: Name}); err != nil {
		return fmt.Errorf("node %s: patch: %w", name, err)
	}
	return nil
}

// labelsPatch is the merge patch that sets labels.
func labelsPatch(labels map[string]any) map[string]any {
	return map[string]any{"metadata": map[string]any{"labels": labels}}
}

// Relabel sets the drifted labels of a Node to the VM's current values
// (labels.onDrift: relabel), the GA and the beta label of each together
// (otherwise the framework's node controller copies the old beta value
// back over the GA label). The framework writes topology labels only at
// initialization, so nothing else would.
func Relabel(ctx context.Context, kube kubernetes.Interface, list []provider.Drift) error {
	if len(list) == 0 {
		return nil
	}
	labels := map[string]any{}
	for _, d := range list {
		pair := d.Labels()
		labels[pair[0]], labels[pair[1]] = d.Now, d.Now
	}
	return MergePatch(ctx, kube, list[0].Node, labelsPatch(labels))
}

// PatchPlacement sets a Node's placement labels (labels.placement) to its
// VM's placement now; a Drift whose Now is empty removes its label.
func PatchPlacement(ctx context.Context, kube kubernetes.Interface, list []provider.Drift) error {
	if len(list) == 0 {
		return nil
	}
	labels := map[string]any{}
	for _, d := range list {
		if d.Now == "" {
			labels[d.Label] = nil
		} else {
			labels[d.Label] = d.Now
		}
	}
	return MergePatch(ctx, kube, list[0].Node, labelsPatch(labels))
}
