package config

import (
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"

	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

// The migration corpus (testdata/migration): every cloud-config that
// kubernetes/cloud-provider-vsphere ships or tests and those of the in-tree
// provider's tests, byte for byte, with the reference's own verdict and
// reading of each in MANIFEST.yaml, computed by the reference's loader
// (hack/refverdict).

type corpusEntry struct {
	File           string        `json:"file"`
	Origin         string        `json:"origin"`
	Format         string        `json:"format"`
	Reference      string        `json:"reference"` // accept or reject
	ReferenceError string        `json:"referenceError,omitempty"`
	Here           string        `json:"here,omitempty"`
	Why            string        `json:"why,omitempty"`
	Notes          []string      `json:"notes,omitempty"`
	Meaning        *corpusConfig `json:"meaning,omitempty"`
	Network        *NSXT         `json:"network,omitempty"`
}

type corpusConfig struct {
	SecretsDirectory string          `json:"secretsDirectory,omitempty"`
	VCenters         []corpusVCenter `json:"vcenters,omitempty"`
	Labels           struct {
		Zone   string `json:"zone,omitempty"`
		Region string `json:"region,omitempty"`
	} `json:"labels,omitempty"`
	Nodes map[string]string `json:"nodes,omitempty"`
}

type corpusVCenter struct {
	Name            string   `json:"name"`
	Server          string   `json:"server"`
	Port            string   `json:"port,omitempty"`
	Datacenters     []string `json:"datacenters,omitempty"`
	Insecure        bool     `json:"insecure,omitempty"`
	CAFile          string   `json:"caFile,omitempty"`
	Thumbprint      string   `json:"thumbprint,omitempty"`
	User            string   `json:"user,omitempty"`
	PasswordSet     bool     `json:"passwordSet,omitempty"`
	SecretName      string   `json:"secretName,omitempty"`
	SecretNamespace string   `json:"secretNamespace,omitempty"`
	IPFamily        []string `json:"ipFamily,omitempty"`
	RoundTripCount  int      `json:"roundTripCount,omitempty"`
}

// TestCorpusDocumented: docs/migration.md lists every corpus file.
func TestCorpusDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/migration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range readCorpus(t) {
		if !strings.Contains(string(doc), "`"+e.File+"`") {
			t.Errorf("docs/migration.md does not list %s", e.File)
		}
	}
}

func readCorpus(t *testing.T) []corpusEntry {
	t.Helper()
	return readManifest(t, "testdata/migration")
}

func readManifest(t *testing.T, dir string) []corpusEntry {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "MANIFEST.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []corpusEntry
	if err := yaml.UnmarshalStrict(data, &entries); err != nil {
		t.Fatalf("MANIFEST.yaml: %v", err)
	}
	files := must.Glob(t, filepath.Join(dir, "*"))
	listed := map[string]bool{}
	for _, e := range entries {
		listed[e.File] = true
	}
	for _, f := range files {
		if b := filepath.Base(f); b != "MANIFEST.yaml" && !listed[b] {
			t.Errorf("%s is not in MANIFEST.yaml (run hack/refverdict)", b)
		}
	}
	return entries
}

// TestMigrationCorpus: every config the reference accepts is accepted here
// (warnings allowed) and read with the same meaning; where the meaning
// differs on purpose, a warning says so. Its canonical YAML (config
// convert) validates and, with the moved credentials, names the same
// vCenters and users.
func TestMigrationCorpus(t *testing.T) {
	entries := readCorpus(t)
	if len(entries) < 20 {
		t.Fatalf("%d corpus entries", len(entries))
	}
	for _, e := range entries {
		t.Run(e.File, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata/migration", e.File))
			if err != nil {
				t.Fatal(err)
			}
			cfg, warnings, err := Parse(e.File, data, Options{})
			if e.Here == "reject" {
				// A deliberate divergence, documented in docs/migration.md.
				if e.Reference != "accept" || e.Why == "" {
					t.Fatalf("here: reject is for configs the reference accepts, with a why")
				}
				if err == nil {
					t.Fatalf("accepted, but MANIFEST.yaml says it is rejected on purpose: %s", e.Why)
				}
				if !strings.Contains(err.Error(), e.Why) {
					t.Errorf("rejected for another reason than %q:\n%v", e.Why, err)
				}
				return
			}
			if e.Reference != "accept" {
				// Rejected by the reference: any verdict here, but a clear one.
				if err == nil && cfg == nil {
					t.Fatal("no config and no error")
				}
				return
			}
			if err != nil {
				t.Fatalf("the reference accepts %s (%s); here:\n%v", e.File, e.Origin, err)
			}
			var ws []string
			for _, w := range warnings {
				ws = append(ws, w.Error())
			}
			if e.Meaning != nil {
				for _, d := range sameMeaning(cfg, e.Meaning, strings.Join(ws, "\n")) {
					t.Error(d)
				}
			}
			assertConverts(t, cfg)
		})
	}
}

