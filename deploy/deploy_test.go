// Package deploy_test checks the shipped manifests: they decode, the
// embedded cloud-config validates, the example Secret parses, the RBAC
// grants nothing cluster-wide on Secrets, and the Deployment is hardened.
package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/credentials"
)

// Objects decodes every manifest of deploy/base (kustomization excluded).
func objects(t *testing.T) []runtime.Object {
	t.Helper()
	files, err := filepath.Glob("base/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decodeAll(t, string(data))...)
	}
	return out
}

func TestManifests(t *testing.T) {
	var sawConfig, sawSecret, sawDeployment bool
	for _, obj := range objects(t) {
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			sawConfig = true
			_, _, err := config.Parse("configmap.yaml:vsphere.conf", []byte(o.Data["vsphere.conf"]), config.Options{})
			if err != nil {
				t.Errorf("the shipped cloud-config does not validate: %v", err)
			}
		case *corev1.Secret:
			sawSecret = true
			set, warnings, err := parseSecret(o)
			if err != nil || len(warnings) > 0 || len(set) != 3 {
				t.Errorf("example Secret: %d servers, warnings %v, err %v", len(set), warnings, err)
			}
		case *rbacv1.ClusterRole:
			for _, r := range o.Rules {
				if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*") || slices.Contains(r.Verbs, "*") {
					t.Errorf("ClusterRole %s grants %v on %v: nothing cluster-wide on Secrets, no wildcards", o.Name, r.Verbs, r.Resources)
				}
			}
		case *rbacv1.Role:
			for _, r := range o.Rules {
				if slices.Contains(r.Resources, "secrets") && len(r.ResourceNames) == 0 {
					t.Errorf("Role %s grants Secrets without resourceNames", o.Name)
				}
			}
		case *appsv1.Deployment:
			sawDeployment = true
			checkDeployment(t, o)
		}
	}
	if !sawConfig || !sawSecret || !sawDeployment {
		t.Errorf("missing manifests: config %v, secret %v, deployment %v", sawConfig, sawSecret, sawDeployment)
	}
}

func checkDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Error("want 2 replicas")
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod must run as non-root with seccomp RuntimeDefault")
	}
	var tolerates []string
	for _, tol := range spec.Tolerations {
		tolerates = append(tolerates, tol.Key)
	}
	for _, k := range []string{"node.cloudprovider.kubernetes.io/uninitialized", "node-role.kubernetes.io/control-plane"} {
		if !slices.Contains(tolerates, k) {
			t.Errorf("no toleration for %s", k)
		}
	}
	if _, ok := spec.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok {
		t.Error("no control-plane node selector")
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Error("container must have a read-only root, no privilege escalation, all capabilities dropped")
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("liveness and readiness probes on /healthz required")
	}
	for _, want := range []string{"--leader-elect=true", "--cloud-config=/etc/kubernetes/vsphere.conf"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args lack %s", want)
		}
	}
}

// parseSecret reads a manifest Secret's stringData as the CCM reads Secrets.
func parseSecret(s *corev1.Secret) (credentials.Set, []string, error) {
	data := map[string][]byte{}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return credentials.ParseData(data)
}
