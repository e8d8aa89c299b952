package deploy_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

// TestChartReferenceValues: a values file written for the reference CCM's
// chart (kubernetes/cloud-provider-vsphere charts/vsphere-cpi: its own
// values.yaml, byte for byte, then every one of its settings changed)
// renders this chart with each setting arriving with the same meaning:
// config.* as the single vCenter, its credentials Secret and labels;
// daemonset.* on the pod (annotations, image, pull policy, DNS policy,
// log level, cloud-config path, extra flags, resources, pod annotations
// and labels, tolerations, affinity, volumes and mounts under both of its
// spellings, host aliases); securityContext, serviceAccount; and what chart
// users expect besides: nodeSelector, priorityClassName,
// topologySpreadConstraints.
func TestChartReferenceValues(t *testing.T) {
	h := helm(t)
	args := []string{"-f", "testdata/reference-chart-values.yaml", "-f", "testdata/reference-chart-overrides.yaml"}
	if out, err := run(t, h, append([]string{"lint", "--strict", chart}, args...)...); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	manifests, err := run(t, h, append([]string{"template", "ccm", chart, "-n", "kube-system"}, args...)...)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var d *appsv1.Deployment
	var cfgText string
	var secret *corev1.Secret
	var sa string
	var subjects []string
	for _, obj := range decodeAll(t, manifests) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			d = o
		case *corev1.ConfigMap:
			if o.Name == "my-cloud-config" {
				cfgText = o.Data["vsphere.conf"]
			}
		case *corev1.Secret:
			secret = o
		case *corev1.ServiceAccount:
			sa = o.Name
		case *rbacv1.ClusterRoleBinding:
			for _, s := range o.Subjects {
				subjects = append(subjects, s.Name)
			}
		}
	}
	if d == nil || cfgText == "" || secret == nil {
		t.Fatalf("rendered: Deployment %v, ConfigMap my-cloud-config %v, Secret %v", d != nil, cfgText != "", secret != nil)
	}

	// config.*
	cfg, _, err := config.Parse("helm:vsphere.conf", []byte(cfgText), config.Options{})
	if err != nil {
		t.Fatalf("the rendered cloud-config does not validate:\n%s\n%v", cfgText, err)
	}
	vc, ok := cfg.VCenter("vc.example.com")
	if !ok || len(cfg.VCenters) != 1 || vc.Server != "vc.example.com" || !slices.Equal(vc.Datacenters, []string{"dc-east"}) ||
		vc.CAFile != "/etc/ssl/vc/ca.pem" || vc.InsecureFlag {
		t.Errorf("vCenter %+v", cfg.VCenters)
	}
	if cfg.Labels.Zone != "k8s-zone-cat" || cfg.Labels.Region != "k8s-region-cat" {
		t.Errorf("labels %+v", cfg.Labels)
	}
	n := cfg.Nodes
	if prefixes(n.InternalSubnets) != "10.10.0.0/16" || prefixes(n.ExternalSubnets) != "192.0.2.0/24" ||
		prefixes(n.ExcludeInternalSubnets) != "10.10.99.0/24" || prefixes(n.ExcludeExternalSubnets) != "192.0.2.128/25" ||
		n.InternalVMNetworkName != "pg-internal" || n.ExternalVMNetworkName != "pg-external" {
		t.Errorf("nodes %+v", n)
	}
	if c := vc.Credentials; c.GlobalSecret == nil || c.GlobalSecret.Name != "my-vsphere-secret" {
		t.Errorf("credentials from %v, want the Secret my-vsphere-secret", c.Sources())
	}
	set, warnings, err := parseSecret(secret)
	if secret.Name != "my-vsphere-secret" || err != nil || len(warnings) > 0 || set["vc.example.com"] == nil || set["vc.example.com"].Identity() != "ccm-user@vsphere.local" {
		t.Errorf("Secret %s: %v, %v, %v", secret.Name, set, warnings, err)
	}
	if strings.Contains(cfgText, "chart-test-password") {
		t.Error("the password is in the ConfigMap")
	}

	// daemonset.*, securityContext, serviceAccount.
	if d.Annotations["example.com/owner"] != "platform-team" {
		t.Errorf("Deployment annotations %v", d.Annotations)
	}
	pod := d.Spec.Template
	if pod.Annotations["example.com/scrape"] != "true" || pod.Labels["example.com/tier"] != "control" {
		t.Errorf("pod annotations %v, labels %v", pod.Annotations, pod.Labels)
	}
	spec := pod.Spec
	c := spec.Containers[0]
	// daemonset.image and tag name the reference's image: never this CCM's.
	if !strings.HasPrefix(c.Image, "ghcr.io/vsphere-ccm/vsphere-cloud-controller-manager:") || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s, pull policy %s", c.Image, c.ImagePullPolicy)
	}
	for _, want := range []string{"--v=4", "--cloud-config=/etc/cloud/vsphere.conf", "--node-labels=node.example.com/platform=vsphere", "--concurrent-node-syncs=4"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	if err := mounted(&spec, "/etc/cloud/vsphere.conf"); err != nil {
		t.Errorf("cloud-config: %v", err)
	}
	if err := mounted(&spec, vc.CAFile); err != nil {
		t.Errorf("config.caFile %s: %v (daemonset.extraVolumes and extraVolumesMounts)", vc.CAFile, err)
	}
	if c.Resources.Requests.Cpu().String() != "250m" || c.Resources.Requests.Memory().String() != "200Mi" {
		t.Errorf("resources %v", c.Resources)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "example.com/dedicated" {
		t.Errorf("tolerations %v", spec.Tolerations)
	}
	if a := spec.Affinity; a == nil || a.NodeAffinity == nil ||
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != "example.com/ccm" {
		t.Errorf("affinity %v", a)
	}
	if len(spec.HostAliases) != 1 || spec.HostAliases[0].IP != "192.0.2.5" || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("host aliases %v, DNS policy %s", spec.HostAliases, spec.DNSPolicy)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1001 || sc.FSGroup == nil || *sc.FSGroup != 1002 ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("security context %+v", sc)
	}
	if spec.ServiceAccountName != "my-ccm" || sa != "my-ccm" || !slices.Contains(subjects, "my-ccm") || slices.Contains(subjects, "vsphere-cloud-controller-manager") {
		t.Errorf("service account %s, created %s, bound %v", spec.ServiceAccountName, sa, subjects)
	}
	// This chart's own: nodeSelector, priorityClassName, topologySpreadConstraints.
	if spec.NodeSelector["example.com/pool"] != "system" || spec.PriorityClassName != "example-critical" ||
		len(spec.TopologySpreadConstraints) != 1 || spec.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("node selector %v, priority class %s, spread %v", spec.NodeSelector, spec.PriorityClassName, spec.TopologySpreadConstraints)
	}

	// config.enabled false: the reference mounts a ConfigMap cloud-config the
	// operator made; so does this chart, and renders none.
	manifests, err = run(t, h, "template", "ccm", chart, "-n", "kube-system", "-f", "testdata/reference-chart-values.yaml")
	if err != nil {
		t.Fatalf("helm template with the reference's defaults: %v", err)
	}
	for _, obj := range decodeAll(t, manifests) {
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			t.Errorf("rendered ConfigMap %s; the reference's config.enabled: false means the operator's own", o.Name)
		case *corev1.Secret:
			t.Errorf("rendered Secret %s; the operator's own cloud-config names its Secret", o.Name)
		case *appsv1.Deployment:
			v := o.Spec.Template.Spec.Volumes[0]
			if v.ConfigMap == nil || v.ConfigMap.Name != "cloud-config" {
				t.Errorf("cloud-config volume %+v, want the ConfigMap cloud-config", v)
			}
			if c := o.Spec.Template.Spec.Containers[0]; strings.Contains(c.Image, "cloud-provider-vsphere") {
				t.Errorf("the reference's own values deploy the reference's image %s", c.Image)
			}
		case *rbacv1.Role:
			for _, r := range o.Rules {
				if slices.Contains(r.Resources, "secrets") && !slices.Equal(r.ResourceNames, []string{"vsphere-credentials", "vsphere-cloud-secret"}) {
					t.Errorf("Secrets readable: %v; want this chart's and the reference's default names", r.ResourceNames)
				}
			}
		}
	}
	// PodSecurityPolicy no longer exists: a clear failure.
	if _, err := run(t, h, append([]string{"template", "ccm", chart}, append(args, "--set", "podSecurityPolicy.enabled=true")...)...); err == nil || !strings.Contains(err.Error(), "PodSecurityPolicy was removed") {
		t.Errorf("podSecurityPolicy.enabled: %v", err)
	}
}

func prefixes(ps []netip.Prefix) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}