// sameMeaning lists how cfg reads differently from the reference's
// reading want, unless a warning explains the difference.
func sameMeaning(cfg *Config, want *corpusConfig, warnings string) []string {
	var out []string
	diff := func(what string, got, want any) {
		out = append(out, fmt.Sprintf("%s: got %v, the reference reads %v", what, got, want))
	}
	if len(cfg.VCenters) != len(want.VCenters) {
		var got, names []string
		for _, vc := range cfg.VCenters {
			got = append(got, vc.Name+"="+vc.Address())
		}
		for _, vc := range want.VCenters {
			names = append(names, vc.Name+"="+vc.Server+":"+vc.Port)
		}
		diff("vCenters", got, names)
		return out
	}
	for _, w := range want.VCenters {
		vc, ok := cfg.VCenter(w.Name)
		if !ok {
			diff("vCenter "+w.Name, "absent", w)
			continue
		}
		p := "vcenter " + w.Name
		if vc.Server != w.Server {
			diff(p+" server", vc.Server, w.Server)
		}
		if port := strconv.Itoa(vc.Port); w.Port != "" && port != w.Port {
			diff(p+" port", port, w.Port)
		}
		if !slices.Equal(vc.Datacenters, nonBlank(w.Datacenters)) && !(len(vc.Datacenters) == 0 && len(nonBlank(w.Datacenters)) == 0) {
			diff(p+" datacenters", vc.Datacenters, w.Datacenters)
		}
		if vc.InsecureFlag != w.Insecure && !strings.Contains(warnings, "the reference CCM did not (it inherits the global true)") {
			diff(p+" insecure", vc.InsecureFlag, w.Insecure)
		}
		if vc.CAFile != w.CAFile {
			diff(p+" caFile", vc.CAFile, w.CAFile)
		}
		if !strings.EqualFold(vc.Thumbprint, w.Thumbprint) {
			diff(p+" thumbprint", vc.Thumbprint, w.Thumbprint)
		}
		c := vc.Credentials
		if inlineUser(c) != w.User && !(w.User != "" && !w.PasswordSet) {
			diff(p+" user", inlineUser(c), w.User)
		}
		if (inlinePassword(c) != "") != w.PasswordSet && !(w.PasswordSet && w.User == "") {
			diff(p+" password set", inlinePassword(c) != "", w.PasswordSet)
		}
		if w.SecretName != "" && w.SecretNamespace != "" {
			ref := SecretRef{Namespace: w.SecretNamespace, Name: w.SecretName}
			if (c.Secret == nil || *c.Secret != ref) && (c.GlobalSecret == nil || *c.GlobalSecret != ref) {
				diff(p+" Secret", c.Sources(), ref)
			}
		}
		if fams := nonBlank(w.IPFamily); len(fams) > 0 {
			var got []string
			for _, f := range vc.IPFamilies {
				got = append(got, string(f))
			}
			if !slices.Equal(got, fams) {
				diff(p+" ipFamily", got, fams)
			}
		}
		if w.RoundTripCount != 0 && vc.SOAPRoundtripCount != w.RoundTripCount {
			diff(p+" soapRoundtripCount", vc.SOAPRoundtripCount, w.RoundTripCount)
		}
	}
	if cfg.Global.SecretsDirectory != want.SecretsDirectory {
		diff("secretsDirectory", cfg.Global.SecretsDirectory, want.SecretsDirectory)
	}
	if cfg.Labels.Zone != want.Labels.Zone || cfg.Labels.Region != want.Labels.Region {
		diff("labels", []string{cfg.Labels.Zone, cfg.Labels.Region}, want.Labels)
	}
	for key, got := range map[string]string{
		"internalNetworkSubnetCidr":        prefixes(cfg.Nodes.InternalSubnets),
		"externalNetworkSubnetCidr":        prefixes(cfg.Nodes.ExternalSubnets),
		"excludeInternalNetworkSubnetCidr": prefixes(cfg.Nodes.ExcludeInternalSubnets),
		"excludeExternalNetworkSubnetCidr": prefixes(cfg.Nodes.ExcludeExternalSubnets),
		"internalVmNetworkName":            cfg.Nodes.InternalVMNetworkName,
		"externalVmNetworkName":            cfg.Nodes.ExternalVMNetworkName,
	} {
		w := want.Nodes[key]
		if strings.HasSuffix(key, "Cidr") {
			w = normalizePrefixes(w)
		}
		if got != w {
			diff("nodes."+key, got, w)
		}
	}
	return out
}

func nonBlank(l []string) []string {
	var out []string
	for _, s := range l {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func prefixes(ps []netip.Prefix) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}

// normalizePrefixes reads the reference's comma-separated CIDRs as this
// CCM does (host bits masked).
func normalizePrefixes(s string) string {
	var out []string
	for _, f := range nonBlank(strings.Split(s, ",")) {
		if p, err := netip.ParsePrefix(f); err == nil {
			f = p.Masked().String()
		}
		out = append(out, f)
	}
	return strings.Join(out, ",")
}

// assertConverts: config convert's output validates and names the same
// vCenters; every inline user moved out keeps its vCenter's server.
func assertConverts(t *testing.T, cfg *Config) {
	t.Helper()
	out, moved, _, err := Encode(cfg, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := Parse("converted.yaml", out, Options{})
	if err != nil {
		t.Fatalf("converted config does not validate: %v\n%s", err, out)
	}
	if len(again.VCenters) != len(cfg.VCenters) {
		t.Fatalf("converted: %d vCenters, want %d", len(again.VCenters), len(cfg.VCenters))
	}
	for i, vc := range cfg.VCenters {
		a := again.VCenters[i]
		if a.Name != vc.Name || a.Address() != vc.Address() || a.InsecureFlag != vc.InsecureFlag || a.CAFile != vc.CAFile || a.Thumbprint != vc.Thumbprint {
			t.Errorf("converted vCenter %s differs: %v vs %v", vc.Name, a, vc)
		}
		if vc.Credentials.Inline != nil {
			i := slices.IndexFunc(moved, func(m InlineCredential) bool { return m.VCenter == vc.Name })
			if i < 0 || moved[i].Server != vc.Server || !secret.Equal(moved[i].Credentials, vc.Credentials.Inline) {
				t.Errorf("vcenter %s: inline credentials not moved", vc.Name)
			}
			if len(a.Credentials.Sources()) == 0 {
				t.Errorf("vcenter %s: converted config reads its credentials nowhere", vc.Name)
			}
		}
	}
}
