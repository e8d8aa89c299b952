package configwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
		outcome, what, err, again := w.Check()
		m.observe(outcome, again)
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
			outcome, what, err, _ := w.Check()
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
	outcome, _, err, _ := w.Check()
	if outcome != Refused || err == nil || strings.Contains(err.Error(), "second-secret-value") {
		t.Fatalf("%s, %v", outcome, err)
	}
}

type handler struct {
	changed chan string
	refused chan error
}

func (h handler) Changed(what string) { h.changed <- what }
func (h handler) Refused(err error)   { h.refused <- err }

// TestRun: on a fake clock, a refused content is reported once however
// many ticks see it, and a valid change ends the loop after Changed.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vsphere.yaml")
	writeAtomic(t, path, []byte(base))
	clk := testclock.NewFakeClock(time.Now())
	w := New(path, parse(t, path), Options{Clock: clk, Interval: time.Second})
	h := handler{changed: make(chan string, 1), refused: make(chan error, 10)}
	done := make(chan struct{})
	go func() { w.Run(context.Background(), h); close(done) }()
	tick := func() {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(time.Second)
	}
	writeAtomic(t, path, []byte("vcenter: ["))
	tick()
	<-h.refused
	tick()
	tick() // the third tick is taken only after the second check: no report in between
	writeAtomic(t, path, []byte(strings.Replace(base, "k8s-zone", "site", 1)))
	tick()
	if what := <-h.changed; what != "labels" {
		t.Errorf("changed %q", what)
	}
	<-done
	if len(h.refused) != 0 {
		t.Errorf("refused reported again: %v", <-h.refused)
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
	if outcome, what, err, _ := w.Check(); outcome != Unchanged {
		t.Fatalf("the CA bundle appeared: %s %q %v, want unchanged", outcome, what, err)
	}
	writeAtomic(t, caPath, []byte("second"))
	if outcome, what, err, _ := w.Check(); outcome != Changed || what != "the content of "+caPath {
		t.Fatalf("the CA bundle replaced: %s %q %v", outcome, what, err)
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
	if outcome, _, err, _ := w.Check(); outcome != Refused || err == nil || !strings.Contains(err.Error(), "cloud-node-controller") {
		t.Fatalf("%s, %v; want refused by the start checks", outcome, err)
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
	if outcome, what, err, _ := w.Check(); outcome != Changed || what != "labels" {
		t.Fatalf("swapped before the start: %s %q %v", outcome, what, err)
	}

	w = New(path, parse(t, path), Options{})
	writeAtomic(t, path, []byte("vcenter: ["))
	if outcome, _, _, _ := w.Check(); outcome != Refused {
		t.Fatalf("broken config: %s", outcome)
	}
	writeAtomic(t, caPath, []byte("second"))
	if outcome, _, _, again := w.Check(); outcome != Refused || again {
		t.Fatalf("CA replaced while refused: %s (again %v)", outcome, again)
	}
	writeAtomic(t, path, []byte(strings.Replace(withCA, "k8s-zone", "site", 1)))
	if outcome, what, err, _ := w.Check(); outcome != Changed || what != "the content of "+caPath {
		t.Fatalf("config fixed: %s %q %v; want the CA bundle changed", outcome, what, err)
	}
}
