package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/memlimit"
)

// exitError carries an exit code through cobra without printing twice.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run executes the command line and returns the process exit code: the
// operator commands (config, topology), or else the controller manager,
// which runs until ctx ends.
func run(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || !slices.Contains([]string{"config", "topology", "migrate", "csr", "node"}, args[0]) {
		return runCCM(ctx, args, env, stdout, stderr)
	}
	root := newRootCommand(ctx, env, stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	return 0
}

func runCCM(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	// Before anything allocates much: the inventories are read at start.
	gc := memlimit.Tune(func(key string) string { return lookupEnv(env, key) }, os.DirFS("/"))
	// A valid change of the cloud-config ends the controller manager like
	// a signal; the process then exits 0 and its container restarts.
	ctx, restart := context.WithCancel(ctx)
	defer restart()
	cmd, closeProvider, err := newCCMCommand(env, stderr, ctx.Done(), restart)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	pre := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("version"); f == nil || !f.Changed {
			fmt.Fprintln(stderr, "garbage collector:", gc)
		}
		if pre == nil {
			return nil
		}
		return pre(c, args)
	}
	defer klog.Flush()
	defer closeProvider()
	stopDebug, err := startDebugServer(env, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	defer stopDebug()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

func newRootCommand(ctx context.Context, env []string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "vsphere-cloud-controller-manager",
		Short:         "Kubernetes cloud controller manager for VMware vSphere (many vCenters, zones from tags)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newConfigCommand(env, stdout, stderr), newTopologyCommand(ctx, env, stdout, stderr), newMigrateCommand(ctx, env, stdout, stderr),
		newCSRCommand(ctx, env, stdout, stderr), newNodeCommand(ctx, stdout, stderr))
	return root
}

func newConfigCommand(env []string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check and convert cloud-config files (YAML or legacy INI)",
	}
	vo := &validateOptions{env: env, stdout: stdout, stderr: stderr}
	validate := &cobra.Command{
		Use:   "validate FILE",
		Short: "Validate a cloud-config; print a summary, or every problem with file:line and field",
		Long: `Validate a cloud-config (YAML or legacy INI). Exit status 0 when it is valid, 1
when it is not. The text output is a summary, or every problem with file:line and
field on stderr; -o json writes one report on stdout in both cases (valid,
format, errors and warnings with file, line, field and message, and the
summary), for CI pipelines. Each vCenter's credential mode (password,
certificate, sharedSession) and source is shown when it can be told here: from the
inline config, the secrets directory when it exists on this machine, and the Secret
manifests given with --secret; unusable credentials (a key that is not the
certificate's, an expired certificate, a private key given as a password) fail the
validation.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			vo.file = args[0]
			if err := vo.Validate(); err != nil {
				return err
			}
			return vo.Run()
		},
	}
	vo.AddFlags(validate.Flags())
	cmd.AddCommand(validate, newConvertCommand(env, stdout, stderr))
	return cmd
}

// validateOptions are the flags and argument of `config validate`.
type validateOptions struct {
	file    string
	output  string
	noEnv   bool
	secrets []string

	env            []string
	stdout, stderr io.Writer
}

func (o *validateOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.BoolVar(&o.noEnv, "ignore-env", false, "do not apply the VSPHERE_* / VCENTER_* environment overrides")
	f.StringArrayVar(&o.secrets, "secret", nil, "a Secret manifest (YAML or JSON, as kubectl prints it) the config names; its credentials are checked and their mode shown (repeatable)")
}

// Validate checks the flags alone.
func (o *validateOptions) Validate() error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("-o %q: use text or json", o.output)
	}
	return nil
}

// Run reads the file and reports; exit status 1 when it is not valid.
func (o *validateOptions) Run() error {
	env := envFor(o.noEnv, o.env)
	if o.output == "json" {
		valid, err := writeValidationReport(o.stdout, o.file, env, o.secrets)
		if err != nil {
			return err
		}
		if !valid {
			return exitError{1}
		}
		return nil
	}
	cfg, ok := load(o.file, env, o.stderr)
	if !ok {
		return exitError{1}
	}
	src, warnings, err := offlineSources(cfg, o.secrets)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(o.stderr, "warning:", w)
	}
	resolved := resolveOffline(cfg, src, time.Now())
	printSummary(o.stdout, o.file, cfg, resolved)
	for _, vc := range cfg.VCenters {
		if r := resolved[vc.Name]; r.Error != "" {
			fmt.Fprintf(o.stderr, "vcenter %q: credentials: %s\n", vc.Name, r.Error)
			ok = false
		}
	}
	if !ok {
		return exitError{1}
	}
	return nil
}

func envFor(ignore bool, env []string) []string {
	if ignore {
		return nil
	}
	return env
}

// load parses a config file, printing warnings and errors to stderr.
func load(path string, env []string, stderr io.Writer) (*config.Config, bool) {
	cfg, _, ok := loadStarted(path, env, stderr)
	return cfg, ok
}

// loadStarted is load, with the file's content as parsed.
func loadStarted(path string, env []string, stderr io.Writer) (*config.Config, []byte, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, fmt.Errorf("read cloud-config: %w", err))
		return nil, nil, false
	}
	cfg, warnings, err := config.Parse(path, data, config.Options{Env: env})
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning:", w.Error())
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, false
	}
	return cfg, data, true
}
