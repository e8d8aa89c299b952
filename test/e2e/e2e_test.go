//go:build e2e

// Package e2e runs the real CCM binary against a real kube-apiserver and
// etcd (built by hack/build-control-plane.sh) and three simulated vCenters.
//
//	make e2e
package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
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

type harness struct {
	t       *testing.T
	ctx     context.Context
	root    string
	work    string
	cp      *controlplane.ControlPlane
	kube    kubernetes.Interface
	fleet   *vcsim.Fleet
	binary  string
	ccm     *exec.Cmd
	ccmLog  string
	cfgPath string
	serving string // the CCM's secure serving address (health, metrics)
	// ccmKubeconfig authenticates as the shipped ServiceAccount.
	ccmKubeconfig string
}

// secretName is the credential Secret the shipped RBAC lets the CCM read.
const secretName = "vsphere-credentials"

func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

func setup(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, root: repoRoot(t), work: t.TempDir()}

	bin, err := controlplane.Binaries(ctx, h.root, os.Stderr)
	must(t, err)
	h.cp, err = controlplane.Start(ctx, bin, filepath.Join(h.work, "control-plane"))
	must(t, err)
	t.Cleanup(h.cp.Stop)
	h.kube, err = h.cp.Client()
	must(t, err)

	h.binary = filepath.Join(h.work, "vsphere-cloud-controller-manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", h.binary, "./cmd/vsphere-cloud-controller-manager")
	build.Dir = h.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	// Stretched: vc-a has two zones (clusters) in region dc-1 and a second
	// region; vc-b and vc-c one zone each. Regions on datacenters, zones on
	// clusters.
	h.fleet, err = vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-a", Datacenters: []string{"dc-1"}, Clusters: 2, Hosts: 1, VMs: 2},
		vcsim.Spec{Name: "vc-b", Datacenters: []string{"dc-2"}, Hosts: 1, VMs: 3},
		vcsim.Spec{Name: "vc-c", Datacenters: []string{"dc-3"}, Hosts: 1, VMs: 2})
	must(t, err)
	t.Cleanup(h.fleet.Close)
	for _, v := range h.fleet.VCenters {
		for _, vm := range v.VMs {
			must(t, v.Tag(ctx, "k8s-zone", "zone-"+vm.Cluster, vm.ClusterRef))
			must(t, v.Tag(ctx, "k8s-region", "region-"+vm.Datacenter, v.Datacenter(vm.Datacenter)))
		}
	}
	// The shipped manifests: all pass a server-side dry run; the
	// ServiceAccount and RBAC are created, and the CCM runs with them only.
	h.applyManifests(t, "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	h.ccmKubeconfig = h.serviceAccountKubeconfig()

	// vc-a's credentials come from the Secret the shipped RBAC allows.
	a := h.fleet.VCenter("vc-a")
	h.setSecret(t, secretName, a.User, a.Password, true)
	text := h.fleet.Config("global:\n  connectTimeout: 5s\n  requestTimeout: 5s\nlabels:\n  zone: k8s-zone\n  region: k8s-region\n",
		map[string][]string{"vc-a": {"secretName: " + secretName, "secretNamespace: kube-system"}})
	// Inline credentials of vc-a are removed: the Secret is the only source.
	text = strings.Replace(text, "    user: "+a.User+"\n    password: "+a.Password+"\n", "", 1)
	h.cfgPath = filepath.Join(h.work, "vsphere.yaml")
	must(t, os.WriteFile(h.cfgPath, []byte(text), 0o600))
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
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
	must(t, err)
}

