// Package configwatch follows the cloud-config file, and the CA bundles it
// names, while the controller manager runs. A valid change is reported
// once, for the process to restart cleanly with it; an invalid one is
// refused with its error, and the process keeps running on the config it
// started with. It reads files only: the content, not the modification
// time, decides (a ConfigMap or Secret volume swaps a symlink).
package configwatch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// DefaultInterval is how often the files are read: the kubelet updates a
// ConfigMap volume within about a minute, so seconds add nothing.
const DefaultInterval = 5 * time.Second

// Handler is told what a check found.
type Handler interface {
	// Changed: the files hold a valid config that differs from the running
	// one (what differs, for the log). Called once; the watcher stops.
	Changed(what string)
	// Refused: the files changed and do not hold a valid config. Called
	// once per distinct content.
	Refused(err error)
}

// Options tune a Watcher.
type Options struct {
	// Env is the environment the config is read with, as at start.
	Env []string
	// Interval between reads (DefaultInterval when zero).
	Interval time.Duration
	// Clock (the real clock when nil).
	Clock clock.WithTicker
	// Metrics, if set, count what the checks found.
	Metrics *Metrics
	// Validate, if set, checks a parsed config as the process checks it
	// at start against its command line (the controllers it needs, ...):
	// a config it refuses is refused, so that no change restarts the
	// process into a config it would not start with.
	Validate func(*config.Config) error
}

// Watcher compares the files with the config the process runs.
type Watcher struct {
	path    string
	opts    Options
	running *config.Config
	// seen is the content the last check read (the config file and each
	// named file); refused is the content last refused, so that it is
	// reported once.
	seen    snapshot
	refused string
	refusal error
	// base are the CA bundles' content as the process started with them.
	base map[string][32]byte
}

// snapshot is the content of the config file and of the files it names.
type snapshot struct {
	config    []byte
	configErr error
	files     map[string][32]byte // path -> SHA-256
	errs      []string            // named files that could not be read
}

func (s snapshot) key() string {
	h := sha256.New()
	h.Write(s.config)
	paths := make([]string, 0, len(s.files))
	for p := range s.files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		sum := s.files[p]
		fmt.Fprintf(h, "\x00%s\x00%x", p, sum)
	}
	for _, e := range s.errs {
		fmt.Fprintf(h, "\x00%s", e)
	}
	return string(h.Sum(nil))
}

// New returns a watcher of the cloud-config at path, which the process
// runs as running; it reads the files now, as the baseline.
func New(path string, running *config.Config, opts Options) *Watcher {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	w := &Watcher{path: path, opts: opts, running: running}
	// The config file is not read here: the process parsed it earlier, and
	// it may have been swapped since. Left empty, the first check parses
	// it and compares it with running. The CA bundles are read now: the
	// vCenter clients read them as the process starts.
	w.base, _ = readFiles(running)
	w.seen = snapshot{files: maps.Clone(w.base)}
	return w
}

// namedFiles are the files a config names whose content takes effect only
// at start: the CA bundles.
func namedFiles(cfg *config.Config) []string {
	var out []string
	for _, vc := range cfg.VCenters {
		if vc.CAFile != "" && !slices.Contains(out, vc.CAFile) {
			out = append(out, vc.CAFile)
		}
	}
	return out
}

// read reads the config file, and the files cfg names.
func (w *Watcher) read(cfg *config.Config) snapshot {
	s := snapshot{}
	s.config, s.configErr = os.ReadFile(w.path)
	s.files, s.errs = readFiles(cfg)
	if s.configErr != nil {
		s.errs = append(s.errs, s.configErr.Error())
	}
	return s
}

// readFiles hashes the files cfg names; errs are those that cannot be read.
func readFiles(cfg *config.Config) (map[string][32]byte, []string) {
	files := map[string][32]byte{}
	var errs []string
	for _, p := range namedFiles(cfg) {
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		files[p] = sha256.Sum256(b)
	}
	return files, errs
}

// Outcome is what one check found.
type Outcome string

// The outcomes.
const (
	Unchanged Outcome = "unchanged"
	Changed   Outcome = "changed"
	Refused   Outcome = "refused"
)

