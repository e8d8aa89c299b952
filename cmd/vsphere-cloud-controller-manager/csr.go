package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/servingcsr"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/provider"
)

func newCSRCommand(ctx context.Context, env []string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "csr",
		Short: "Inspect kubelet serving certificate requests",
	}
	o := &csrExplainOptions{env: env, stdout: stdout, stderr: stderr}
	explain := &cobra.Command{
		Use:   "explain [NAME...]",
		Short: "Show what the CCM decides, and why, for every undecided kubelet serving certificate request (or the named ones)",
		Long: `Connects to the vCenters with the given cloud-config and to the cluster with
--kubeconfig, and decides every kubelet serving certificate request (signer
kubernetes.io/kubelet-serving) that is neither approved nor denied, or the
named requests, exactly as the serving-csr controller does
(nodes.servingCertificates.approve), without writing anything: approve,
deny or pending, the reason, and what it was checked against. A request
already decided is shown as such. Exit status 0 when every request shown
would be approved or is decided, 3 when one would wait or be denied, 1 on
errors.`,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(ctx, args)
		},
	}
	o.AddFlags(explain.Flags())
	cmd.AddCommand(explain)
	return cmd
}

type csrExplainOptions struct {
	cloudConfig, kubeconfig, output string
	timeout                         time.Duration

	env            []string
	stdout, stderr io.Writer
}

func (o *csrExplainOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.cloudConfig, "cloud-config", "", "path of the cloud-config (YAML or INI)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig to read the requests, the Nodes and the Secrets the config names")
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
}

func (o *csrExplainOptions) Validate() error {
	switch {
	case o.cloudConfig == "":
		return fmt.Errorf("--cloud-config is required")
	case o.kubeconfig == "":
		return fmt.Errorf("--kubeconfig is required: the requests are read from the cluster")
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("-o %q: use table or json", o.output)
	}
	return nil
}

// csrExplanation is one request's verdict.
type csrExplanation struct {
	Name     string              `json:"name"`
	Node     string              `json:"node,omitempty"`
	Decision servingcsr.Decision `json:"decision"`
	Reason   string              `json:"reason"`
	Message  string              `json:"message"`
}

func (o *csrExplainOptions) Run(ctx context.Context, names []string) error {
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
	ctx = klog.NewContext(ctx, klog.LoggerWithName(klog.Background(), "csr-explain").V(1))
	list, err := kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list certificate signing requests: %w", err)
	}
	var csrs []certificatesv1.CertificateSigningRequest
	for _, c := range list.Items {
		if len(names) > 0 && !slices.Contains(names, c.Name) {
			continue
		}
		if c.Spec.SignerName != servingcsr.SignerName && len(names) == 0 {
			continue
		}
		csrs = append(csrs, c)
	}
	for _, n := range names {
		if !slices.ContainsFunc(csrs, func(c certificatesv1.CertificateSigningRequest) bool { return c.Name == n }) {
			return fmt.Errorf("certificate signing request %q not found", n)
		}
	}
	// The controller's inventory: every VM's guest addresses, whatever the
	// config says of approval.
	tool := *cfg
	tool.Nodes.ServingCertificates.Approve = true
	p, err := startOneShot(ctx, &tool, kube, provider.Options{})
	if err != nil {
		return err
	}
	defer p.Close()
	facts := servingcsr.NewProviderFacts(p)
	// What the cluster holds, through the controller's own informers.
	inf := informers.NewSharedInformerFactory(kube, 0)
	nodes := inf.Core().V1().Nodes()
	sc := cfg.Nodes.ServingCertificates
	cluster, err := newServingCluster(kube, nodes, sc)
	if err != nil {
		return err
	}
	inf.Start(ctx.Done())
	cluster.Start(ctx)
	defer cluster.Shutdown()
	defer inf.Shutdown()
	defer cancel() // first: the informers stop with ctx
	if !cache.WaitForCacheSync(ctx.Done(), cluster.HasSynced) {
		return fmt.Errorf("read the cluster's Nodes, Services, Namespaces and EndpointSlices: %w", ctx.Err())
	}
	bounds := servingcsr.Bounds{IPRanges: sc.AllowedIPRanges, DNSDomains: sc.AllowedDNSDomains}
	var out []csrExplanation
	problems := 0
	for i := range csrs {
		c := &csrs[i]
		var node *v1.Node
		if n, err := nodes.Lister().Get(servingcsr.NodeName(c)); err == nil {
			node = n
		}
		req, v := servingcsr.Inspect(c, node)
		if v == nil {
			d := servingcsr.Decide(ctx, req, node, facts, cluster, bounds)
			v = &d
		}
		if v.Decision == servingcsr.Ignore && len(names) == 0 {
			continue // decided already: only the named ones are shown
		}
		if v.Decision == servingcsr.Pending || v.Decision == servingcsr.Deny {
			problems++
		}
		out = append(out, csrExplanation{Name: c.Name, Node: servingcsr.NodeName(c), Decision: v.Decision, Reason: v.Reason, Message: v.Message})
	}
	if o.output == "json" {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REQUEST\tNODE\tDECISION\tREASON\tMESSAGE")
		for _, e := range out {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, dash(e.Node), e.Decision, e.Reason, e.Message)
		}
		_ = tw.Flush()
		if len(out) == 0 {
			fmt.Fprintln(o.stdout, "no undecided kubelet serving certificate request")
		}
	}
	if problems > 0 {
		return exitError{3}
	}
	return nil
}
