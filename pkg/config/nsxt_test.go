package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// withVCenter completes a fragment (the reference's NSX-T readers' own
// test configs have no vCenter) with one vCenter, as hack/refverdict
// -complete does before the reference reads it.
func withVCenter(b []byte, format string) []byte {
	if strings.Contains(strings.ToLower(string(b)), "vcenter") || strings.Contains(strings.ToLower(string(b)), "virtualcenter") {
		return b
	}
	if format == "ini" {
		return append(append([]byte{}, b...), "\n[VirtualCenter \"vc.example.com\"]\nuser = u\npassword = p\n"...)
	}
	return append(append([]byte{}, b...), "\nvcenter:\n  vc.example.com:\n    server: vc.example.com\n    user: u\n    password: p\n"...)
}

// TestNSXTCorpus: the reference's own NSX-T, load balancer and route test
// configs (testdata/nsxt, byte for byte) and a config with every key of
// every section, in both formats, start here, and read as the reference's
// own readers read them (MANIFEST.yaml, hack/refverdict -complete): the
// same load balancer verdict and classes, router path and NSX-T manager.
// Every config of the migration corpus reads the same way too (none of
// them enables NSX-T).
func TestNSXTCorpus(t *testing.T) {
	for _, dir := range []string{"testdata/nsxt", "testdata/migration"} {
		for _, e := range readManifest(t, dir) {
			if e.Reference != "accept" {
				continue
			}
			t.Run(filepath.Join(filepath.Base(dir), e.File), func(t *testing.T) {
				data, err := os.ReadFile(filepath.Join(dir, e.File))
				if err != nil {
					t.Fatal(err)
				}
				if dir == "testdata/nsxt" {
					data = withVCenter(data, e.Format)
				}
				cfg, warnings, err := Parse(e.File, data, Options{})
				if e.Here == "reject" {
					return // TestMigrationCorpus checks these
				}
				if err != nil {
					t.Fatalf("the reference accepts %s (%s); here:\n%v", e.File, e.Origin, err)
				}
				want := NSXT{}
				if e.Network != nil {
					want = *e.Network
				}
				got := cfg.NSXT
				// The reference's refusal reason is whatever its last reader
				// said (INI after YAML): only whether it refused is compared.
				if (got.LoadBalancerRefused != "") != (want.LoadBalancerRefused != "") {
					t.Errorf("load balancer refused: here %q, the reference %q", got.LoadBalancerRefused, want.LoadBalancerRefused)
				}
				got.LoadBalancerRefused, want.LoadBalancerRefused, got.Sections = "", "", nil
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("NSX-T reading differs from the reference's (-reference +here):\n%s", diff)
				}
				var ws []string
				for _, w := range warnings {
					ws = append(ws, w.Error())
				}
				all := strings.Join(ws, "\n")
				if cfg.NSXT.LoadBalancer && !strings.Contains(all, "runs no load balancer controller") {
					t.Errorf("no warning that the load balancer is not served:\n%s", all)
				}
				if cfg.NSXT.RouterPath != "" && !strings.Contains(all, "runs no route controller") {
					t.Errorf("no warning that routes are not managed:\n%s", all)
				}
				for _, s := range []string{"nsx-password-never-shown", "vmc-token-never-shown"} {
					if strings.Contains(all, s) || strings.Contains(fmt.Sprintf("%v %+v %#v", cfg, *cfg, *cfg), s) {
						t.Errorf("a secret of the nsxt section is shown")
					}
					if b, _ := json.Marshal(cfg); strings.Contains(string(b), s) {
						t.Errorf("a secret of the nsxt section is in the JSON of the config")
					}
				}
				if len(cfg.NSXT.Sections) > 0 {
					assertConverts(t, cfg)
				}
			})
		}
	}
}

// TestNSXTServes: which Services the reference's load balancer served,
// by their loadbalancer.vmware.io/class annotation.
func TestNSXTServes(t *testing.T) {
	n := NSXT{LoadBalancer: true, Classes: []string{"default", "public"}}
	for class, want := range map[string]bool{"": true, "default": true, "public": true, "private": false} {
		if got := n.Serves(class); got != want {
			t.Errorf("Serves(%q) = %v, want %v", class, got, want)
		}
	}
	if (NSXT{Classes: []string{"default"}}).Serves("") {
		t.Error("a refused load balancer serves nothing")
	}
}

