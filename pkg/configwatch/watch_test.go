package configwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	testclock "k8s.io/utils/clock/testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

const base = `vcenter:
  a:
    server: vc-a.example.com
    user: u
    password: first-password
labels:
  zone: k8s-zone
`

// volume is a directory laid out as the kubelet lays out a ConfigMap or
// Secret volume: each key a symlink to ..data/key, ..data a symlink to a
// timestamped directory, swapped atomically on update.
type volume struct {
	t   *testing.T
	dir string
	gen int
}

func newVolume(t *testing.T, files map[string]string) *volume {
	v := &volume{t: t, dir: t.TempDir()}
	v.update(files)
	for name := range files {
		must.OK(t, os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)))
	}
	return v
}

func (v *volume) update(files map[string]string) {
	v.gen++
	ts := filepath.Join(v.dir, "..2026_11_27_"+strings.Repeat("x", v.gen))
	must.OK(v.t, os.Mkdir(ts, 0o755))
	for name, content := range files {
		must.OK(v.t, os.WriteFile(filepath.Join(ts, name), []byte(content), 0o644))
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	must.OK(v.t, os.Symlink(filepath.Base(ts), tmp))
	must.OK(v.t, os.Rename(tmp, filepath.Join(v.dir, "..data")))
}

func (v *volume) path(name string) string { return filepath.Join(v.dir, name) }

func parse(t *testing.T, path string) *config.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	must.OK(t, err)
	cfg, _, err := config.Parse(path, b, config.Options{})
	must.OK(t, err)
	return cfg
}

// TestCheck: one content after another, through ConfigMap-style volume
// swaps: what each check finds.
func TestCheck(t *testing.T) {
	ca := newVolume(t, map[string]string{"ca.pem": "-----BEGIN CERTIFICATE-----\nfirst\n-----END CERTIFICATE-----\n"})
	withCA := strings.Replace(base, "    password: first-password\n", "    password: first-password\n    caFile: "+ca.path("ca.pem")+"\n", 1)
	vol := newVolume(t, map[string]string{"vsphere.conf": withCA})
	path := vol.path("vsphere.conf")
	m := NewMetrics()
	metrics.NewKubeRegistry().MustRegister(m.Collectors()...)
	w := New(path, parse(t, path), Options{Metrics: m})

	steps := []struct {
		name    string
		change  func()
		outcome Outcome
		what    string // for Changed; for Refused, a part of the error
		again   bool
	}{
		{"nothing changed", func() {}, Unchanged, "", false},
		{"a comment added", func() { vol.update(map[string]string{"vsphere.conf": "# reviewed\n" + withCA}) }, Unchanged, "", false},
		{"a typo", func() { vol.update(map[string]string{"vsphere.conf": strings.Replace(withCA, "zone:", "zoen:", 1)}) }, Refused, `unknown key "zoen"`, false},
		{"the typo still there", func() {}, Refused, `unknown key "zoen"`, true},
		{"put back", func() { vol.update(map[string]string{"vsphere.conf": withCA}) }, Unchanged, "", false},
		{"the CA bundle replaced", func() {
			ca.update(map[string]string{"ca.pem": "-----BEGIN CERTIFICATE-----\nsecond\n-----END CERTIFICATE-----\n"})
		}, Changed, "the content of " + ca.path("ca.pem"), false},
	}
	for _, s := range steps {
		s.change()
		r := judge(t, w)
		outcome, what, err, again := r.Outcome, r.What, r.Err, r.Again
		m.observe(r, false)
		if outcome != s.outcome || again != s.again {
			t.Fatalf("%s: %s (again %v), %q, %v; want %s (again %v)", s.name, outcome, again, what, err, s.outcome, s.again)
		}
		switch outcome {
		case Changed:
			if what != s.what {
				t.Errorf("%s: changed %q, want %q", s.name, what, s.what)
			}
		case Refused:
			if err == nil || !strings.Contains(err.Error(), s.what) {
				t.Errorf("%s: refused with %v, want %q", s.name, err, s.what)
			}
		}
	}
	if got, _ := testutil.GetCounterMetricValue(m.changes.WithLabelValues("refused")); got != 1 {
		t.Errorf("refused changes counted %v, want 1 (the same content once)", got)
	}
	if got, _ := testutil.GetCounterMetricValue(m.changes.WithLabelValues("restart")); got != 1 {
		t.Errorf("restarts counted %v, want 1", got)
	}
}

