// Command demo shows the CCM working end to end on one machine: three
// simulated vCenters (two with zones from tags: 2 regions, 3 zones; one
// with a stretched cluster whose two sites are DRS host groups: region
// metro, zones metro-a and metro-b), a real kube-apiserver + etcd,
// the CCM binary, and nodes registered as kubelets would. It prints the
// nodes as the CCM initialized them and the `topology explain` view, then
// runs until Ctrl-C (or exits at once with DEMO_ONESHOT=1).
//
//	make demo
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

func main() {
	ccm := flag.String("ccm", "bin/vsphere-cloud-controller-manager", "the CCM binary")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *ccm, os.Getenv("DEMO_ONESHOT") == "1", os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "==> "+format+"\n", args...)
}

func run(ctx context.Context, ccm string, oneshot bool, out io.Writer) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(ccm); err != nil {
		return fmt.Errorf("%s: %w (run `make build` first, or use `make demo`)", ccm, err)
	}
	work, err := os.MkdirTemp("", "vsphere-ccm-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	step(out, "control plane: etcd + kube-apiserver (built from the Go module proxy on first use; a few minutes, once)")
	bin, err := controlplane.Binaries(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, bin, filepath.Join(work, "control-plane"))
	if err != nil {
		return err
	}
	defer cp.Stop()
	kube, err := cp.Client()
	if err != nil {
		return err
	}
	step(out, "API server ready at %s (kubeconfig %s)", cp.URL, cp.Kubeconfig)

	step(out, "simulated vCenters: vc-east (region east, zones east-1 and east-2), vc-west (region west, zone west-1) by tags;")
	step(out, "vc-metro: one stretched cluster, sites metro-a and metro-b as DRS host groups, each with a VM group and a should-run-on rule")
	fleet, err := vcsim.Start(ctx,
		vcsim.Spec{Name: "vc-east", Datacenters: []string{"dc-east"}, Clusters: 2, Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-west", Datacenters: []string{"dc-west"}, Clusters: 1, Hosts: 2, VMs: 2},
		vcsim.Spec{Name: "vc-metro", Datacenters: []string{"dc-metro"}, Clusters: 1, Hosts: 2, VMs: 2})
	if err != nil {
		return err
	}
	defer fleet.Close()
	if err := stretch(ctx, fleet.VCenter("vc-metro")); err != nil {
		return err
	}
	// Nodes as real clusters have them: 4 to 8 CPUs, 16 to 32 GiB, Linux.
	hardware := map[string]struct {
		cpus  int32
		memMB int64
		guest string
	}{"vc-east": {4, 16384, "ubuntu64Guest"}, "vc-west": {4, 16384, "rhel9_64Guest"}, "vc-metro": {8, 32768, "ubuntu64Guest"}}
	for _, v := range fleet.VCenters {
		hw := hardware[v.Name]
		for _, vm := range v.VMs {
			if err := v.SetHardware(ctx, vm.Ref, hw.cpus, hw.memMB, hw.guest); err != nil {
				return err
			}
		}
	}
	zones := map[string]string{"vc-east-dc-east-c0": "east-1", "vc-east-dc-east-c1": "east-2", "vc-west-dc-west-c0": "west-1"}
	for _, v := range fleet.VCenters[:2] {
		region := strings.TrimPrefix(v.Name, "vc-")
		for _, vm := range v.VMs {
			if err := v.Tag(ctx, "k8s-zone", zones[vm.Cluster], vm.ClusterRef); err != nil {
				return err
			}
			if err := v.Tag(ctx, "k8s-region", region, v.Datacenter(vm.Datacenter)); err != nil {
				return err
			}
		}
	}
	cfgPath := filepath.Join(work, "vsphere.yaml")
	cfgText := fleet.Config("labels:\n  zone: k8s-zone\n  region: k8s-region\n", nil) +
		"hostGroupZones:\n- vcenter: vc-metro\n  cluster: \"*\"\n  hostGroupPattern: ^(?P<zone>metro-[a-z])-hosts$\n  region: metro\n"
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		return err
	}

	logPath := filepath.Join(work, "ccm.log")
	step(out, "starting the CCM (log: %s)", logPath)
	p, err := ccmproc.Start(cp, ccm, cfgPath, logPath, nil)
	if err != nil {
		return err
	}
	defer p.StopWithin(30 * time.Second)

	vms := fleet.VMs()
	step(out, "registering %d nodes as kubelets with --cloud-provider=external would", len(vms))
	for _, vm := range vms {
		if err := controlplane.RegisterNode(ctx, kube, vm.Name, strings.ToUpper(vm.UUID)); err != nil {
			return err
		}
	}
	initialized := func(n *v1.Node) bool { return n.Spec.ProviderID != "" && !tainted(n) }
	if err := controlplane.WaitForNodes(ctx, kube, len(vms), 2*time.Minute, initialized); err != nil {
		return fmt.Errorf("%w; see %s", err, logPath)
	}
	if err := printNodes(ctx, kube, out); err != nil {
		return err
	}

	step(out, "topology explain")
	explain := exec.CommandContext(ctx, ccm, "topology", "explain", "--cloud-config", cfgPath)
	explain.Stdout, explain.Stderr = out, os.Stderr
	if err := explain.Run(); err != nil {
		return fmt.Errorf("topology explain: %w", err)
	}
	if oneshot {
		return nil
	}
	step(out, "running; try: KUBECONFIG=%s kubectl get nodes -L topology.kubernetes.io/zone  (Ctrl-C to stop and clean up)", cp.Kubeconfig)
	<-ctx.Done()
	return nil
}

// stretch makes the vCenter's cluster a stretched one: its first host is
// site metro-a, its second metro-b; VM i runs on host i mod 2 and is in
// that site's VM group.
func stretch(ctx context.Context, v *vcsim.VCenter) error {
	cluster := v.VMs[0].ClusterRef
	hosts := v.ClusterHosts(cluster)
	sites := []vcsim.Site{{Name: "metro-a", Hosts: hosts[:1]}, {Name: "metro-b", Hosts: hosts[1:2]}}
	for i, vm := range v.VMs {
		if err := v.Relocate(ctx, vm.Ref, hosts[i%2]); err != nil {
			return err
		}
		sites[i%2].VMs = append(sites[i%2].VMs, vm.Ref)
	}
	return v.Stretch(ctx, cluster, sites...)
}

func tainted(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == controlplane.UninitializedTaint {
			return true
		}
	}
	return false
}

func printNodes(ctx context.Context, kube kubernetes.Interface, out io.Writer) error {
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	step(out, "nodes as the CCM initialized them")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPROVIDER-ID\tZONE\tREGION\tINTERNAL-IP\tINSTANCE-TYPE\tVCENTER")
	for _, n := range list.Items {
		ip := ""
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP && ip == "" {
				ip = a.Address
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Spec.ProviderID, n.Labels["topology.kubernetes.io/zone"],
			n.Labels["topology.kubernetes.io/region"], ip, n.Labels[v1.LabelInstanceTypeStable], n.Labels[provider.LabelVCenter])
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}
