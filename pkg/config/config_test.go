package config

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/invalid")

var cmpOpts = cmp.Options{cmpopts.EquateComparable(netip.Prefix{}), cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(HostGroupZones{})}

func mustParse(t *testing.T, file string, opts Options) *Config {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Parse(filepath.Base(file), data, opts)
	if err != nil {
		t.Fatalf("Parse(%s): %v", file, err)
	}
	return cfg
}

// Every invalid fixture fails with exactly the diagnostics in its .golden
// file: positions, field paths and messages.
func TestInvalidFixtures(t *testing.T) {
	for _, f := range must.Glob(t, "testdata/invalid/*") {
		if strings.HasSuffix(f, ".golden") {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, warnings, err := Parse(filepath.Base(f), data, Options{})
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			errs, ok := AsErrors(err)
			if !ok {
				t.Fatalf("error %T is not Errors: %v", err, err)
			}
			got := errs.Error() + "\n"
			if len(warnings) > 0 {
				got += "warnings:\n"
				for _, w := range warnings {
					got += w.Error() + "\n"
				}
			}
			golden := f + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing %s (run go test ./pkg/config -run TestInvalidFixtures -update): %v", golden, err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("diagnostics differ from %s (-want +got):\n%s", golden, diff)
			}
			for _, d := range errs {
				if d.Pos.File != filepath.Base(f) {
					t.Errorf("diagnostic %q does not name the file", d.Error())
				}
			}
		})
	}
}

func TestInheritance(t *testing.T) {
	cfg := mustParse(t, "testdata/valid/inheritance.yaml", Options{})
	want := []VCenter{
		{
			Name: "inherits", Server: "vc-1.example.com", Port: 8443, Datacenters: []string{"dc-global"},
			InsecureFlag: true, SOAPRoundtripCount: 3, IPFamilies: []IPFamily{IPv6},
			Credentials: Credentials{
				// It reads a Secret: global's inline user and password
				// are not inherited, as in the reference.
				GlobalSecret: &SecretRef{Namespace: "kube-system", Name: "creds"},
			},
		},
		{
			Name: "overrides", Server: "vc-2.example.com", Port: 443, Datacenters: []string{"dc-a", "dc-b"},
			InsecureFlag: false, CAFile: "/etc/ca.pem", SOAPRoundtripCount: 3, IPFamilies: []IPFamily{IPv4, IPv6},
			Credentials: Credentials{
				Secret:       &SecretRef{Namespace: "kube-system", Name: "own-creds"},
				GlobalSecret: &SecretRef{Namespace: "kube-system", Name: "creds"},
				Inline:       secret.Password{Username: "own-user", Password: secret.New("own-pass")},
			},
		},
	}
	if diff := cmp.Diff(want, cfg.VCenters, cmpOpts); diff != "" {
		t.Errorf("vCenters (-want +got):\n%s", diff)
	}
}