// judge checks until the content is judged: content is judged only when
// read twice in a row.
func judge(t *testing.T, w *Watcher) Result {
	t.Helper()
	r := w.Check(context.Background())
	if r.Outcome == Settling {
		r = w.Check(context.Background())
	}
	if r.Outcome == Settling {
		t.Fatal("settling twice on the same content")
	}
	return r
}

// TestDifferences: what a valid change names; secrets compare by value and
// are never named.
func TestDifferences(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.yaml")
	for _, tc := range []struct {
		name, content, what string
	}{
		{"a password", strings.Replace(base, "first-password", "second-password", 1), "vcenter a"},
		{"a label category", strings.Replace(base, "k8s-zone", "site", 1), "labels"},
		{"a vCenter added", base + "  b:\n    server: vc-b.example.com\n    user: u\n    password: p\n", ""},
		{"the node rules", base + "nodes:\n  internalNetworkSubnetCidr: [10.0.0.0/8]\n", "nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must.OK(t, os.WriteFile(path, []byte(base), 0o600))
			w := New(path, parse(t, path), Options{})
			content := tc.content
			if tc.name == "a vCenter added" {
				content = strings.Replace(base, "labels:", "  b:\n    server: vc-b.example.com\n    user: u\n    password: p\nlabels:", 1)
				tc.what = "the vCenters"
			}
			must.OK(t, os.WriteFile(path, []byte(content), 0o600))
			r := judge(t, w)
			outcome, what, err, _ := r.Outcome, r.What, r.Err, r.Again
			if outcome != Changed || what != tc.what || err != nil {
				t.Fatalf("%s, %q, %v; want changed %q", outcome, what, err, tc.what)
			}
			if strings.Contains(what, "password") {
				t.Errorf("a secret named: %q", what)
			}
		})
	}
}

// TestRefusedNeverShowsSecrets: a refused content's error shows no value.
func TestRefusedNeverShowsSecrets(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.yaml")
	must.OK(t, os.WriteFile(path, []byte(base), 0o600))
	w := New(path, parse(t, path), Options{})
	must.OK(t, os.WriteFile(path, []byte(strings.Replace(base, "    password: first-password\n", "    pasword: second-secret-value\n", 1)), 0o600))
	r := judge(t, w)
	outcome, _, err, _ := r.Outcome, r.What, r.Err, r.Again
	if outcome != Refused || err == nil || strings.Contains(err.Error(), "second-secret-value") {
		t.Fatalf("%s, %v", outcome, err)
	}
}

type handler struct {
	changed chan string
	waiting chan string
	refused chan error
}

func (h handler) Changed(what, _ string) { h.changed <- what }
func (h handler) Waiting(_, why string)  { h.waiting <- why }
func (h handler) Refused(err error)      { h.refused <- err }

// turn is a Turn whose answer the test sets.
type turn struct {
	ok     atomic.Bool
	hashes chan string
}

func (tu *turn) Mine(_ context.Context, hash string) (bool, string) {
	tu.hashes <- hash
	if tu.ok.Load() {
		return true, "go"
	}
	return false, "a standby first"
}

// TestRun: on a fake clock, a refused content is reported once however
// many ticks see it; a valid change waits while it is not this replica's
// turn (reported once, the pending gauge 1), and ends the loop after
// Changed once it is.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.yaml")
	writeAtomic(t, path, []byte(base))
	clk := testclock.NewFakeClock(time.Now())
	m := NewMetrics()
	metrics.NewKubeRegistry().MustRegister(m.Collectors()...)
	w := New(path, parse(t, path), Options{Clock: clk, Interval: time.Second, Metrics: m, Started: []byte(base)})
	h := handler{changed: make(chan string, 1), waiting: make(chan string, 10), refused: make(chan error, 10)}
	tu := &turn{hashes: make(chan string, 10)}
	done := make(chan struct{})
	go func() { w.Run(context.Background(), tu, h); close(done) }()
	// tick steps the clock once the loop waits on it: the previous check
	// is complete then.
	tick := func() {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(time.Second)
	}
	writeAtomic(t, path, []byte("vcenter: ["))
	tick() // read once
	tick() // read twice: refused
	<-h.refused
	tick()
	tick() // the third tick is taken only after the second check: no report in between
	changed := strings.Replace(base, "k8s-zone", "site", 1)
	writeAtomic(t, path, []byte(changed))
	tick()
	tick()
	if why := <-h.waiting; why != "a standby first" {
		t.Errorf("waiting %q", why)
	}
	hash := <-tu.hashes
	tick()
	if again := <-tu.hashes; again != hash {
		t.Errorf("the same change asked about as %s, then %s", hash, again)
	}
	tick() // the check before is complete: the gauge is set
	<-tu.hashes
	if v, _ := testutil.GetGaugeMetricValue(m.pending); v != 1 {
		t.Errorf("config_change_pending %v while waiting, want 1", v)
	}
	tu.ok.Store(true)
	tick()
	if what := <-h.changed; what != "labels" {
		t.Errorf("changed %q", what)
	}
	<-done
	if len(h.refused) != 0 || len(h.waiting) != 0 {
		t.Errorf("reported again: %d refused, %d waiting", len(h.refused), len(h.waiting))
	}
	if v, _ := testutil.GetGaugeMetricValue(m.pending); v != 0 {
		t.Errorf("config_change_pending %v once acted on, want 0", v)
	}
	if got, _ := testutil.GetCounterMetricValue(m.changes.WithLabelValues("restart")); got != 1 {
		t.Errorf("valid changes counted %v, want 1 however many checks saw it", got)
	}
}

