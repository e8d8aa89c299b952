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
	"encoding/hex"
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
	// CheckCA, if set, checks a CA bundle whose content changed before the
	// change is accepted, for each vCenter that names it (bundle is the
	// file's content): an error refuses the change.
	CheckCA func(ctx context.Context, vc config.VCenter, bundle []byte) error
	// Started is the content of the config file as the process parsed it
	// at start: content equal to it is the running config without being
	// parsed again. Nil: the first content read that parses to the
	// running config is.
	Started []byte
}

// Watcher compares the files with the config the process runs.
type Watcher struct {
	path    string
	opts    Options
	running *config.Config
	// runningKey is the content (snapshot key) of the running config,
	// once known; last the content the previous check read; verdict the
	// judgement of the content verdictKey, kept until the content changes.
	runningKey string
	last       string
	verdictKey string
	verdict    Result
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

// hash is the content's fingerprint: hexadecimal, short enough for an
// annotation and a log line, and the same on every replica that reads the
// same files.
func (s snapshot) hash() string {
	return hex.EncodeToString([]byte(s.key())[:8])
}

// New returns a watcher of the cloud-config at path, which the process
// runs as running; it reads the CA bundles now, as the baseline.
func New(path string, running *config.Config, opts Options) *Watcher {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	w := &Watcher{path: path, opts: opts, running: running}
	// The vCenter clients read the CA bundles as the process starts.
	w.base, _ = readFiles(running)
	if opts.Started != nil {
		w.runningKey = w.startedSnapshot().key()
		w.last = w.runningKey
	}
	return w
}

// startedSnapshot is the running content: the config file as parsed at
// start and the CA bundles as read by New.
func (w *Watcher) startedSnapshot() snapshot {
	s := snapshot{config: w.opts.Started, files: maps.Clone(w.base)}
	_, s.errs = readFiles(w.running)
	return s
}

// Fingerprint is the running content's fingerprint (Result.Hash of a
// change to it), when Options.Started was given; "" otherwise.
func (w *Watcher) Fingerprint() string {
	if w.opts.Started == nil {
		return ""
	}
	return w.startedSnapshot().hash()
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
	// Unchanged: the files hold the running config (or one that differs
	// only in what takes no effect, such as comments).
	Unchanged Outcome = "unchanged"
	// Settling: the files hold content read once; it is judged when the
	// next read finds it again, so that a file being written (a
	// non-atomic edit) is never acted on half written.
	Settling Outcome = "settling"
	// Changed: a valid config that differs from the running one.
	Changed Outcome = "changed"
	// Refused: a config the process would not start with.
	Refused Outcome = "refused"
)

// Result is what one check found.
type Result struct {
	Outcome Outcome
	// What differs from the running config (Changed), for the log.
	What string
	// Hash is the fingerprint of the content judged (Changed), the one
	// a process started with it publishes (Fingerprint).
	Hash string
	// Err says why the content is refused (Refused): file, line and
	// field, never a value.
	Err error
	// Again: the same content got the same verdict at the last check.
	Again bool
}

// Check reads the files once and judges their content: only content read
// twice in a row is judged, and a verdict is kept until the content
// changes (a CA bundle is checked against its vCenter once).
func (w *Watcher) Check(ctx context.Context) Result {
	now := w.read(w.running)
	k := now.key()
	prev := w.last
	w.last = k
	switch {
	case w.runningKey != "" && k == w.runningKey:
		w.verdictKey, w.verdict = "", Result{}
		return Result{Outcome: Unchanged}
	case k == w.verdictKey:
		r := w.verdict
		r.Again = true
		return r
	case k != prev:
		return Result{Outcome: Settling}
	}
	r := w.judge(ctx, now)
	if r.Outcome == Unchanged && w.runningKey == "" {
		w.runningKey = k // the running content, first read
	}
	w.verdictKey, w.verdict = k, r
	return r
}

// judge tells what content read twice means for the running process.
func (w *Watcher) judge(ctx context.Context, now snapshot) Result {
	refuse := func(err error) Result { return Result{Outcome: Refused, Err: err} }
	if now.configErr != nil {
		return refuse(fmt.Errorf("cannot read the cloud-config: %w", now.configErr))
	}
	cfg, _, err := config.Parse(w.path, now.config, config.Options{Env: w.opts.Env})
	if err != nil {
		return refuse(err)
	}
	if w.opts.Validate != nil {
		if err := w.opts.Validate(cfg); err != nil {
			return refuse(err)
		}
	}
	what, err := differences(w.running, cfg)
	if err != nil {
		return refuse(err)
	}
	bundles, err := w.changedBundles(ctx, cfg)
	if err != nil {
		return refuse(err)
	}
	what = append(what, bundles...)
	if len(what) == 0 {
		return Result{Outcome: Unchanged} // an edit that changes nothing (a comment)
	}
	return Result{Outcome: Changed, What: strings.Join(what, ", "), Hash: now.hash()}
}

// changedBundles names the CA bundles of cfg whose content differs from
// what the process started with, after checking each (CheckCA). A bundle
// that could be read at start and no longer can is refused: restarted,
// its vCenter would be unusable. One that could not be read at start
// either is left alone, as at start (the vCenter client reads it again on
// each connection attempt).
func (w *Watcher) changedBundles(ctx context.Context, cfg *config.Config) ([]string, error) {
	var what []string
	for _, p := range namedFiles(cfg) {
		old, known := w.base[p]
		b, err := os.ReadFile(p)
		switch {
		case err != nil && known:
			return nil, fmt.Errorf("the CA bundle %s (caFile) can no longer be read, and the process would restart without it: %w", p, err)
		case err != nil:
			continue
		case known && old == sha256.Sum256(b):
			continue
		}
		if w.opts.CheckCA != nil {
			for _, vc := range cfg.VCenters {
				if vc.CAFile != p {
					continue
				}
				if err := w.opts.CheckCA(ctx, vc, b); err != nil {
					return nil, fmt.Errorf("vcenter %q: caFile %s: %w", vc.Name, p, err)
				}
			}
		}
		if known {
			what = append(what, "the content of "+p)
		} else {
			// It appeared: the vCenter client reads it on its next
			// attempt; later contents are changes.
			w.base[p] = sha256.Sum256(b)
		}
	}
	return what, nil
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

// Turn decides when a valid change may restart this process: once it is
// this replica's turn (configrollout). Mine is asked at every check while
// the change stands; why says what it waits for, or why it may go.
type Turn interface {
	Mine(ctx context.Context, hash string) (ok bool, why string)
}

// Handler is told what the checks found.
type Handler interface {
	// Changed: the files hold a valid config that differs from the running
	// one (what differs, for the log), and it is this process's turn to
	// restart with it. Called once; Run returns after it.
	Changed(what, why string)
	// Waiting: a valid change waits for this process's turn (why). Called
	// when the reason changes.
	Waiting(what, why string)
	// Refused: the files changed and do not hold a valid config. Called
	// once per distinct content.
	Refused(err error)
}

// Run checks every interval until ctx ends or a valid change is this
// process's turn (turn nil: at once): h.Changed, then it returns.
func (w *Watcher) Run(ctx context.Context, turn Turn, h Handler) {
	log := klog.FromContext(ctx)
	t := w.opts.Clock.NewTicker(w.opts.Interval)
	defer t.Stop()
	waiting := ""
	for {
		select {
		case <-ctx.Done():
			log.V(4).Info("Stopped following the cloud-config", "path", w.path)
			return
		case <-t.C():
		}
		r := w.Check(ctx)
		pending := false
		switch r.Outcome {
		case Changed:
			ok, why := true, "no coordination"
			if turn != nil {
				ok, why = turn.Mine(ctx, r.Hash)
			}
			if ok {
				w.opts.Metrics.observe(r, false)
				h.Changed(r.What, why)
				return
			}
			pending = true
			if why != waiting {
				h.Waiting(r.What, why)
			}
			waiting = why
		case Refused:
			if !r.Again {
				h.Refused(r.Err)
			}
		}
		if !pending {
			waiting = ""
		}
		w.opts.Metrics.observe(r, pending)
	}
}
