package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
)

const chart = "chart/vsphere-cloud-controller-manager"

// helm returns the helm binary, built from the Go module proxy on first use.
func helm(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", "../hack/build-helm.sh").Output()
	if err != nil {
		t.Fatalf("hack/build-helm.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), errors.New(stderr.String())
	}
	return stdout.String(), nil
}

func decodeAll(t *testing.T, manifests string) []runtime.Object {
	t.Helper()
	r := yaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests)))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(strings.TrimPrefix(string(doc), "---")) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		out = append(out, obj)
	}
}

func TestChart(t *testing.T) {
	h := helm(t)
	values := "testdata/stretched-values.yaml"
	if out, err := run(t, h, "lint", "--strict", chart, "-f", values); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	manifests, err := run(t, h, "template", "ccm", chart, "-n", "kube-system", "-f", values)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var cfgText string
	var sawCA, sawSecret, sawDeployment bool
	var pod *corev1.PodSpec
	for _, obj := range decodeAll(t, manifests) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			sawDeployment = true
			pod = &o.Spec.Template.Spec
		case *corev1.ConfigMap:
			switch o.Name {
			case "vsphere-cloud-config":
				cfgText = o.Data["vsphere.conf"]
			case "vsphere-ca":
				sawCA = strings.Contains(o.Data["site-b.pem"], "BEGIN CERTIFICATE")
			}
		case *corev1.Secret:
			sawSecret = true
			set, warnings, err := parseSecret(o)
			if err != nil || len(warnings) > 0 || len(set) != 3 || set["fd00:10::20"].Identity() != "ccm-b@vsphere.local" ||
				set["vc-d.example.com"] == nil || set["vc-d.example.com"].Identity() != "session manager https://sessions.example.com/vc-d" {
				t.Errorf("chart Secret: %v, warnings %v, err %v", set, warnings, err)
			}
		case *rbacv1.Role:
			for _, r := range o.Rules {
				if slices.Contains(r.Resources, "secrets") && !slices.Equal(r.ResourceNames, []string{"vsphere-credentials", "vsphere-credentials-site-c"}) {
					t.Errorf("Secret access by name: %v", r.ResourceNames)
				}
			}
		}
	}
	if !sawCA || !sawSecret || !sawDeployment {
		t.Errorf("rendered: CA %v, Secret %v, Deployment %v", sawCA, sawSecret, sawDeployment)
	}
	cfg, _, err := config.Parse("helm:vsphere.conf", []byte(cfgText), config.Options{})
	if err != nil {
		t.Fatalf("the rendered cloud-config does not validate:\n%s\n%v", cfgText, err)
	}
	if len(cfg.VCenters) != 4 || cfg.Labels.Zone != "k8s-zone" || len(cfg.Nodes.InternalSubnets) != 2 {
		t.Errorf("rendered config: %s", cfg)
	}
	for _, vc := range cfg.VCenters {
		if vc.InsecureFlag {
			t.Errorf("%s: insecure by default", vc.Name)
		}
	}
	// Every file the config names is mounted (the root filesystem is
	// read-only), from a volume the pod has.
	if pod != nil {
		paths := map[string]string{"global.secretsDirectory": cfg.Global.SecretsDirectory}
		for _, vc := range cfg.VCenters {
			paths["vcenter "+vc.Name+" caFile"] = vc.CAFile
		}
		checked := 0
		for field, path := range paths {
			if path == "" {
				continue
			}
			checked++
			if err := mounted(pod, path); err != nil {
				t.Errorf("%s %s: %v", field, path, err)
			}
		}
		if checked != 3 {
			t.Errorf("%d paths checked, want 3 (site-b and site-c CA files, the secrets directory)", checked)
		}
	}
	// A caFile under no mount fails the rendering, naming the field.
	_, err = run(t, h, "template", "ccm", chart, "-n", "kube-system", "-f", values, "--set", "caBundle.configMap=")
	if err == nil || !strings.Contains(err.Error(), "vcenters.site-c.caFile: /etc/ssl/vcenter/site-c.pem is under no mount") {
		t.Errorf("template with an unmounted caFile: %v", err)
	}
	if strings.Contains(cfgText, "chart-test-password") {
		t.Error("a password in the ConfigMap")
	}
	// No vCenter: a clear failure, not an empty config.
	if _, err := run(t, h, "template", "ccm", chart); err == nil || !strings.Contains(err.Error(), "configure at least one vCenter") {
		t.Errorf("template without vCenters: %v", err)
	}
}

// mounted checks that path is at or under a volume mount of the pod's
// first container whose volume the pod defines.
func mounted(pod *corev1.PodSpec, path string) error {
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = true
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		dir := strings.TrimSuffix(m.MountPath, "/")
		if path == dir || strings.HasPrefix(path, dir+"/") {
			if !volumes[m.Name] {
				return fmt.Errorf("mounted at %s from volume %q, which the pod does not define", m.MountPath, m.Name)
			}
			return nil
		}
	}
	return errors.New("under no volume mount of the container (its root filesystem is read-only)")
}

// TestChartServingCertificates: the RBAC to approve kubelet serving
// requests is rendered only with nodes.servingCertificates.approve, and
// then the rendered config turns approval on; it covers the one signer.
func TestChartServingCertificates(t *testing.T) {
	h := helm(t)
	values := "testdata/stretched-values.yaml"
	render := func(args ...string) (cfg *config.Config, approve []rbacv1.PolicyRule) {
		t.Helper()
		manifests, err := run(t, h, append([]string{"template", "ccm", chart, "-n", "kube-system", "-f", values}, args...)...)
		if err != nil {
			t.Fatalf("helm template %v: %v", args, err)
		}
		for _, obj := range decodeAll(t, manifests) {
			switch o := obj.(type) {
			case *rbacv1.ClusterRole:
				for _, r := range o.Rules {
					if slices.Contains(r.APIGroups, "certificates.k8s.io") {
						approve = append(approve, r)
					}
				}
			case *corev1.ConfigMap:
				if o.Name == "vsphere-cloud-config" {
					if cfg, _, err = config.Parse("helm:vsphere.conf", []byte(o.Data["vsphere.conf"]), config.Options{}); err != nil {
						t.Fatalf("rendered config %v: %v", args, err)
					}
				}
			}
		}
		return cfg, approve
	}
	cfg, rules := render()
	if cfg.Nodes.ServingCertificates.Approve || len(rules) != 0 {
		t.Errorf("off by default: approve %v, certificate rules %v", cfg.Nodes.ServingCertificates.Approve, rules)
	}
	if _, err := run(t, h, "lint", "--strict", chart, "-f", values, "--set", "nodes.servingCertificates.approve=true"); err != nil {
		t.Errorf("helm lint with approval: %v", err)
	}
	cfg, rules = render("--set", "nodes.servingCertificates.approve=true")
	if !cfg.Nodes.ServingCertificates.Approve {
		t.Error("approval asked for, not in the rendered config")
	}
	var signers, approval bool
	for _, r := range rules {
		if slices.Contains(r.Resources, "signers") {
			signers = slices.Equal(r.ResourceNames, []string{"kubernetes.io/kubelet-serving"}) && slices.Equal(r.Verbs, []string{"approve"})
		}
		if slices.Contains(r.Resources, "certificatesigningrequests/approval") {
			approval = slices.Equal(r.Verbs, []string{"update"})
		}
	}
	if !signers || !approval {
		t.Errorf("approval RBAC: %+v", rules)
	}
}
