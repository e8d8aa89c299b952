package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// nodeLabelsFlag is the reference CCM's --node-labels: labels added to
// every Node when it is initialized (key=value,key=value; an empty value
// is allowed), never removed later.
const nodeLabelsFlag = "node-labels"

const nodeLabelsUsage = "Labels added to every Node when this CCM initializes it (the reference CCM's flag): key=value pairs separated by commas, " +
	"an empty value allowed; each key a Kubernetes label key. A label the Node already has (from the kubelet's --node-labels) is kept; " +
	"the labels are never removed from initialized Nodes. Example: --node-labels=node.example.com/platform=vsphere,example.com/pool="

// k8sNamespace is the framework's rule (k8s.io/cloud-provider's node
// controller): a label a cloud provider adds in the kubernetes.io or
// k8s.io namespace is discarded.
var k8sNamespace = regexp.MustCompile(`(^|\.)(kubernetes|k8s)\.io/`)

// checkNodeLabels validates --node-labels as the reference does (each key
// a qualified name) and more: each value a valid label value (the API
// server would refuse the Node update of every initialization), and no
// key that this CCM computes from vSphere for the config (its own labels,
// labels.placement, labels.additional). It returns warnings for keys the
// framework discards.
func checkNodeLabels(labels map[string]string, cfg *config.Config) ([]string, error) {
	computed := []string{provider.LabelVCenter, provider.LabelDatacenter, provider.LabelVM}
	computed = append(computed, provider.PlacementLabelKeys(cfg.Labels.Placement)...)
	for _, a := range cfg.Labels.Additional {
		computed = append(computed, a.Label)
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var warnings []string
	for _, k := range keys {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("--%s: invalid key %q: %s", nodeLabelsFlag, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return nil, fmt.Errorf("--%s: invalid value %q for %s: %s", nodeLabelsFlag, labels[k], k, strings.Join(errs, "; "))
		}
		if slices.Contains(computed, k) {
			return nil, fmt.Errorf("--%s: %s is a label this CCM sets from vSphere with this config; remove it from the flag", nodeLabelsFlag, k)
		}
		if k8sNamespace.MatchString(k) {
			warnings = append(warnings, fmt.Sprintf("--%s: %s is in the kubernetes.io or k8s.io namespace: the controller manager discards such labels from a cloud provider (the reference CCM's too), so it is never set; use your own domain", nodeLabelsFlag, k))
		}
	}
	return warnings, nil
}