// startCCM runs the binary as a process, as a Deployment would.
func (h *harness) startCCM(extra ...string) {
	h.t.Helper()
	// Kept after the run (ignored folder) for post-mortems.
	artifacts := filepath.Join(h.root, ".cache", "e2e")
	must(h.t, os.MkdirAll(artifacts, 0o755))
	h.ccmLog = filepath.Join(artifacts, "ccm.log")
	logf, err := os.Create(h.ccmLog)
	must(h.t, err)
	args, err := h.cp.CCMArgs(h.cfgPath)
	must(h.t, err)
	for i, a := range args {
		if port, ok := strings.CutPrefix(a, "--secure-port="); ok {
			h.serving = "https://127.0.0.1:" + port
		}
		for _, f := range []string{"--kubeconfig=", "--authentication-kubeconfig=", "--authorization-kubeconfig="} {
			if strings.HasPrefix(a, f) {
				args[i] = f + h.ccmKubeconfig
			}
		}
	}
	args = append(args, extra...)
	h.ccm = exec.Command(h.binary, args...)
	h.ccm.Stdout, h.ccm.Stderr = logf, logf
	h.ccm.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(h.t, h.ccm.Start())
	h.t.Cleanup(func() {
		_ = h.ccm.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = h.ccm.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = h.ccm.Process.Kill()
		}
		logf.Close()
		if h.t.Failed() {
			b, _ := os.ReadFile(h.ccmLog)
			h.t.Logf("CCM log (tail; all of it in %s):\n%s", h.ccmLog, tailString(string(b), 6000))
		}
	})
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// register creates a Node the way kubelet --cloud-provider=external does.
func (h *harness) register(t *testing.T, vm vcsim.VM, swapped bool) {
	t.Helper()
	uuid := strings.ToUpper(vm.UUID)
	if swapped {
		uuid = strings.ToUpper(inventory.SwapUUID(vm.UUID))
	}
	must(t, controlplane.RegisterNode(h.ctx, h.kube, vm.Name, uuid))
}

