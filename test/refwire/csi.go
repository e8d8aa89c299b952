package refwire

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// CSIQuery is one Node to ask vSphere CSI about, by its system UUID.
type CSIQuery struct {
	ID   string `json:"id"`
	UUID string `json:"uuid"`
}

// CSIAnswer is what vSphere CSI computes for the Node: its
// CSINodeTopology's labels, or the error that fails it.
type CSIAnswer struct {
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels,omitempty"`
	Error  string            `json:"error,omitempty"`
}

// BuildCSI builds hack/refcsi (vSphere CSI's own code) into dir; root is
// the repository's root.
func BuildCSI(ctx context.Context, root, dir string) (string, error) {
	return build(ctx, filepath.Join(root, "hack", "refcsi"), ".", dir, "refcsi")
}

// CheckCSIConfig reads a csi-vsphere.conf with vSphere CSI's own reader,
// nil if CSI accepts it.
func CheckCSIConfig(ctx context.Context, bin, config string) error {
	out, err := exec.CommandContext(ctx, bin, "-config", config, "-check").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, lastLine(out))
	}
	return nil
}

// StartCSI runs refcsi with vSphere CSI's config at config.
func StartCSI(ctx context.Context, bin, config string) (*Proc, error) {
	return start(ctx, bin, []string{"-config", config}, nil)
}

// AskCSI asks what vSphere CSI computes for the Node of the VM with this
// system UUID.
func (p *Proc) AskCSI(uuid string) (CSIAnswer, error) {
	p.n++
	var a CSIAnswer
	err := p.call(uuid, CSIQuery{ID: fmt.Sprint(p.n), UUID: uuid}, &a)
	return a, err
}

func lastLine(b []byte) string {
	s := string(b)
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
