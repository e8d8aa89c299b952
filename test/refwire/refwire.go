// Package refwire runs, for tests, the reference CCM's own node code
// (hack/refnode, k8s.io/cloud-provider-vsphere in a module of its own) and
// vSphere CSI's own node-topology code (hack/refcsi, likewise): it builds
// their main packages and speaks their wire format, one JSON query and one
// JSON answer per line. The types mirror theirs (the other side of the
// wire, which cannot import them).
package refwire

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Query is one Node to ask about.
type Query struct {
	ID   string  `json:"id"`
	Node v1.Node `json:"node"`
	// Register discovers the Node's VM by systemUUID first, as the
	// reference's RegisterNode does when a Node is added.
	Register         bool `json:"register"`
	SkipNodeDeletion bool `json:"skipNodeDeletion,omitempty"`
}

// Answer is what the reference answers.
type Answer struct {
	ID            string    `json:"id"`
	Exists        Verdict   `json:"exists"`
	Shutdown      Verdict   `json:"shutdown"`
	Metadata      *Metadata `json:"metadata,omitempty"`
	MetadataError string    `json:"metadataError,omitempty"`
}

// Verdict is a boolean answer or an error.
type Verdict struct {
	Value bool   `json:"value"`
	Error string `json:"error,omitempty"`
}

// String is "error", "true" or "false".
func (v Verdict) String() string {
	if v.Error != "" {
		return "error"
	}
	return fmt.Sprint(v.Value)
}

// Metadata is InstanceMetadata's answer.
type Metadata struct {
	ProviderID   string            `json:"providerID"`
	InstanceType string            `json:"instanceType"`
	Addresses    []v1.NodeAddress  `json:"addresses"`
	Zone         string            `json:"zone,omitempty"`
	Region       string            `json:"region,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
}

// Build builds a main package of hack/refnode's module ("." for refnode,
// or the reference CCM's k8s.io/cloud-provider-vsphere/cmd/...) into dir;
// root is the repository's root.
//
// refnode (".") and the reference's own commands are built from the
// reference's newest source: a copy
// of its v1.36.0 module with the files of hack/refnode/head in place of
// theirs (see its README), through a replace in a go.mod of its own (-modfile).
func Build(ctx context.Context, root, pkg, dir, name string) (string, error) {
	module := filepath.Join(root, "hack", "refnode")
	var args []string
	if pkg == "." || strings.HasPrefix(pkg, "k8s.io/cloud-provider-vsphere/") {
		modfile, err := HeadModfile(ctx, module, dir)
		if err != nil {
			return "", err
		}
		args = append(args, "-modfile", modfile)
	}
	return build(ctx, module, pkg, dir, name, args...)
}

// HeadModfile copies the reference's v1.36.0 module into dir, puts the
// reference's newest files (hack/refnode/head/<path>.txt) in place of its
// own, and writes a go.mod (and go.sum) of hack/refnode that replaces the
// module with that copy. It returns the go.mod's path, for go build
// -modfile.
func HeadModfile(ctx context.Context, module, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "k8s.io/cloud-provider-vsphere")
	cmd.Dir = module
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate the reference module: %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("locate the reference module: %v (%s)", err, out)
	}
	tree := filepath.Join(dir, "cloud-provider-vsphere-head")
	if err := os.CopyFS(tree, os.DirFS(mod.Dir)); err != nil {
		return "", fmt.Errorf("copy the reference module: %w", err)
	}
	head := filepath.Join(module, "head")
	err = filepath.WalkDir(head, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go.txt") {
			return err
		}
		rel, _ := filepath.Rel(head, strings.TrimSuffix(path, ".txt"))
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(tree, rel)
		_ = os.Chmod(dst, 0o644)
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		return "", err
	}
	gomod, err := os.ReadFile(filepath.Join(module, "go.mod"))
	if err != nil {
		return "", err
	}
	gosum, err := os.ReadFile(filepath.Join(module, "go.sum"))
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(tree)
	if err != nil {
		return "", err
	}
	gomod = append(gomod, fmt.Sprintf("\nreplace k8s.io/cloud-provider-vsphere => %s\n", abs)...)
	path := filepath.Join(dir, "refnode-head.mod")
	if err := os.WriteFile(strings.TrimSuffix(path, ".mod")+".sum", gosum, 0o600); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, gomod, 0o600)
}

func build(ctx context.Context, module, pkg, dir, name string, args ...string) (string, error) {
	bin := filepath.Join(dir, name)
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, args...), "-o", abs, pkg)...)
	cmd.Dir = module
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s in %s: %w\n%s", pkg, module, err, out)
	}
	return bin, nil
}

// Proc is one refnode or refcsi process for one config: its caches warm,
// as in a running driver, across the questions asked of it.
type Proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	enc    *json.Encoder
	out    *bufio.Scanner
	stderr lockedBuffer
	n      int
}

// lockedBuffer is refnode's stderr, written by the process's copier and
// read on failures.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start runs refnode with the cloud-config at config, and env (KEY=VALUE)
// added to the environment. The reference refuses several IP families
// without its feature gate, which every dual-stack user of it sets: it is
// set.
func Start(ctx context.Context, bin, config string, env ...string) (*Proc, error) {
	return start(ctx, bin, []string{"-config", config}, append([]string{"ENABLE_ALPHA_DUAL_STACK=1"}, env...))
}

func start(ctx context.Context, bin string, args, env []string) (*Proc, error) {
	p := &Proc{cmd: exec.CommandContext(ctx, bin, args...)}
	p.cmd.Env = append(os.Environ(), env...)
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	p.enc = json.NewEncoder(p.stdin)
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(make([]byte, 1<<20), 16<<20)
	return p, nil
}

// Ask asks about one Node, registering it first when register is set.
func (p *Proc) Ask(node *v1.Node, register, skipNodeDeletion bool) (Answer, error) {
	p.n++
	var a Answer
	err := p.call(node.Name, Query{ID: fmt.Sprint(p.n), Node: *node, Register: register, SkipNodeDeletion: skipNodeDeletion}, &a)
	return a, err
}

// call writes q and reads one answer into a.
func (p *Proc) call(about string, q, a any) error {
	if err := p.enc.Encode(q); err != nil {
		return fmt.Errorf("%s: %w\n%s", p.cmd.Path, err, p.tail())
	}
	if !p.out.Scan() {
		return fmt.Errorf("%s gave no answer about %s: %v\n%s", filepath.Base(p.cmd.Path), about, p.out.Err(), p.tail())
	}
	return json.Unmarshal(p.out.Bytes(), a)
}

// Close ends the process.
func (p *Proc) Close() {
	_ = p.stdin.Close()
	_ = p.cmd.Wait()
}

func (p *Proc) tail() string {
	s := p.stderr.String()
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}