// TestNSXTRefusals: the reference's validation of the load balancer
// sections, reason by reason; a refused config starts, with a warning.
func TestNSXTRefusals(t *testing.T) {
	const vc = "vcenter:\n  a:\n    server: a.example.com\n    user: u\n    password: p\n"
	full := "  size: SMALL\n  lbServiceId: s\n  tcpAppProfileName: t\n  udpAppProfileName: u\n"
	for _, tc := range []struct {
		name, lb, want string
	}{
		{"no service or gateway", "loadBalancer:\n  size: SMALL\n", "either load balancer service id or T1 gateway path required"},
		{"no tcp profile", "loadBalancer:\n  size: SMALL\n  lbServiceId: s\n", "TCP application profile"},
		{"no udp profile", "loadBalancer:\n  size: SMALL\n  lbServiceId: s\n  tcpAppProfileName: t\n", "UDP application profile"},
		{"bad size", "loadBalancer:\n  size: HUGE\n  lbServiceId: s\n  tcpAppProfileName: t\n  udpAppProfileName: u\n", "size is invalid"},
		{"no pool, no default class", "loadBalancer:\n" + full, "no default load balancer class defined"},
		{"default class without pool", "loadBalancer:\n" + full + "loadBalancerClass:\n  default:\n    tcpAppProfileName: x\n", "ipPoolName and ipPoolID is empty"},
		{"both pools", "loadBalancer:\n" + full + "  ipPoolName: a\n  ipPoolId: b\n", "either load balancer ipPoolName or ipPoolID can be set"},
		{"valid, pool from the default class", "loadBalancer:\n" + full + "loadBalancerClass:\n  default:\n    ipPoolName: p\n", ""},
		{"only a class: enabled, and refused", "loadBalancerClass:\n  public:\n    ipPoolName: p\n", "either load balancer service id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, warnings, err := Parse("c.yaml", []byte(vc+tc.lb), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(cfg.NSXT.LoadBalancerRefused, tc.want) || (tc.want == "") != cfg.NSXT.LoadBalancer {
				t.Fatalf("refused %q, load balancer %v; want refusal %q", cfg.NSXT.LoadBalancerRefused, cfg.NSXT.LoadBalancer, tc.want)
			}
			if len(warnings) != 1 || warnings[0].Field != "loadBalancer" && warnings[0].Field != "loadBalancerClass" {
				t.Errorf("warnings %v, want one on the load balancer sections", warnings)
			}
		})
	}
}

// The sections are listed in the order of the file's schema.
func TestNSXTSections(t *testing.T) {
	data, err := os.ReadFile("testdata/nsxt/every-section.conf")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Parse("every-section.conf", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"nsxt", "loadBalancer", "loadBalancerClass", "route"}; !slices.Equal(cfg.NSXT.Sections, want) {
		t.Errorf("sections %v, want %v", cfg.NSXT.Sections, want)
	}
}

// TestLenientNSXT: problems in the NSX-T sections, which the reference
// reads apart and starts without (testdata/nsxt: lenient-*, nsxt-typos.*,
// whose reference verdicts TestNSXTCorpus compares), are warnings that say
// so, never errors; a line that may hold a secret is still not shown.
func TestLenientNSXT(t *testing.T) {
	for _, tc := range []struct {
		file    string
		refused string // a part of the load balancer's refusal
		lenient int    // problems turned into warnings
	}{
		{"lenient-lb-tags-unescaped.conf", "in INI, quotes must be escaped", 0},
		{"lenient-unknown-keys.conf", "", 2},
		{"lenient-unknown-keys.yaml", "TCP application profile", 2},
		{"nsxt-typos.conf", "tags is not a JSON object", 5},
		{"nsxt-typos.yaml", "", 7},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata/nsxt", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			format := "yaml"
			if DetectFormat(data) == FormatINI {
				format = "ini"
			}
			cfg, warnings, err := Parse(tc.file, withVCenter(data, format), Options{})
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !strings.Contains(cfg.NSXT.LoadBalancerRefused, tc.refused) {
				t.Errorf("load balancer refused %q, want %q", cfg.NSXT.LoadBalancerRefused, tc.refused)
			}
			n := 0
			for _, w := range warnings {
				if strings.Contains(w.Message, "a warning, not an error: the reference CCM reads this section apart") {
					n++
					if !inNSXTSection(w.Field) {
						t.Errorf("lenient outside the NSX-T sections: %s", w.Error())
					}
				}
				if strings.Contains(w.Error(), "never-shown") {
					t.Errorf("a value that may be a secret is shown: %s", w.Error())
				}
			}
			if n != tc.lenient {
				t.Errorf("%d problems made warnings, want %d:\n%v", n, tc.lenient, warnings)
			}
		})
	}
}
