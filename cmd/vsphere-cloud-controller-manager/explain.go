package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/inventory"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/topology"
)

func newTopologyCommand(ctx context.Context, env []string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topology",
		Short: "Inspect how VMs map to zones and regions",
	}
	o := &explainOptions{env: env, stdout: stdout, stderr: stderr}
	explain := &cobra.Command{
		Use:   "explain",
		Short: "Connect to the vCenters and show, for every VM (or one node), its placement, zone and region, and which object and tag gave each",
		Long: `Connects with the given cloud-config (credentials from the Secrets it names, read
with --kubeconfig, from a secrets directory, or inline) and prints, for every VM
in scope or for one node or UUID: vCenter, datacenter, cluster, host, zone and
region, and where each value came from; for VMs of stretched clusters
(hostGroupZones) their intended and actual zone. With --csi, also what vSphere
CSI computes with the same categories (host chain only), flagging every
difference. With --kubeconfig, Nodes whose zone or region label no longer
matches their VM are listed as drifted. Then it lists tag and group conflicts,
untagged placements, unreachable vCenters, misplaced VMs, drifted Nodes and
CSI differences. Exit status 0 when there is no problem, 3 when problems were
found, 1 on errors.`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(ctx)
		},
	}
	o.AddFlags(explain.Flags())
	cmd.AddCommand(explain)
	return cmd
}

// explainOptions are the flags of `topology explain`.
type explainOptions struct {
	cloudConfig, kubeconfig, nodeName, uuid, output string
	timeout                                         time.Duration
	csi                                             bool

	env            []string
	stdout, stderr io.Writer
}

func (o *explainOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.cloudConfig, "cloud-config", "", "path of the cloud-config (YAML or INI)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig to read the Secrets the config names (and --node)")
	f.StringVar(&o.nodeName, "node", "", "explain only this Node (needs --kubeconfig)")
	f.StringVar(&o.uuid, "uuid", "", "explain only the VM with this BIOS UUID")
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	f.BoolVar(&o.csi, "csi", false, "also show what vSphere CSI computes with the same categories, and every difference")
}

// Validate checks the flags alone, before anything is read or connected.
func (o *explainOptions) Validate() error {
	switch {
	case o.cloudConfig == "":
		return fmt.Errorf("--cloud-config is required")
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("-o %q: use table or json", o.output)
	case o.nodeName != "" && o.kubeconfig == "":
		return fmt.Errorf("--node needs --kubeconfig to read the Node")
	}
	return nil
}

// Run connects, explains and prints; exit status 3 when problems were found.
func (o *explainOptions) Run(ctx context.Context) error {
	cfg, ok := load(o.cloudConfig, o.env, o.stderr)
	if !ok {
		return exitError{1}
	}
	kube, err := kubeClient(o.kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	ctx = klog.NewContext(ctx, klog.LoggerWithName(klog.Background(), "explain").V(1))
	// Every VM is explained unless one is asked for.
	p, err := startOneShot(ctx, cfg, kube, provider.Options{AllVMDetails: o.nodeName == "" && o.uuid == ""})
	if err != nil {
		return err
	}
	defer p.Close()
	var vms []inventory.VM
	opts := provider.ExplainOptions{CSI: o.csi}
	switch {
	case o.nodeName != "":
		node, err := kube.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		vm, err := p.FindVM(ctx, node)
		if err != nil {
			return err
		}
		vms = append(vms, vm)
		opts.Nodes = []v1.Node{*node}
	case o.uuid != "":
		vm, err := p.Inventory().FindByUUID(ctx, o.uuid)
		if err != nil {
			return err
		}
		vms = append(vms, vm)
	}
	if kube != nil && o.nodeName == "" {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list Nodes (for drift): %w", err)
		}
		opts.Nodes = nodes.Items
	}
	ex := p.Explain(ctx, opts, vms...)
	if o.output == "json" {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ex); err != nil {
			return err
		}
	} else {
		printExplanation(o.stdout, ex)
	}
	if ex.Problems() > 0 {
		return exitError{3}
	}
	return nil
}

func printExplanation(w io.Writer, ex provider.Explanation) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	withCSI := len(ex.Placements) > 0 && ex.Placements[0].CSI != nil
	head := "VM\tVCENTER\tDATACENTER\tCLUSTER\tHOST\tZONE\tREGION\tPOWER"
	if withCSI {
		head += "\tCSI ZONE\tCSI REGION"
	}
	fmt.Fprintln(tw, head)
	for _, p := range ex.Placements {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", p.VM, p.VCenter, p.Datacenter, dash(p.Cluster), dash(p.Host),
			value(p.Zone, p.Error), value(p.Region, p.Error), p.PowerState)
		if p.CSI != nil {
			fmt.Fprintf(tw, "\t%s\t%s", value(p.CSI.Zone, p.CSI.Error), value(p.CSI.Region, p.CSI.Error))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Sources:")
	for _, p := range ex.Placements {
		var parts []string
		if p.Zone != nil {
			parts = append(parts, "zone from "+p.Zone.From)
		}
		if p.Region != nil {
			parts = append(parts, "region from "+p.Region.From)
		}
		for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
			v := p.Labels[k]
			parts = append(parts, fmt.Sprintf("%s=%s from %s", k, v.Value, v.From))
		}
		if it := p.InstanceType; it.Value != "" {
			parts = append(parts, fmt.Sprintf("instance type %s from %s", it.Value, it.From))
		}
		if len(parts) == 0 {
			parts = append(parts, "no zone or region")
		}
		if p.Site != nil {
			parts = append(parts, "site: intended "+siteValue(p.Site.Intended)+", actual "+siteValue(p.Site.Actual))
			if p.Warning != "" {
				parts = append(parts, "WARNING: "+p.Warning)
			}
		}
		fmt.Fprintf(w, "  %s: %s\n", p.VM, strings.Join(parts, "; "))
	}
	section := func(title string, items []string) {
		fmt.Fprintf(w, "\n%s: %d\n", title, len(items))
		for _, it := range items {
			fmt.Fprintf(w, "  - %s\n", it)
		}
	}
	fmt.Fprintf(w, "\nNode deletion: %s\n", ex.Deletion)
	fmt.Fprintln(w, "Datacenters read:")
	for _, s := range ex.Scope {
		fmt.Fprintf(w, "  %s\n", s)
	}
	section("Conflicts", ex.Conflicts)
	section("Untagged placements", ex.Untagged)
	section("Unreachable vCenters", ex.Unreachable)
	section("vCenters that cannot prove a VM absent (no Node is deleted)", ex.Unprovable)
	section("Privileges the CCM's user lacks (VMs there are hidden from it; no Node is deleted)", ex.MissingPrivileges)
	section("Misplaced VMs (stretched clusters)", ex.Misplaced)
	section("Drifted Nodes", ex.Drifted)
	section("Deletions held (Nodes name a vCenter or datacenter not configured)", ex.DeletionsHeld)
	section("Nodes no CCM initializes (joined without the uninitialized taint)", ex.Uninitialized)
	if withCSI {
		section("Differences with vSphere CSI", ex.CSIDifferences)
	}
}

// siteValue is a site's zone, or none; its source is in -o json and, for
// the intended zone, in the zone's own source.
func siteValue(v *topology.Value) string {
	if v == nil {
		return "none"
	}
	return v.Value
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func value(v *topology.Value, errText string) string {
	switch {
	case v != nil:
		return v.Value
	case errText != "":
		return "ERROR"
	}
	return "-"
}