// Check reads the files once. Changed comes with what differs; Refused
// with the error, and whether this content was refused before.
func (w *Watcher) Check() (Outcome, string, error, bool) {
	now := w.read(w.running)
	if now.key() == w.seen.key() {
		if w.refused != "" {
			return Refused, "", w.refusal, true // still the refused content
		}
		return Unchanged, "", nil, false
	}
	if now.configErr != nil {
		return w.refuse(now, fmt.Errorf("cannot read the cloud-config: %w", now.configErr))
	}
	cfg, _, err := config.Parse(w.path, now.config, config.Options{Env: w.opts.Env})
	if err != nil {
		return w.refuse(now, err)
	}
	if w.opts.Validate != nil {
		if err := w.opts.Validate(cfg); err != nil {
			return w.refuse(now, err)
		}
	}
	// A CA bundle that cannot be read is not a reason to refuse: the
	// vCenter that names it is unusable until it can (the client reads it
	// again on each connection attempt), as at start. The new config's
	// own bundles are read; the config file is not read again.
	files, _ := readFiles(cfg)
	what, err := differences(w.running, cfg)
	if err != nil {
		return w.refuse(now, err)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		old, ok := w.base[p]
		switch {
		case !ok:
			// It appeared: the vCenter client reads it on its next
			// attempt; later contents are changes.
			w.base[p] = files[p]
		case old != files[p]:
			what = append(what, "the content of "+p)
		}
	}
	w.seen, w.refused, w.refusal = now, "", nil
	if len(what) == 0 {
		return Unchanged, "", nil, false // an edit that changes nothing (a comment)
	}
	return Changed, strings.Join(what, ", "), nil, false
}

func (w *Watcher) refuse(now snapshot, err error) (Outcome, string, error, bool) {
	w.seen = now
	k := now.key()
	again := k == w.refused
	w.refused, w.refusal = k, err
	return Refused, "", err, again
}

// differences names the parts of the config that differ between a and b:
// every field as the config's JSON shows it, the inline credentials by
// value (secret.Equal), and SKIP_NODE_DELETION.
func differences(a, b *config.Config) ([]string, error) {
	var out []string
	for _, part := range []struct {
		name string
		a, b any
	}{
		{"global", a.Global, b.Global},
		{"labels", a.Labels, b.Labels},
		{"nodes", a.Nodes, b.Nodes},
		{"hostGroupZones", a.HostGroupZones, b.HostGroupZones},
		{"the NSX-T sections", a.NSXT, b.NSXT},
	} {
		same, err := sameJSON(part.a, part.b)
		if err != nil {
			return nil, err
		}
		if !same {
			out = append(out, part.name)
		}
	}
	if a.Nodes.SkipNodeDeletion != b.Nodes.SkipNodeDeletion && !slices.Contains(out, "nodes") {
		out = append(out, "nodes")
	}
	names := func(c *config.Config) []string {
		var n []string
		for _, vc := range c.VCenters {
			n = append(n, vc.Name)
		}
		return n
	}
	if !slices.Equal(names(a), names(b)) {
		return append(out, "the vCenters"), nil
	}
	for i := range a.VCenters {
		same, err := sameJSON(a.VCenters[i], b.VCenters[i])
		if err != nil {
			return nil, err
		}
		if !same || !secret.Equal(a.VCenters[i].Credentials.Inline, b.VCenters[i].Credentials.Inline) {
			out = append(out, "vcenter "+a.VCenters[i].Name)
		}
	}
	return out, nil
}

func sameJSON(a, b any) (bool, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return false, fmt.Errorf("compare configs: %w", err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return false, fmt.Errorf("compare configs: %w", err)
	}
	return bytes.Equal(ja, jb), nil
}

// Run checks every interval until ctx ends or a valid change is found
// (h.Changed, then it returns). Each new refused content goes to
// h.Refused.
func (w *Watcher) Run(ctx context.Context, h Handler) {
	log := klog.FromContext(ctx)
	t := w.opts.Clock.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			log.V(4).Info("Stopped following the cloud-config", "path", w.path)
			return
		case <-t.C():
		}
		outcome, what, err, again := w.Check()
		w.opts.Metrics.observe(outcome, again)
		switch outcome {
		case Changed:
			h.Changed(what)
			return
		case Refused:
			if !again {
				h.Refused(err)
			}
		}
	}
}
