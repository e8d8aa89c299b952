package nodetopology

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// Relabel sets the drifted labels of a Node to the VM's current values
// (labels.onDrift: relabel), the GA and the beta label of each together
// (otherwise the framework's node controller copies the old beta value
// back over the GA label). The framework writes topology labels only at
// initialization, so nothing else would.
func Relabel(ctx context.Context, kube kubernetes.Interface, list []provider.Drift) error {
	if len(list) == 0 {
		return nil
	}
	labels := map[string]string{}
	for _, d := range list {
		pair := d.Labels()
		labels[pair[0]], labels[pair[1]] = d.Now, d.Now
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Nodes().Patch(ctx, list[0].Node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Name})
	return err
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
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Nodes().Patch(ctx, list[0].Node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Name})
	return err
}
