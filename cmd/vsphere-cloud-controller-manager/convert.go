package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// newConvertCommand is `config convert`: the canonical YAML of a config on
// stdout, its inline credentials moved to a Secret manifest or a secrets
// directory (--secret-out), never to stdout.
func newConvertCommand(env []string, stdout, stderr io.Writer) *cobra.Command {
	o := &convertOptions{ref: config.DefaultConvertSecret(), env: env, stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "convert FILE",
		Short: "Write the equivalent canonical YAML of a cloud-config (INI or YAML) to stdout",
		Long: `Write the equivalent canonical YAML of a cloud-config (INI or YAML) to stdout:
every inherited value and default written out per vCenter. Passwords are never
written to stdout: the vCenters whose user and password were inline read them
from the Secret --secret-name in --secret-namespace instead, and --secret-out
writes their credentials there: a Secret manifest (FILE), or files named like
the Secret's keys in a directory (a path ending in /, or an existing directory)
that the converted config names as global.secretsDirectory. Existing files
are never overwritten.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.file = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// convertOptions are the flags and argument of `config convert`.
type convertOptions struct {
	file      string
	secretOut string
	ref       config.SecretRef
	noEnv     bool

	env            []string
	stdout, stderr io.Writer
}

func (o *convertOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.secretOut, "secret-out", "", "write the inline credentials to this Secret manifest, or to this directory (ending in /) as files")
	f.StringVar(&o.ref.Name, "secret-name", o.ref.Name, "the Secret the converted config reads moved credentials from")
	f.StringVar(&o.ref.Namespace, "secret-namespace", o.ref.Namespace, "its namespace")
	f.BoolVar(&o.noEnv, "ignore-env", false, "do not apply the VSPHERE_* / VCENTER_* environment overrides")
}

// Validate checks the flags alone.
func (o *convertOptions) Validate() error {
	if o.ref.Name == "" || o.ref.Namespace == "" {
		return fmt.Errorf("--secret-name and --secret-namespace must not be empty")
	}
	return nil
}

// Run converts: the config on stdout, notes on stderr, credentials where
// --secret-out says.
func (o *convertOptions) Run() error {
	cfg, ok := load(o.file, envFor(o.noEnv, o.env), o.stderr)
	if !ok {
		return exitError{1}
	}
	opts := config.EncodeOptions{Secret: o.ref}
	toDir := false
	if o.secretOut != "" {
		if fi, err := os.Stat(o.secretOut); (err == nil && fi.IsDir()) || strings.HasSuffix(o.secretOut, "/") {
			toDir = true
			opts.SecretsDirectory = filepath.Clean(o.secretOut)
		}
	}
	out, moved, notes, err := config.Encode(cfg, opts)
	if err != nil {
		return err
	}
	data, dataNotes := credentialData(moved)
	notes = append(notes, dataNotes...)
	switch {
	case len(moved) == 0:
	case o.secretOut == "":
		notes = append(notes, fmt.Sprintf("create Secret %s with their credentials: run again with --secret-out FILE (a manifest) or --secret-out DIR/ (files)", o.ref))
	case toDir:
		if err := writeSecretFiles(opts.SecretsDirectory, data); err != nil {
			return err
		}
		notes = append(notes, fmt.Sprintf("credentials written to %s (mode 0600); mount that directory at %s in the CCM's pod", opts.SecretsDirectory, opts.SecretsDirectory))
	default:
		if err := writeSecretManifest(o.secretOut, o.ref, data); err != nil {
			return err
		}
		notes = append(notes, fmt.Sprintf("credentials written to %s (mode 0600): kubectl apply -f %s", o.secretOut, o.secretOut))
	}
	for _, n := range notes {
		fmt.Fprintln(o.stderr, "note:", n)
	}
	_, err = o.stdout.Write(out)
	return err
}

// credentialData lays credentials out as the CCM (and the reference CCM)
// reads them from a Secret or a directory: <server>.username and
// <server>.password (a certificate as username, its key as password), or
// server_<n>, username_<n> and password_<n> for a server that is not a
// valid key (an IPv6 address); a shared session as
// <server>.vc-session-manager-url and <server>.vc-session-manager-token.
// notes says what could not be written.
func credentialData(moved []config.InlineCredential) (map[string][]byte, []string) {
	data := map[string][]byte{}
	var notes []string
	n := 0
	for _, m := range moved {
		var user, password string
		switch c := m.Credentials.(type) {
		case secret.Password:
			user, password = c.Username, c.Password.Reveal()
		case secret.Certificate:
			user, password = c.PEM, c.Key.Reveal()
		case secret.SharedSession:
			if len(validation.IsConfigMapKey(m.Server+".vc-session-manager-url")) != 0 {
				notes = append(notes, fmt.Sprintf("vcenter %q: server %s cannot name a Secret key, and a shared session has no server_<id> form: its session manager was not written; give the vCenter a host name", m.VCenter, m.Server))
				continue
			}
			data[m.Server+".vc-session-manager-url"] = []byte(c.URL)
			if c.Token.IsSet() {
				data[m.Server+".vc-session-manager-token"] = []byte(c.Token.Reveal())
			}
			continue
		default:
			continue
		}
		if len(validation.IsConfigMapKey(m.Server+".username")) == 0 {
			data[m.Server+".username"] = []byte(user)
			data[m.Server+".password"] = []byte(password)
			continue
		}
		n++
		id := strconv.Itoa(n)
		data["server_"+id] = []byte(m.Server)
		data["username_"+id] = []byte(user)
		data["password_"+id] = []byte(password)
	}
	return data, notes
}

func writeSecretManifest(path string, ref config.SecretRef, data map[string][]byte) error {
	s := corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	b, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode Secret %s: %w", ref, err)
	}
	return writeNew(path, b)
}

func writeSecretFiles(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--secret-out: %w", err)
	}
	for k, v := range data {
		if err := writeNew(filepath.Join(dir, k), v); err != nil {
			return err
		}
	}
	return nil
}

// writeNew writes a file readable by its owner only, never over an
// existing one.
func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("--secret-out: %s exists; remove it or choose another path (credentials are never written over a file)", path)
	}
	if err != nil {
		return fmt.Errorf("--secret-out: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("--secret-out: write %s: %w", path, err)
	}
	return f.Close()
}