func TestValidFixtures(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, cfg *Config, warnings []Diagnostic)
	}{
		{"reference-flavour.yaml", func(t *testing.T, cfg *Config, warnings []Diagnostic) {
			vc, ok := cfg.VCenter("10.0.0.5")
			if !ok {
				t.Fatalf("global.server did not create a vCenter: %+v", cfg.VCenters)
			}
			if vc.Port != 443 || !vc.InsecureFlag || inlinePassword(vc.Credentials) != "pa:ss=word" {
				t.Errorf("vCenter from global: %+v", vc)
			}
			if diff := cmp.Diff([]string{"dc1", "dc2"}, vc.Datacenters); diff != "" {
				t.Errorf("datacenters: %s", diff)
			}
			want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16")}
			if diff := cmp.Diff(want, cfg.Nodes.InternalSubnets, cmpOpts); diff != "" {
				t.Errorf("internal subnets: %s", diff)
			}
			wantWarn := []string{"global.server", `vcenter["10.0.0.5"].insecureFlag`, "global.apiDisable"}
			var got []string
			for _, w := range warnings {
				got = append(got, w.Field)
			}
			for _, w := range wantWarn {
				if !strings.Contains(strings.Join(got, " "), w) {
					t.Errorf("no warning for %s; got %v", w, warnings)
				}
			}
		}},
		{"extensions.yaml", func(t *testing.T, cfg *Config, _ []Diagnostic) {
			want := Global{SecretsDirectory: "/etc/cloud/credentials", ConnectTimeout: 10 * time.Second,
				RequestTimeout: 45 * time.Second, LoginBackoff: 5 * time.Minute, TagRefreshInterval: time.Minute, TokenLifetime: 12 * time.Hour}
			if diff := cmp.Diff(want, cfg.Global); diff != "" {
				t.Errorf("global: %s", diff)
			}
			st := cfg.VCenters[0].StaticTopology
			wantST := StaticTopology{Zone: "lab-zone", Region: "lab", Datacenters: map[string]ZoneRegion{"lab-dc-2": {Zone: "lab-zone-2"}}}
			if diff := cmp.Diff(wantST, st); diff != "" {
				t.Errorf("static topology: %s", diff)
			}
			if diff := cmp.Diff([]AdditionalLabel{{Category: "rack", Label: "example.com/rack"},
				{Attribute: "cost-center", Label: "example.com/cost-center"}}, cfg.Labels.Additional); diff != "" {
				t.Errorf("additional labels: %s", diff)
			}
			if l := cfg.Labels; l.InstanceType != "k8s-instance-type" || l.InstanceTypeAttribute != "instance-type" ||
				!slices.Equal(l.Placement, []PlacementLabel{PlacementHost, PlacementCluster, PlacementHostGroup}) {
				t.Errorf("labels: %+v", l)
			}
			if cfg.Nodes.DeletionDelay != 15*time.Minute {
				t.Errorf("deletionDelay: %v", cfg.Nodes.DeletionDelay)
			}
			if o := cfg.Nodes.OutOfService; !o.Enabled || o.NotReadyFor != 2*time.Minute || o.PoweredOffFor != DefaultOutOfServicePoweredOffFor {
				t.Errorf("outOfService: %+v", o)
			}
			wantSC := ServingCertificates{Approve: true,
				AllowedIPRanges:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("fd00::/64")},
				AllowedDNSDomains: []string{"nodes.example.com"}, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
				PodCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}, ControlPlaneEndpoints: []string{"10.0.0.10", "api.example.com"},
				ClusterDomain: "k8s.example"}
			if diff := cmp.Diff(wantSC, cfg.Nodes.ServingCertificates, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("servingCertificates: %s", diff)
			}
			if diff := cmp.Diff([]LookupMethod{LookupUUID, LookupGuestHostname, LookupVMName}, cfg.Nodes.LookupOrder); diff != "" {
				t.Errorf("lookup order: %s", diff)
			}
			if len(cfg.HostGroupZones) != 2 {
				t.Fatalf("hostGroupZones: %+v", cfg.HostGroupZones)
			}
			names, pattern := cfg.HostGroupZones[0], cfg.HostGroupZones[1]
			for _, tc := range []struct {
				entry                     HostGroupZones
				vcenter, dc, cluster, grp string
				matches                   bool
				zone                      string
			}{
				{names, "lab", "lab-dc", "stretched-1", "site-b-hosts", true, "zone-b"},
				{names, "lab", "lab-dc-2", "stretched-1", "site-b-hosts", false, "zone-b"},
				{names, "lab", "lab-dc", "ordinary", "site-b-hosts", false, "zone-b"},
				{names, "lab", "lab-dc", "stretched-1", "other-hosts", true, ""},
				{pattern, "lab", "lab-dc-2", "any", "zone-east-1-hosts", true, "east-1"},
				{pattern, "lab", "lab-dc-2", "any", "maintenance", true, ""},
			} {
				if got := tc.entry.Matches(tc.vcenter, tc.dc, tc.cluster); got != tc.matches {
					t.Errorf("%s.Matches(%s, %s, %s) = %v", tc.entry.Describe(0), tc.vcenter, tc.dc, tc.cluster, got)
				}
				if z, ok := tc.entry.ZoneOf(tc.grp); z != tc.zone || ok != (tc.zone != "") {
					t.Errorf("%s.ZoneOf(%s) = %q, %v; want %q", tc.entry.Describe(0), tc.grp, z, ok, tc.zone)
				}
			}
			if names.Region != "stretched" || pattern.Region != "" {
				t.Errorf("regions %q, %q", names.Region, pattern.Region)
			}
		}},
		{"credential-modes.yaml", func(t *testing.T, cfg *Config, warnings []Diagnostic) {
			want := map[string]string{
				"explicit-certificate": "certificate CN=k8s-ccm-solution-user,OU=solution users",
				"certificate-as-user":  "certificate CN=k8s-ccm-solution-user,OU=solution users",
				"shared":               "session manager https://sm.example.com/session",
				"shared-with-token":    "session manager http://sm.example.com:18080/session",
				"password":             "administrator@vsphere.local",
			}
			for _, vc := range cfg.VCenters {
				if vc.Credentials.Inline == nil || vc.Credentials.Inline.Identity() != want[vc.Name] {
					t.Errorf("%s: inline %v, want %q", vc.Name, vc.Credentials.Sources(), want[vc.Name])
				}
				if vc.Credentials.TokenFile != "/var/run/secrets/tokens/vcenter" {
					t.Errorf("%s: token file %q, want global's", vc.Name, vc.Credentials.TokenFile)
				}
			}
			vc, _ := cfg.VCenter("shared-with-token")
			if s, ok := vc.Credentials.Inline.(secret.SharedSession); !ok || s.Token.Reveal() != "bearer-token" {
				t.Errorf("shared-with-token: %#v", vc.Credentials.Inline)
			}
			if !slices.ContainsFunc(warnings, func(d Diagnostic) bool {
				return d.Field == `vcenter["shared-with-token"].sessionManagerAllowHTTP` && strings.Contains(d.Message, "travel in clear")
			}) || !vc.Credentials.AllowHTTP {
				t.Errorf("no warning for the plain http session manager allowed: %v", warnings)
			}
		}},
		{"credential-modes.conf", func(t *testing.T, cfg *Config, _ []Diagnostic) {
			user, _ := cfg.VCenter("vc-user.example.com")
			if c, ok := user.Credentials.Inline.(secret.Certificate); !ok || c.Leaf().Subject.CommonName != "k8s-ccm-solution-user" {
				t.Errorf("INI certificate as user: %v", user.Credentials.Sources())
			}
			shared, _ := cfg.VCenter("vc-shared.example.com")
			if s, ok := shared.Credentials.Inline.(secret.SharedSession); !ok || s.Token.IsSet() || shared.Credentials.TokenFile != "/var/run/secrets/tokens/vcenter" {
				t.Errorf("INI shared session: %v, token file %q", shared.Credentials.Sources(), shared.Credentials.TokenFile)
			}
		}},
		{"quoting.conf", func(t *testing.T, cfg *Config, _ []Diagnostic) {
			vc := cfg.VCenters[0]
			if inlineUser(vc.Credentials) != `domain\admin` || inlinePassword(vc.Credentials) != `p;a#s"s` {
				t.Errorf("quoted values: user %q, password matches: %v", inlineUser(vc.Credentials), inlinePassword(vc.Credentials) == `p;a#s"s`)
			}
			if diff := cmp.Diff([]string{"dc 1", "dc 2"}, vc.Datacenters); diff != "" {
				t.Errorf("datacenters: %s", diff)
			}
			if cfg.Global.SecretsDirectory != "/etc/cloud/credentials" || vc.InsecureFlag {
				t.Errorf("global: %+v, insecure %v", cfg.Global, vc.InsecureFlag)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/valid/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			cfg, warnings, err := Parse(tt.file, data, Options{})
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg, warnings)
		})
	}
}

