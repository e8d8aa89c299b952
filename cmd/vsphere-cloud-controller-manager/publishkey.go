package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/util/keyutil"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/controllers/clientcsr"
)

// The kubelet's pending client key: its bootstrap loads the key at
// <cert-dir>/kubelet-client.key.tmp, or generates it there
// (k8s.io/kubernetes pkg/kubelet/certificate/bootstrap, LoadClientCert,
// keyutil.LoadOrGenerateKeyFile), and removes it once it has its
// certificate. Made here first, the key is the one the kubelet asks a
// certificate for.
const defaultPendingKey = "/var/lib/kubelet/pki/kubelet-client.key.tmp"

// newNodeCommand is the guest-side step of nodes.identity.
func newNodeCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Steps run on a Node's VM (nodes.identity)",
	}
	var keyPath, guestKey, rpctool string
	publish := &cobra.Command{
		Use:   "publish-key",
		Short: "Make the kubelet's pending client key, and publish its fingerprint in this VM's guestinfo",
		Long: `Run on the Node's VM, as root, before the kubelet first starts (cloud-init,
Ignition, a systemd unit ordered before kubelet.service). It loads the
kubelet's pending client key (--key), or generates it there as the kubelet
would (ECDSA P-256, PEM, mode 0600): the kubelet's bootstrap then asks its
certificate for this key. It publishes the key's fingerprint (SHA-256 of the
public key's DER SubjectPublicKeyInfo, hex) in this VM's guestinfo with
VMware Tools (vmware-rpctool "info-set <key> <fingerprint>"), where the CCM
reads it through vCenter (nodes.identity.keyFingerprintKey), and prints it.
Only this VM's guest can write its guestinfo; no secret leaves the VM.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fp, err := publishKey(ctx, keyPath, guestKey, rpctool)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, fp)
			return nil
		},
	}
	publish.Flags().StringVar(&keyPath, "key", defaultPendingKey, "the kubelet's pending client key: <kubelet --cert-dir>/kubelet-client.key.tmp")
	publish.Flags().StringVar(&guestKey, "guestinfo-key", config.DefaultKeyFingerprintKey, "the guestinfo key the CCM reads (nodes.identity.keyFingerprintKey)")
	publish.Flags().StringVar(&rpctool, "rpctool", "vmware-rpctool", "VMware Tools' RPC tool (open-vm-tools)")
	cmd.AddCommand(publish)
	return cmd
}

// publishKey loads or makes the key at keyPath and publishes its
// fingerprint under guestKey with rpctool; it returns the fingerprint.
func publishKey(ctx context.Context, keyPath, guestKey, rpctool string) (string, error) {
	if !strings.HasPrefix(guestKey, "guestinfo.") || strings.ContainsAny(guestKey, " \t\"") {
		return "", fmt.Errorf("--guestinfo-key %q: a guest can write only guestinfo.* keys, without spaces or quotes", guestKey)
	}
	pemKey, _, err := keyutil.LoadOrGenerateKeyFile(keyPath)
	if err != nil {
		return "", fmt.Errorf("the kubelet's pending client key %s: %w", keyPath, err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(pemKey)
	if err != nil {
		return "", fmt.Errorf("the kubelet's pending client key %s: %w", keyPath, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return "", errors.New("the kubelet's pending client key has no public key")
	}
	fp, err := clientcsr.Fingerprint(signer.Public())
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, rpctool, "info-set "+guestKey+" "+fp).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s info-set %s: %w: %s", rpctool, guestKey, err, strings.TrimSpace(string(out)))
	}
	return fp, nil
}