// TestHalfWritten: a file edited in place is read while being written:
// content read once is never judged, so neither a refusal nor a restart
// comes from a half-written file; the complete file, read twice, is.
func TestHalfWritten(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.yaml")
	must.OK(t, os.WriteFile(path, []byte(base), 0o600))
	w := New(path, parse(t, path), Options{Started: []byte(base)})
	ctx := context.Background()
	if r := w.Check(ctx); r.Outcome != Unchanged {
		t.Fatalf("the started content: %s", r.Outcome)
	}
	changed := strings.Replace(base, "k8s-zone", "site", 1)
	for _, cut := range []int{len(changed) / 3, 2 * len(changed) / 3} {
		must.OK(t, os.WriteFile(path, []byte(changed[:cut]), 0o600)) // in place, not renamed
		if r := w.Check(ctx); r.Outcome != Settling {
			t.Fatalf("%d of %d bytes written: %s %v", cut, len(changed), r.Outcome, r.Err)
		}
	}
	must.OK(t, os.WriteFile(path, []byte(changed), 0o600))
	if r := w.Check(ctx); r.Outcome != Settling {
		t.Fatalf("complete, read once: %s", r.Outcome)
	}
	if r := w.Check(ctx); r.Outcome != Changed || r.What != "labels" {
		t.Fatalf("complete, read twice: %s %q %v", r.Outcome, r.What, r.Err)
	}
}

// TestFingerprint: the replicas agree on a change. The hash of a change
// one replica sees is the fingerprint another replica, started with that
// content, publishes; a replica started with the old content publishes
// another.
func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.yaml")
	writeAtomic(t, path, []byte(base))
	old := New(path, parse(t, path), Options{Started: []byte(base)})
	changed := strings.Replace(base, "k8s-zone", "site", 1)
	writeAtomic(t, path, []byte(changed))
	r := judge(t, old)
	if r.Outcome != Changed || r.Hash == "" {
		t.Fatalf("%s %q", r.Outcome, r.Hash)
	}
	restarted := New(path, parse(t, path), Options{Started: []byte(changed)})
	if got := restarted.Fingerprint(); got != r.Hash {
		t.Errorf("restarted replica publishes %s, the change was %s", got, r.Hash)
	}
	if old.Fingerprint() == r.Hash {
		t.Errorf("the old replica publishes the new content's hash")
	}
}

// TestCABundleChecked: a changed CA bundle is accepted only once CheckCA
// accepts it for every vCenter that names it; a bundle that could be read
// at start and no longer can is refused.
func TestCABundleChecked(t *testing.T) {
	dir := t.TempDir()
	caPath := filepath.Join(dir, "ca.pem")
	path := filepath.Join(dir, "vsphere.yaml")
	withCA := strings.Replace(base, "    password: first-password\n", "    password: first-password\n    caFile: "+caPath+"\n", 1)
	writeAtomic(t, caPath, []byte("good one"))
	writeAtomic(t, path, []byte(withCA))
	var checked []string
	check := func(_ context.Context, vc config.VCenter, bundle []byte) error {
		checked = append(checked, vc.Name+":"+string(bundle))
		if string(bundle) != "good two" {
			return errors.New("TLS certificate not trusted")
		}
		return nil
	}
	w := New(path, parse(t, path), Options{CheckCA: check, Started: []byte(withCA)})
	writeAtomic(t, caPath, []byte("garbage"))
	if r := judge(t, w); r.Outcome != Refused || !strings.Contains(r.Err.Error(), `vcenter "a": caFile `+caPath+": TLS certificate not trusted") {
		t.Fatalf("garbage: %s %v", r.Outcome, r.Err)
	}
	writeAtomic(t, caPath, []byte("good two"))
	if r := judge(t, w); r.Outcome != Changed || r.What != "the content of "+caPath {
		t.Fatalf("a good bundle: %s %q %v", r.Outcome, r.What, r.Err)
	}
	if want := []string{"a:garbage", "a:good two"}; !slices.Equal(checked, want) {
		t.Errorf("checked %q, want %q (each content once)", checked, want)
	}
	must.OK(t, os.Remove(caPath))
	if r := judge(t, w); r.Outcome != Refused || !strings.Contains(r.Err.Error(), "can no longer be read") {
		t.Fatalf("removed: %s %v", r.Outcome, r.Err)
	}
}

