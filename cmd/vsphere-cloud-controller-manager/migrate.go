package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/preflight"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

// preflightReport is the -o json output of migrate preflight.
type preflightReport struct {
	Nodes       int                    `json:"nodes"`
	Blocking    bool                   `json:"blocking"`
	Differences []preflight.Difference `json:"differences"`
	// NSXTUnmanaged lists the Services and Nodes whose NSX-T objects the
	// reference CCM managed with this config's NSX-T sections, and this
	// CCM will not; they block unless NSXTAcknowledged (--acknowledge-nsxt).
	NSXTUnmanaged    []preflight.Unmanaged `json:"nsxtUnmanaged"`
	NSXTAcknowledged bool                  `json:"nsxtAcknowledged"`
	// MissingPrivileges are, per vCenter, the objects on which the CCM's
	// user lacks System.Read: VMs there are hidden from it, and no Node is
	// deleted for a missing VM while any is (not blocking: nothing of the
	// switch depends on it, but grant them).
	MissingPrivileges []string `json:"missingPrivileges,omitempty"`
}

func newMigrateCommand(ctx context.Context, env []string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Prepare the switch from another vSphere CCM (kubernetes/cloud-provider-vsphere, in-tree)",
	}
	o := &preflightOptions{env: env, stdout: stdout, stderr: stderr}
	pre := &cobra.Command{
		Use:   "preflight",
		Short: "Compare every Node's providerID, zone, region, instance type and addresses with what this CCM would set",
		Long: `Connects to the vCenters of a cloud-config (credentials from the Secrets it names,
read with --kubeconfig, a secrets directory, or inline) and, for every Node of the
cluster, compares what the running CCM set (providerID, GA and beta zone and
region labels, instance type labels, addresses in order with the Hostname) with
what this CCM would set. Nothing is written: no Node, no event. Kubernetes sets
providerID and these labels only when it initializes a Node, so a providerID,
zone or region that would differ stays on the Node and drifts: such
differences, and Nodes whose VM is not found, block the switch.

With the reference's NSX-T sections in the cloud-config (loadBalancer,
loadBalancerClass, route), it also lists the Services of type LoadBalancer
that the reference's NSX-T load balancer served and the Nodes whose Pod
routes it kept: this CCM runs neither controller, so they block the switch
until --acknowledge-nsxt says the operator has moved them (or accepts
managing the NSX-T objects by hand).

Exit status 0 when nothing blocks, 3 when something does, 1 on errors.`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(ctx)
		},
	}
	o.AddFlags(pre.Flags())
	cmd.AddCommand(pre)
	return cmd
}

// preflightOptions are the flags of `migrate preflight`.
type preflightOptions struct {
	cloudConfig, kubeconfig, output string
	timeout                         time.Duration
	acknowledgeNSXT                 bool

	env            []string
	stdout, stderr io.Writer
}

func (o *preflightOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.cloudConfig, "cloud-config", "", "path of this CCM's cloud-config (YAML or INI; the reference's file works as it is)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (Nodes, and the Secrets the config names)")
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	f.BoolVar(&o.acknowledgeNSXT, "acknowledge-nsxt", false, "the Services and Nodes whose NSX-T load balancers and routes the reference CCM managed are taken care of: do not block on them")
}

func (o *preflightOptions) Validate() error {
	if o.cloudConfig == "" || o.kubeconfig == "" {
		return fmt.Errorf("--cloud-config and --kubeconfig are required")
	}
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("-o %q: use table or json", o.output)
	}
	return nil
}