func (h *harness) node(name string) (*v1.Node, error) {
	return h.kube.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
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

func TestE2E(t *testing.T) {
	h := setup(t)
	a, b, c := h.fleet.VCenter("vc-a"), h.fleet.VCenter("vc-b"), h.fleet.VCenter("vc-c")

	t.Run("a config mistake exits non-zero with the error", func(t *testing.T) {
		bad := filepath.Join(h.work, "bad.yaml")
		must(t, os.WriteFile(bad, []byte("global:\n  port: 443\nvcenter:\n  x:\n    server: vc.example.com\n    insecureFlg: true\n"), 0o600))
		var stderr bytes.Buffer
		cmd := exec.CommandContext(h.ctx, h.binary, "--cloud-config="+bad, "--kubeconfig="+h.cp.Kubeconfig)
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
			t.Fatalf("exit: %v", err)
		}
		if !strings.Contains(stderr.String(), bad+":6: vcenter[\"x\"].insecureFlg") || !strings.Contains(stderr.String(), "did you mean insecureFlag") {
			t.Errorf("stderr does not name file:line and field:\n%s", stderr.String())
		}
	})

	// At the highest verbosity: no credential may reach the log anyway.
	h.startCCM("--v=10")
	// Register all but the last VM of each vCenter now; those come later.
	var first []vcsim.VM
	for i, v := range h.fleet.VCenters {
		for j, vm := range v.VMs[:len(v.VMs)-1] {
			h.register(t, vm, (i+j)%2 == 1)
			first = append(first, vm)
		}
	}

	t.Run("every node is initialized", func(t *testing.T) {
		h.waitInitialized(t, first...)
	})

	t.Run("a node without a VM gets a VMNotFound event, never a guess", func(t *testing.T) {
		must(t, controlplane.RegisterNode(h.ctx, h.kube, "ghost-node", "4299FFFF-0000-4000-8000-000000000000"))
		poll.NoError(t, "VMNotFound event", 30*time.Second, func() error {
			evs, err := h.kube.CoreV1().Events("").List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=ghost-node"})
			if err != nil {
				return err
			}
			for _, ev := range evs.Items {
				if ev.Reason == "VMNotFound" && ev.Type == v1.EventTypeWarning && strings.Contains(ev.Message, "ghost-node") {
					return nil
				}
			}
			return fmt.Errorf("%d events, none VMNotFound", len(evs.Items))
		})
		// Every vCenter answered and none has it: the lifecycle controller may delete it.
		poll.NoError(t, "ghost node deleted", 30*time.Second, func() error {
			if _, err := h.node("ghost-node"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	})

	t.Run("powered off VM gets the shutdown taint, loses it when back", func(t *testing.T) {
		vm := b.VMs[0]
		obj := object.NewVirtualMachine(b.Admin(), vm.Ref)
		task, err := obj.PowerOff(h.ctx)
		must(t, err)
		must(t, task.Wait(h.ctx))
		poll.NoError(t, "shutdown taint", 30*time.Second, func() error {
			n, err := h.node(vm.Name)
			if err != nil || !hasTaint(n, shutdownTaint) {
				return fmt.Errorf("no shutdown taint (%v)", err)
			}
			return nil
		})
		task, err = obj.PowerOn(h.ctx)
		must(t, err)
		must(t, task.Wait(h.ctx))
		// The kubelet reports Ready again.
		n, err := h.node(vm.Name)
		must(t, err)
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
		_, err = h.kube.CoreV1().Nodes().UpdateStatus(h.ctx, n, metav1.UpdateOptions{})
		must(t, err)
		poll.NoError(t, "shutdown taint removed", 30*time.Second, func() error {
			n, err := h.node(vm.Name)
			if err != nil || hasTaint(n, shutdownTaint) {
				return fmt.Errorf("still tainted (%v)", err)
			}
			return nil
		})
	})

	t.Run("destroyed VM: node deleted", func(t *testing.T) {
		vm := c.VMs[0]
		obj := object.NewVirtualMachine(c.Admin(), vm.Ref)
		task, err := obj.PowerOff(h.ctx)
		must(t, err)
		must(t, task.Wait(h.ctx))
		task, err = obj.Destroy(h.ctx)
		must(t, err)
		must(t, task.Wait(h.ctx))
		poll.NoError(t, "node deleted", 30*time.Second, func() error {
			if _, err := h.node(vm.Name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("node still there (%v)", err)
			}
			return nil
		})
	})

	t.Run("vCenter outage deletes nothing; recovery reconciles", func(t *testing.T) {
		must(t, a.SetMode(vcsim.Down))
		// Several lifecycle passes (every 2s) with vc-a unreachable.
		newB := b.VMs[len(b.VMs)-1]
		h.register(t, newB, false)
		h.waitInitialized(t, newB) // other vCenters keep working
		newA := a.VMs[len(a.VMs)-1]
		h.register(t, newA, false)
		time.Sleep(12 * time.Second)
		for _, vm := range a.VMs {
			n, err := h.node(vm.Name)
			if err != nil {
				t.Fatalf("node %s of the unreachable vCenter: %v", vm.Name, err)
			}
			if vm.Name == newA.Name && !hasTaint(n, uninitializedTaint) {
				t.Errorf("%s initialized while its vCenter is down?", vm.Name)
			}
		}
		must(t, a.SetMode(vcsim.Up))
		h.waitInitialized(t, newA)
	})

	t.Run("credentials rotated in the Secret and the vCenter, no restart", func(t *testing.T) {
		h.setSecret(t, secretName, a.User, "rotated-password", false)
		time.Sleep(time.Second) // the informer delivers the update
		a.SetPassword("rotated-password")
		n, err := a.TerminateSessions(h.ctx)
		must(t, err)
		if n == 0 {
			t.Fatal("no session of the CCM on vc-a to terminate")
		}
		vm := c.VMs[len(c.VMs)-1] // unregistered so far
		h.register(t, vm, true)
		h.waitInitialized(t, vm)
		// vc-a is still served: a status pass refreshes its nodes without errors.
		poll.NoError(t, "vc-a logged in again", 30*time.Second, func() error {
			if got, _ := a.CountSessions(h.ctx); got == 0 {
				return fmt.Errorf("no session on vc-a")
			}
			return nil
		})
		if failed := a.FailedLogins(); len(failed) > 0 {
			t.Errorf("%d failed logins during an orderly rotation", len(failed))
		}

		// The other order: the vCenter first. The CCM's next login is
		// rejected once; the Secret update is tried at once.
		a.SetPassword("third-password")
		_, err = a.TerminateSessions(h.ctx)
		must(t, err)
		poll.NoError(t, "the stale password rejected", 30*time.Second, func() error {
			if len(a.FailedLogins()) == 0 {
				return fmt.Errorf("no login attempt yet")
			}
			return nil
		})
		h.setSecret(t, secretName, a.User, "third-password", false)
		poll.NoError(t, "vc-a logged in with the new Secret", 30*time.Second, func() error {
			if got, _ := a.CountSessions(h.ctx); got == 0 {
				return fmt.Errorf("no session on vc-a")
			}
			return nil
		})
		if failed := a.FailedLogins(); len(failed) != 1 {
			t.Errorf("%d failed logins, want exactly 1", len(failed))
		}
	})

	t.Run("expired session is invisible", func(t *testing.T) {
		_, err := b.TerminateSessions(h.ctx)
		must(t, err)
		n, err := h.node(b.VMs[1].Name)
		must(t, err)
		// Delete and re-register: initialization needs vc-b right after its session died.
		must(t, h.kube.CoreV1().Nodes().Delete(h.ctx, n.Name, metav1.DeleteOptions{}))
		h.register(t, b.VMs[1], false)
		h.waitInitialized(t, b.VMs[1])
	})

	t.Run("the Helm chart renders manifests the API server accepts", func(t *testing.T) {
		objs := h.helmManifests("kube-system")
		if len(objs) < 10 {
			t.Fatalf("the chart rendered %d objects", len(objs))
		}
		h.dryRunApply(t, objs)
	})

	t.Run("topology explain reads the Secret through a kubeconfig and explains one node", func(t *testing.T) {
		vm := a.VMs[0]
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(h.ctx, h.binary, "topology", "explain", "--cloud-config", h.cfgPath,
			"--kubeconfig", h.cp.Kubeconfig, "--node", vm.Name, "-o", "json")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("topology explain: %v\n%s", err, stderr.String())
		}
		var ex provider.Explanation
		must(t, json.Unmarshal(stdout.Bytes(), &ex))
		if len(ex.Placements) != 1 || ex.Placements[0].VM != vm.Name || ex.Placements[0].Zone == nil ||
			ex.Placements[0].Zone.Value != "zone-"+vm.Cluster || !strings.Contains(ex.Placements[0].Zone.From, "cluster "+vm.Cluster) {
			t.Errorf("explain: %s", stdout.String())
		}
	})

	t.Run("health and metrics are served", func(t *testing.T) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed serving cert of the test CCM
		get := func(path string) string {
			res, err := hc.Get(h.serving + path)
			must(t, err)
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s\n%s", path, res.Status, b)
			}
			return string(b)
		}
		if body := get("/healthz"); body != "ok" {
			t.Errorf("/healthz: %q", body)
		}
		body := get("/metrics")
		for _, want := range []string{
			`vsphere_ccm_vcenter_up{vcenter="vc-a"} 1`, `vsphere_ccm_vcenter_up{vcenter="vc-b"} 1`,
			`vsphere_ccm_vcenter_logins_total{result="rejected",vcenter="vc-a"} 1`,
			`vsphere_ccm_node_lookups_total{result="found"}`,
			`vsphere_ccm_vcenter_requests_total{api="soap",method="WaitForUpdatesEx",outcome="ok",vcenter="vc-b"}`,
			`vsphere_ccm_vcenter_requests_total{api="rest",method="tagging/tag-association:list-attached-tags-on-objects",outcome="ok",vcenter="vc-c"}`,
			`vsphere_ccm_inventory_vms{vcenter="vc-b"} 3`,
			`vsphere_ccm_tag_cache_age_seconds{vcenter="vc-a"}`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		for _, v := range h.fleet.VCenters {
			if strings.Contains(body, v.Password) || strings.Contains(body, "password") {
				t.Errorf("/metrics mentions a password")
			}
		}
	})

	log, _ := os.ReadFile(h.ccmLog)
	if !strings.Contains(string(log), "-v=10 lowered to 7") {
		t.Errorf("no warning about the verbosity cap in the CCM log")
	}
	if strings.Contains(strings.ToLower(string(log)), "forbidden") {
		t.Errorf("the CCM hit an RBAC denial with the shipped RBAC; see %s", h.ccmLog)
	}
	for _, pw := range []string{a.Password, b.Password, c.Password, "rotated-password", "third-password"} {
		for _, form := range []string{pw, base64.StdEncoding.EncodeToString([]byte(pw))} {
			if strings.Contains(string(log), form) {
				t.Errorf("a password appears in the CCM log (%d bytes of log at -v=10)", len(log))
			}
		}
	}
}
