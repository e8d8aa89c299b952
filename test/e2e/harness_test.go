//go:build e2e

// Package e2e runs the real CCM binary against a real kube-apiserver and
// etcd (built by hack/build-control-plane.sh) and three simulated vCenters.
// Every test builds its own control plane and vCenters, so one failure
// does not hide the others, and runs in parallel with the others (as many
// at once as go test's -parallel, GOMAXPROCS by default): most of a test's
// time is spent waiting on its processes. A test whose check has a time
// bound (a lease renewed within seconds) runs alone, before the others.
//
//	make e2e
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

const (
	uninitializedTaint = controlplane.UninitializedTaint
	shutdownTaint      = "node.cloudprovider.kubernetes.io/shutdown"
	zoneLabel          = "topology.kubernetes.io/zone"
	regionLabel        = "topology.kubernetes.io/region"
	instanceTypeLabel  = "node.kubernetes.io/instance-type"
)

// secretName is the credential Secret the shipped RBAC lets the CCM read.
const secretName = "vsphere-credentials"

// built is the CCM binary and the control-plane binaries, built once by
// TestMain for every test.
var built struct{ ccm, controlPlane string }

func TestMain(m *testing.M) {
	os.Exit(func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		root, err := repoRoot()
		if err == nil {
			built.controlPlane, err = controlplane.Binaries(ctx, root, os.Stderr)
		}
		dir, derr := os.MkdirTemp("", "e2e-ccm-")
		if err == nil {
			err = derr
			defer os.RemoveAll(dir)
		}
		if err == nil {
			built.ccm = filepath.Join(dir, "vsphere-cloud-controller-manager")
			// As shipped: make build stamps the version from git.
			build := exec.CommandContext(ctx, "make", "--no-print-directory", "build", "BIN="+built.ccm)
			build.Dir = root
			if out, berr := build.CombinedOutput(); berr != nil {
				err = fmt.Errorf("build: %v\n%s", berr, out)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		return m.Run()
	}())
}

type harness struct {
	t      *testing.T
	ctx    context.Context
	root   string
	work   string
	cp     *controlplane.ControlPlane
	kube   kubernetes.Interface
	fleet  *vcsim.Fleet
	binary string
	// cfgPath is the cloud config every CCM of the test runs with.
	cfgPath string
	// ccmKubeconfig authenticates as the shipped ServiceAccount.
	ccmKubeconfig string
	mu            sync.Mutex // guards ccms
	ccms          int        // CCM processes started so far
	// ccmEnv is added to the CCM's environment (KEY=VALUE).
	ccmEnv []string
	// configTail is appended to the cloud config (top-level sections).
	configTail string
	// labelsTail is appended to its labels section (indented keys).
	labelsTail string
}

// defaultFleet: vc-a has two zones (clusters) in region dc-1; vc-b and
// vc-c one zone each.
var defaultFleet = []vcsim.Spec{
	{Name: "vc-a", Datacenters: []string{"dc-1"}, Clusters: 2, Hosts: 1, VMs: 2},
	{Name: "vc-b", Datacenters: []string{"dc-2"}, Hosts: 1, VMs: 3},
	{Name: "vc-c", Datacenters: []string{"dc-3"}, Hosts: 1, VMs: 2},
}

func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Clean(filepath.Join(wd, "..", "..")), nil
}

// setup starts a control plane with the shipped RBAC, three simulated
// vCenters with zone and region tags, the credential Secret of vc-a, and
// writes the cloud config. No CCM runs yet.
func setup(t *testing.T) *harness {
	t.Helper()
	return setupFleet(t, defaultFleet...)
}

// setupFleet starts a control plane and the given vCenters (the first is
// vc-a, whose credentials come from the Secret), tags regions on
// datacenters and zones on clusters, and writes the config.
func setupFleet(t *testing.T, specs ...vcsim.Spec) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	root, err := repoRoot()
	must.OK(t, err)
	h := &harness{t: t, ctx: ctx, root: root, work: t.TempDir(), binary: built.ccm}
	h.cp, err = controlplane.Start(ctx, built.controlPlane, filepath.Join(h.work, "control-plane"))
	must.OK(t, err)
	t.Cleanup(h.cp.Stop)
	h.kube, err = h.cp.Client()
	must.OK(t, err)

	h.fleet, err = vcsim.Start(ctx, specs...)
	must.OK(t, err)
	t.Cleanup(h.fleet.Close)
	must.OK(t, h.fleet.TagZones(ctx))
	// The shipped manifests: all pass a server-side dry run; the
	// ServiceAccount and RBAC are created, and the CCM runs with them only.
	h.applyManifests(t, "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	h.ccmKubeconfig = h.serviceAccountKubeconfig()

	// vc-a's credentials come from the Secret the shipped RBAC allows.
	a := h.fleet.VCenter("vc-a")
	h.setSecret(t, secretName, a.User, a.Password, true)
	h.writeConfig(nil)
	return h
}

// writeConfig writes the cloud config: the fleet with vc-a's credentials
// from the Secret only, plus per-vCenter lines.
func (h *harness) writeConfig(per map[string][]string) {
	h.t.Helper()
	a := h.fleet.VCenter("vc-a")
	lines := map[string][]string{"vc-a": {"secretName: " + secretName, "secretNamespace: kube-system"}}
	for vc, l := range per {
		lines[vc] = append(lines[vc], l...)
	}
	text := h.fleet.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 5s\nlabels:\n  zone: k8s-zone\n  region: k8s-region\n"+h.labelsTail, lines) + h.configTail
	text = strings.Replace(text, "    user: "+a.User+"\n    password: "+a.Password+"\n", "", 1)
	h.cfgPath = filepath.Join(h.work, "vsphere.yaml")
	must.OK(h.t, os.WriteFile(h.cfgPath, []byte(text), 0o600))
}

