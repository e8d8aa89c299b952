//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// manifests is what `kubectl apply -k deploy/` sends: the kustomize build
// of deploy/ (or of the given directory under deploy/).
func (h *harness) manifests(dir ...string) []*unstructured.Unstructured {
	h.t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(append([]string{h.root, "deploy"}, dir...)...))
	must.OK(h.t, err)
	out, err := m.AsYaml()
	must.OK(h.t, err)
	return h.decode(out)
}

func (h *harness) decode(data []byte) []*unstructured.Unstructured {
	h.t.Helper()
	var out []*unstructured.Unstructured
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		must.OK(h.t, err)
		u := &unstructured.Unstructured{}
		must.OK(h.t, yaml.Unmarshal(doc, &u.Object))
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// helmManifests renders the chart with the stretched test values into
// namespace ns, with extra helm arguments (--set ...).
func (h *harness) helmManifests(ns string, args ...string) []*unstructured.Unstructured {
	h.t.Helper()
	out, err := exec.CommandContext(h.ctx, "bash", filepath.Join(h.root, "hack", "build-helm.sh")).Output()
	must.OK(h.t, err)
	helm := strings.TrimSpace(string(out))
	cmd := exec.CommandContext(h.ctx, helm, append([]string{"template", "ccm",
		filepath.Join(h.root, "deploy", "chart", "vsphere-cloud-controller-manager"),
		"-n", ns, "-f", filepath.Join(h.root, "deploy", "testdata", "stretched-values.yaml")}, args...)...)
	rendered, err := cmd.Output()
	must.OK(h.t, err)
	return h.decode(rendered)
}

// resources returns the dynamic client of an object's resource, found
// through the API server's discovery.
func (h *harness) resources(t *testing.T) func(*unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(h.cp.Config)
	must.OK(t, err)
	kube, err := h.cp.Client()
	must.OK(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return func(u *unstructured.Unstructured) dynamic.ResourceInterface {
		t.Helper()
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		must.OK(t, err)
		if ns := u.GetNamespace(); ns != "" {
			return dyn.Resource(m.Resource).Namespace(ns)
		}
		return dyn.Resource(m.Resource)
	}
}

// dryRunApply sends every object as a server-side apply with dry run: the
// API server validates, defaults and admits it, and stores nothing.
func (h *harness) dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	resource := h.resources(t)
	for _, u := range objs {
		if _, err := resource(u).Apply(h.ctx, u.GetName(), u, metav1.ApplyOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "e2e", Force: true}); err != nil {
			t.Errorf("server-side dry run of %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
}

// applyManifests sends the kustomize build of deploy/ (what `kubectl apply
// -k deploy/` sends) through a server-side dry run, then creates for real
// the objects of the given kinds.
func (h *harness) applyManifests(t *testing.T, kinds ...string) {
	t.Helper()
	objs := h.manifests()
	h.dryRunApply(t, objs)
	resource := h.resources(t)
	for _, u := range objs {
		if slices.Contains(kinds, u.GetKind()) {
			if _, err := resource(u).Create(h.ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// shipped ServiceAccount, so the CCM runs with the shipped RBAC only.
func (h *harness) serviceAccountKubeconfig() string {
	h.t.Helper()
	kube, err := h.cp.Client()
	must.OK(h.t, err)
	exp := int64(3600)
	tok, err := kube.CoreV1().ServiceAccounts("kube-system").CreateToken(h.ctx, "vsphere-cloud-controller-manager",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	must.OK(h.t, err)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: h.cp.URL, CertificateAuthorityData: h.cp.Config.CAData}
	cfg.AuthInfos["ccm"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "ccm"}
	cfg.CurrentContext = "e2e"
	path := filepath.Join(h.work, "ccm.kubeconfig")
	must.OK(h.t, clientcmd.WriteToFile(*cfg, path))
	return path
}