// writeAtomic replaces path as a ConfigMap volume does: never half
// written.
func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	must.OK(t, os.WriteFile(tmp, b, 0o600))
	must.OK(t, os.Rename(tmp, path))
}

// TestCAFileAppears: a CA bundle missing at start and provided later is
// not a change to restart for (the vCenter client reads it on its next
// attempt, as TestBadCAFile shows end to end); once present, a new content
// is.
func TestCAFileAppears(t *testing.T) {
	dir := t.TempDir()
	caPath := filepath.Join(dir, "ca.pem")
	path := filepath.Join(dir, "vsphere.yaml")
	must.OK(t, os.WriteFile(path, []byte(strings.Replace(base, "    password: first-password\n", "    password: first-password\n    caFile: "+caPath+"\n", 1)), 0o600))
	w := New(path, parse(t, path), Options{})
	writeAtomic(t, caPath, []byte("first"))
	if r := judge(t, w); r.Outcome != Unchanged {
		t.Fatalf("the CA bundle appeared: %s %q %v, want unchanged", r.Outcome, r.What, r.Err)
	}
	writeAtomic(t, caPath, []byte("second"))
	if r := judge(t, w); r.Outcome != Changed || r.What != "the content of "+caPath {
		t.Fatalf("the CA bundle replaced: %s %q %v", r.Outcome, r.What, r.Err)
	}
}

// TestValidate: a config that parses but that the process would refuse at
// start against its command line (Options.Validate) is refused, not
// restarted into.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.yaml")
	must.OK(t, os.WriteFile(path, []byte(base), 0o600))
	refuse := func(cfg *config.Config) error {
		if cfg.Nodes.AdoptUntainted {
			return errors.New("nodes.adoptUntainted is true, but the cloud-node-controller is not enabled")
		}
		return nil
	}
	w := New(path, parse(t, path), Options{Validate: refuse})
	writeAtomic(t, path, []byte(base+"nodes:\n  adoptUntainted: true\n"))
	if r := judge(t, w); r.Outcome != Refused || r.Err == nil || !strings.Contains(r.Err.Error(), "cloud-node-controller") {
		t.Fatalf("%s, %v; want refused by the start checks", r.Outcome, r.Err)
	}
}

// TestChangedAgainstStart: what the process started with is the baseline.
// A config swapped between the process's parse and the watcher's start is
// a change; a CA bundle replaced while a broken config was refused is
// still a change once the config is fixed.
func TestChangedAgainstStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.yaml")
	caPath := filepath.Join(dir, "ca.pem")
	withCA := strings.Replace(base, "    password: first-password\n", "    password: first-password\n    caFile: "+caPath+"\n", 1)
	writeAtomic(t, caPath, []byte("first"))
	must.OK(t, os.WriteFile(path, []byte(withCA), 0o600))
	running := parse(t, path)
	writeAtomic(t, path, []byte(strings.Replace(withCA, "k8s-zone", "site", 1))) // swapped before the watcher starts
	w := New(path, running, Options{})
	if r := judge(t, w); r.Outcome != Changed || r.What != "labels" {
		t.Fatalf("swapped before the start: %s %q %v", r.Outcome, r.What, r.Err)
	}

	w = New(path, parse(t, path), Options{})
	writeAtomic(t, path, []byte("vcenter: ["))
	if r := judge(t, w); r.Outcome != Refused {
		t.Fatalf("broken config: %s", r.Outcome)
	}
	writeAtomic(t, caPath, []byte("second"))
	if r := judge(t, w); r.Outcome != Refused || r.Again {
		t.Fatalf("CA replaced while refused: %s (r.Again %v)", r.Outcome, r.Again)
	}
	writeAtomic(t, path, []byte(strings.Replace(withCA, "k8s-zone", "site", 1)))
	if r := judge(t, w); r.Outcome != Changed || r.What != "the content of "+caPath {
		t.Fatalf("config fixed: %s %q %v; want the CA bundle changed", r.Outcome, r.What, r.Err)
	}
}