// Run compares every Node with what this CCM would set, through the
// provider's Preview: the InstanceMetadata answer without its effects.
func (o *preflightOptions) Run(ctx context.Context) error {
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
	ctx = klog.NewContext(ctx, klog.LoggerWithName(klog.Background(), "preflight").V(1))
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Nodes: %w", err)
	}
	p, err := startOneShot(ctx, cfg, kube, provider.Options{})
	if err != nil {
		return err
	}
	defer p.Close()
	r := preflightReport{Nodes: len(nodes.Items), Differences: []preflight.Difference{}, NSXTUnmanaged: []preflight.Unmanaged{},
		NSXTAcknowledged: o.acknowledgeNSXT}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		md, err := p.Preview(ctx, n)
		r.Differences = append(r.Differences, preflight.Compare(n, md, err, provider.PlacementLabelKeys(cfg.Labels.Placement))...)
	}
	if cfg.NSXT.LoadBalancer {
		services, err := kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list Services (the config has the reference's NSX-T load balancer): %w", err)
		}
		r.NSXTUnmanaged = append(r.NSXTUnmanaged, preflight.LoadBalanced(cfg.NSXT, services.Items)...)
	}
	r.NSXTUnmanaged = append(r.NSXTUnmanaged, preflight.Routed(cfg.NSXT, nodes.Items)...)
	for _, ix := range p.Inventory().Indexes() {
		privs := ix.CheckPrivileges(ctx)
		for _, m := range privs.Missing {
			r.MissingPrivileges = append(r.MissingPrivileges, ix.VCenter()+": "+m.String())
		}
		if privs.Err != nil {
			r.MissingPrivileges = append(r.MissingPrivileges, privs.Err.Error())
		}
	}
	r.Blocking = preflight.Blocks(r.Differences) || (len(r.NSXTUnmanaged) > 0 && !o.acknowledgeNSXT)
	if o.output == "json" {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printPreflight(o.stdout, r)
	}
	if r.Blocking {
		return exitError{3}
	}
	return nil
}

func printPreflight(w io.Writer, r preflightReport) {
	printUnmanaged(w, r)
	if len(r.MissingPrivileges) > 0 {
		fmt.Fprintln(w, "Privileges the CCM's user lacks (VMs there are hidden from it; no Node is deleted for a missing VM until they are granted):")
		for _, m := range r.MissingPrivileges {
			fmt.Fprintf(w, "  %s\n", m)
		}
		fmt.Fprintln(w)
	}
	if len(r.Differences) == 0 {
		fmt.Fprintf(w, "%d Nodes checked: this CCM would set the same providerID, zone, region, instance type and addresses on every one.\n", r.Nodes)
		if r.Blocking {
			fmt.Fprintf(w, "Do not switch yet: the NSX-T objects above are not taken care of.\n")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tFIELD\tCURRENT\tWOULD BE\tIMPACT")
	for _, d := range r.Differences {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Node, d.Field, dash(d.Current), dash(d.Would), d.Impact)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	seen := map[string]bool{}
	for _, d := range r.Differences {
		if key := string(d.Impact) + d.Why; !seen[key] {
			seen[key] = true
			fmt.Fprintf(w, "%s: %s\n", d.Impact, d.Why)
		}
	}
	switch {
	case preflight.Blocks(r.Differences):
		fmt.Fprintf(w, "\n%d Nodes checked: do not switch yet; resolve the blocking differences first.\n", r.Nodes)
	case r.Blocking:
		fmt.Fprintf(w, "\n%d Nodes checked: no Node difference blocks, but do not switch yet: the NSX-T objects above are not taken care of (--acknowledge-nsxt once they are).\n", r.Nodes)
	default:
		fmt.Fprintf(w, "\n%d Nodes checked: nothing blocks the switch.\n", r.Nodes)
	}
}

// printUnmanaged prints the Services and Nodes whose NSX-T objects the
// reference managed, what stops after the switch and what to do.
func printUnmanaged(w io.Writer, r preflightReport) {
	if len(r.NSXTUnmanaged) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tNSX-T (managed by the reference CCM)")
	for _, u := range r.NSXTUnmanaged {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Kind, u.Name, u.NSXT)
	}
	_ = tw.Flush()
	impact := "blocking"
	if r.NSXTAcknowledged {
		impact = "acknowledged (--acknowledge-nsxt)"
	}
	fmt.Fprintf(w, "\n%s: %s\n\n", impact, preflight.UnmanagedAfterSwitch)
}