func (h *harness) setSecret(t *testing.T, name, user, pass string, create bool) {
	t.Helper()
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
		Data: map[string][]byte{"127.0.0.1.username": []byte(user), "127.0.0.1.password": []byte(pass)}}
	var err error
	if create {
		_, err = h.kube.CoreV1().Secrets("kube-system").Create(h.ctx, s, metav1.CreateOptions{})
	} else {
		_, err = h.kube.CoreV1().Secrets("kube-system").Update(h.ctx, s, metav1.UpdateOptions{})
	}
	must.OK(t, err)
}

// setSecretData replaces the data of vc-a's Secret.
func (h *harness) setSecretData(t *testing.T, data map[string]string) {
	t.Helper()
	s, err := h.kube.CoreV1().Secrets("kube-system").Get(h.ctx, secretName, metav1.GetOptions{})
	must.OK(t, err)
	s.Data = map[string][]byte{}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	_, err = h.kube.CoreV1().Secrets("kube-system").Update(h.ctx, s, metav1.UpdateOptions{})
	must.OK(t, err)
}

// register creates a Node the way kubelet --cloud-provider=external does.
func (h *harness) register(t *testing.T, vm vcsim.VM, swapped bool) {
	t.Helper()
	uuid := strings.ToUpper(vm.UUID)
	if swapped {
		uuid = strings.ToUpper(inventory.SwapUUID(vm.UUID))
	}
	must.OK(t, controlplane.RegisterNode(h.ctx, h.kube, vm.Name, uuid))
}

// registerAll registers a Node for every VM of the fleet.
func (h *harness) registerAll(t *testing.T) {
	t.Helper()
	for i, vm := range h.fleet.VMs() {
		h.register(t, vm, i%2 == 1)
	}
}

func (h *harness) node(name string) (*v1.Node, error) {
	return h.kube.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
}

// events returns the events about the named object.
func (h *harness) events(name string) ([]v1.Event, error) {
	evs, err := h.kube.CoreV1().Events("").List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return nil, err
	}
	return evs.Items, nil
}

// waitEvent waits for a Warning event with reason about the named object
// whose message contains every one of texts.
func (h *harness) waitEvent(t *testing.T, name, reason string, texts ...string) v1.Event {
	t.Helper()
	return h.waitEventWithin(t, 60*time.Second, name, reason, texts...)
}

// waitEventWithin is waitEvent with a deadline: an event later than that
// fails the test.
func (h *harness) waitEventWithin(t *testing.T, within time.Duration, name, reason string, texts ...string) v1.Event {
	t.Helper()
	var found v1.Event
	poll.NoError(t, reason+" event on "+name, within, func() error {
		evs, err := h.events(name)
		if err != nil {
			return err
		}
	next:
		for _, ev := range evs {
			if ev.Reason != reason || ev.Type != v1.EventTypeWarning {
				continue
			}
			for _, s := range texts {
				if !strings.Contains(ev.Message, s) {
					continue next
				}
			}
			found = ev
			return nil
		}
		return fmt.Errorf("%d events, none %s with %q", len(evs), reason, texts)
	})
	return found
}

func hasTaint(n *v1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// initialized checks everything the CCM sets on a node of vm.
func initialized(n *v1.Node, vm vcsim.VM) error {
	want := map[string]string{
		zoneLabel:                "zone-" + vm.Cluster,
		regionLabel:              "region-" + vm.Datacenter,
		provider.LabelVCenter:    vm.VCenter,
		provider.LabelDatacenter: vm.Datacenter,
		instanceTypeLabel:        "",
	}
	switch {
	case hasTaint(n, uninitializedTaint):
		return fmt.Errorf("%s still has the uninitialized taint", n.Name)
	case n.Spec.ProviderID != "vsphere://"+vm.UUID:
		return fmt.Errorf("%s providerID %q", n.Name, n.Spec.ProviderID)
	}
	for k, v := range want {
		got, ok := n.Labels[k]
		if !ok || (v != "" && got != v) {
			return fmt.Errorf("%s label %s=%q, want %q", n.Name, k, got, v)
		}
	}
	if !strings.HasPrefix(n.Labels[instanceTypeLabel], "vsphere-vm.cpu-") {
		return fmt.Errorf("%s instance type %q", n.Name, n.Labels[instanceTypeLabel])
	}
	var internal bool
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP && a.Address == vm.IPv4 {
			internal = true
		}
	}
	if !internal {
		return fmt.Errorf("%s addresses %v, want InternalIP %s", n.Name, n.Status.Addresses, vm.IPv4)
	}
	return nil
}

func (h *harness) waitInitialized(t *testing.T, vms ...vcsim.VM) {
	t.Helper()
	for _, vm := range vms {
		poll.NoError(t, "node "+vm.Name+" initialized", 60*time.Second, func() error {
			n, err := h.node(vm.Name)
			if err != nil {
				return err
			}
			return initialized(n, vm)
		})
	}
}

// uninitialized checks that the Nodes of vms are still waiting.
func (h *harness) uninitialized(t *testing.T, vms ...vcsim.VM) {
	t.Helper()
	for _, vm := range vms {
		n, err := h.node(vm.Name)
		must.OK(t, err)
		if !hasTaint(n, uninitializedTaint) || n.Spec.ProviderID != "" {
			t.Errorf("%s initialized while its vCenter was unusable", vm.Name)
		}
	}
}

// errNotYet is what a polled condition returns while it does not hold.
var errNotYet = errors.New("not yet")