// Every file in config-examples/ loads without error.
func TestConfigExamples(t *testing.T) {
	files := must.Glob(t, "../../config-examples/*")
	if len(files) < 5 {
		t.Fatalf("expected at least 5 examples, found %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			mustParse(t, f, Options{})
		})
	}
}

// The legacy INI example describes the same deployment as the stretched
// YAML example, and its canonical YAML parses back to the same model.
func TestLegacyINIMatchesStretchedYAML(t *testing.T) {
	fromINI := mustParse(t, "../../config-examples/legacy.ini", Options{})
	fromYAML := mustParse(t, "../../config-examples/stretched-3-vcenters.yaml", Options{})
	if diff := cmp.Diff(fromYAML, fromINI, cmpOpts); diff != "" {
		t.Errorf("INI and YAML examples differ (-yaml +ini):\n%s", diff)
	}
	out, _, _, err := Encode(fromINI, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	converted, _, err := Parse("converted.yaml", out, Options{})
	if err != nil {
		t.Fatalf("converted output does not validate: %v\n%s", err, out)
	}
	if diff := cmp.Diff(fromYAML, converted, cmpOpts); diff != "" {
		t.Errorf("converted INI differs from the YAML example (-yaml +converted):\n%s", diff)
	}
}

// INI or YAML -> model -> YAML -> model is the identity, passwords aside.
func TestRoundTrip(t *testing.T) {
	for _, f := range append(must.Glob(t, "testdata/valid/*"), must.Glob(t, "../../config-examples/*")...) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg := mustParse(t, f, Options{})
			assertRoundTrip(t, cfg)
		})
	}
}

func assertRoundTrip(t *testing.T, cfg *Config) {
	t.Helper()
	out, moved, _, err := Encode(cfg, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := Parse("encoded.yaml", out, Options{})
	if err != nil {
		t.Fatalf("re-parse of encoded config: %v\n%s", err, out)
	}
	// Inline credentials moved to the default Secret: the same users, and
	// the Secret named globally, or per vCenter when global names another.
	want := withoutPasswords(cfg)
	want.NSXT = NSXT{} // not carried over: this CCM does not use it
	def := DefaultConvertSecret()
	global := false
	for _, m := range moved {
		for i := range want.VCenters {
			vc := &want.VCenters[i]
			if vc.Name != m.VCenter {
				continue
			}
			if !secret.Equal(vc.Credentials.Inline, m.Credentials) {
				t.Errorf("vcenter %q: moved %s, want %s", m.VCenter, DescribeCredentials("", m.Credentials), DescribeCredentials("", vc.Credentials.Inline))
			}
			vc.Credentials.Inline = nil
			switch c := &vc.Credentials; {
			case c.Secret != nil:
			case c.GlobalSecret == nil || *c.GlobalSecret == def:
				global = true
			default:
				c.Secret = &def
			}
		}
	}
	for i := range want.VCenters {
		if c := &want.VCenters[i].Credentials; global && c.GlobalSecret == nil {
			c.GlobalSecret = &def
		}
	}
	if diff := cmp.Diff(want, withoutPasswords(again), cmpOpts); diff != "" {
		t.Errorf("round trip changed the model (-want +got):\n%s\n%s", diff, out)
	}
}

func withoutPasswords(cfg *Config) *Config {
	c := *cfg
	c.VCenters = append([]VCenter(nil), cfg.VCenters...)
	return &c
}

// inlineUser and inlinePassword read inline password credentials.
func inlineUser(c Credentials) string {
	p, _ := c.Inline.(secret.Password)
	return p.Username
}

func inlinePassword(c Credentials) string {
	p, _ := c.Inline.(secret.Password)
	return p.Password.Reveal()
}

func TestDetectFormat(t *testing.T) {
	tests := []struct {
		in   string
		want Format
	}{
		{"", FormatYAML},
		{"global:\n  port: 443\n", FormatYAML},
		{"# comment\n\n[Global]\n", FormatINI},
		{"; comment\nuser = x\n", FormatINI},
		{"\ufeff[Global]\n", FormatINI},
		{"  [VirtualCenter \"a\"]", FormatINI},
		{"# [Global] in a comment\nglobal: {}\n", FormatYAML},
	}
	for _, tt := range tests {
		if got := DetectFormat([]byte(tt.in)); got != tt.want {
			t.Errorf("DetectFormat(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestControlCharacters(t *testing.T) {
	cases := map[string]string{
		"ini value":  "[Global]\nsecrets-directory = /s\n[VirtualCenter \"vc\"]\nuser = u\x7f\npassword = p\n",
		"ini name":   "[Global]\nuser = u\npassword = p\n[VirtualCenter \"v\x01c\"]\n",
		"yaml value": "vcenter:\n  vc:\n    server: vc.example.com\n    password: \"se\\u0007cret\"\n    user: u\n",
		"yaml list":  "vcenter:\n  vc:\n    server: vc.example.com\n    user: u\n    password: p\n    datacenters: [\"dc\\u0001\"]\n",
	}
	for name, text := range cases {
		_, _, err := Parse("f", []byte(text), Options{})
		if err == nil || !strings.Contains(err.Error(), "control character U+00") || !strings.Contains(err.Error(), "f:") {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "se\acret") {
			t.Errorf("%s: the error echoes the value", name)
		}
	}
}

// The INI [Labels] section carries the new label settings; hostGroupZones
// is YAML only.
func TestINILabelExtensions(t *testing.T) {
	ini := "[Global]\nsecret-name = creds\nsecret-namespace = kube-system\n[VirtualCenter \"vc.example.com\"]\n[Labels]\nzone = k8s-zone\ncsi-compatible = true\non-drift = relabel\n"
	cfg, _, err := Parse("vsphere.conf", []byte(ini), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Labels.CSICompatible || cfg.Labels.OnDrift != DriftRelabel || cfg.Labels.Zone != "k8s-zone" {
		t.Errorf("labels %+v", cfg.Labels)
	}
	if cfg, _, err := Parse("vsphere.conf", []byte(strings.Replace(ini, "on-drift = relabel\n", "", 1)), Options{}); err != nil || cfg.Labels.OnDrift != DriftKeep {
		t.Errorf("default onDrift: %v, %v", cfg, err)
	}
}

// TestDeletionDelayWithoutDeletion: a delay with deletion never is a
// warning naming the field, at its line; the config loads.
func TestDeletionDelayWithoutDeletion(t *testing.T) {
	text := "vcenter:\n  vc:\n    server: vc.example.com\n    user: u\n    password: p\n    datacenters: [dc]\nnodes:\n  deletion: never\n  deletionDelay: 10m\n"
	cfg, warns, err := Parse("delay.yaml", []byte(text), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Nodes.DeletionDelay != 10*time.Minute {
		t.Errorf("deletionDelay %v", cfg.Nodes.DeletionDelay)
	}
	for _, w := range warns {
		if w.Field == "nodes.deletionDelay" && strings.Contains(w.Message, "no effect with nodes.deletion: never") {
			return
		}
	}
	t.Errorf("warnings %v: none about nodes.deletionDelay", warns)
}

// TestMappedPrefixes: an IPv4-mapped prefix in the serving certificate
// ranges is read as its IPv4 range (addresses are compared unmapped: it
// would match nothing), with a warning.
func TestMappedPrefixes(t *testing.T) {
	base := "vcenter:\n  a:\n    server: a.example.com\n    user: u\n    password: p\n    insecureFlag: true\nnodes:\n  servingCertificates:\n    approve: true\n"
	cfg, warnings, err := Parse("v.yaml", []byte(base+"    podCIDRs: [\"::ffff:10.244.0.0/112\"]\n    serviceCIDRs: [10.96.0.0/12]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Nodes.ServingCertificates.PodCIDRs; len(got) != 1 || got[0] != netip.MustParsePrefix("10.244.0.0/16") {
		t.Errorf("podCIDRs %v, want [10.244.0.0/16]", got)
	}
	if !strings.Contains(fmt.Sprint(warnings), "IPv4-mapped prefix; using 10.244.0.0/16") {
		t.Errorf("no warning: %v", warnings)
	}
}

// TestNodeNameKey: nodes.identity.nodeNameKey is read, kept through a
// round trip, and refused empty or guest-writable (bad-identity.yaml).
func TestNodeNameKey(t *testing.T) {
	base := "vcenter:\n  a:\n    server: a.example.com\n    user: u\n    password: p\n    insecureFlag: true\nnodes:\n  identity:\n    approveClientCertificates: true\n"
	for _, tc := range []struct{ line, want, err string }{
		{"", "", ""},
		{"    nodeNameKey: k8s.node-name\n", "k8s.node-name", ""},
		{"    nodeNameKey: \"\"\n", "", "nodes.identity.nodeNameKey: is empty"},
		{"    nodeNameKey: GuestInfo.node\n", "", "is a guestinfo.* key, which the guest itself can write"},
		{"    nodeNameKey: k8s node\n", "", "holds a space, a quote or a bracket"},
	} {
		cfg, _, err := Parse("v.yaml", []byte(base+tc.line), Options{})
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.line, err, tc.err)
			}
			continue
		case err != nil:
			t.Errorf("%q: %v", tc.line, err)
			continue
		}
		if got := cfg.Nodes.Identity.NodeNameKey; got != tc.want {
			t.Errorf("%q: nodeNameKey %q, want %q", tc.line, got, tc.want)
		}
		out, _, _, err := Encode(cfg, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := Parse("again.yaml", out, Options{})
		if err != nil {
			t.Fatalf("%q: the encoded config does not parse: %v\n%s", tc.line, err, out)
		}
		if again.Nodes.Identity != cfg.Nodes.Identity {
			t.Errorf("%q: round trip %+v, want %+v", tc.line, again.Nodes.Identity, cfg.Nodes.Identity)
		}
	}
}
