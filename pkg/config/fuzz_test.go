package config

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/must"
)

func addSeeds(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		for _, file := range must.Glob(f, p) {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
}

// fuzzParse checks the invariants of Parse on any input: no panic; an
// invalid config yields diagnostics; a valid one survives Encode and
// re-parsing unchanged.
func fuzzParse(t *testing.T, data []byte) {
	cfg, _, err := Parse("fuzz", data, Options{})
	if err != nil {
		errs, ok := AsErrors(err)
		if !ok || len(errs) == 0 {
			t.Fatalf("error without diagnostics: %v", err)
		}
		return
	}
	if len(cfg.VCenters) == 0 {
		t.Fatal("valid config without vCenters")
	}
	assertRoundTrip(t, cfg)
}

func FuzzParseYAML(f *testing.F) {
	addSeeds(f, "testdata/*/*.yaml", "../../config-examples/*.yaml")
	f.Add([]byte("vcenter: {a: {server: x, user: u, password: p}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if DetectFormat(data) != FormatYAML {
			return
		}
		fuzzParse(t, data)
	})
}

func FuzzParseINI(f *testing.F) {
	addSeeds(f, "testdata/*/*.conf", "../../config-examples/*.ini")
	f.Add([]byte("[Global]\nuser = u\npassword = \"p\\\"\"\n[VirtualCenter \"x\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if DetectFormat(data) != FormatINI {
			return
		}
		fuzzParse(t, data)
	})
}

// echoSentinel stands for a password; it must never appear in any
// diagnostic, whatever surrounds it on its line.
const echoSentinel = "Zq9xQw7vKj3h"

// FuzzNoSecretEcho puts a secret on a line of each key that holds one
// (password, privateKey, sessionManagerToken) with fuzzed text before and
// after it (well-formed or not, YAML or INI) and checks that no diagnostic
// contains any part of it.
func FuzzNoSecretEcho(f *testing.F) {
	for _, s := range [][2]string{
		{` = "`, `"`}, {`" = "`, `"`}, {` = "`, ``}, {` "`, `"`}, {` = `, `\q`}, {``, ` = x`}, {` = `, ` "junk`},
		{`: "`, `"`}, {`: [`, `]`}, {`: {`, `}`}, {`: `, `: x`}, {`: !!int `, ``}, {`: "`, ``}, {`: '`, ``}, {`: `, "\t"},
		{`: "-----BEGIN RSA PRIVATE KEY-----`, `-----END RSA PRIVATE KEY-----"`},
		{` = "-----BEGIN PRIVATE KEY-----\n`, `\n-----END PRIVATE KEY-----\n"`},
	} {
		f.Add(false, s[0], s[1])
		f.Add(true, s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ini bool, before, after string) {
		if strings.ContainsAny(before+after, "\n\r") {
			return // the secret must stay on its own line
		}
		for _, key := range [][2]string{{"password", "password"}, {"privateKey", "private-key"}, {"sessionManagerToken", "vc-session-manager-token"}} {
			var doc string
			if ini {
				doc = "[Global]\nuser = u\ninsecure-flag = true\n" + key[1] + before + echoSentinel + after + "\n[VirtualCenter \"vc.example.com\"]\n"
			} else {
				doc = "global:\n  user: u\n  insecureFlag: true\n  " + key[0] + before + echoSentinel + after + "\nvcenter:\n  a:\n    server: vc.example.com\n"
			}
			_, warnings, err := Parse("fuzz", []byte(doc), Options{})
			var text strings.Builder
			for _, w := range warnings {
				fmt.Fprintf(&text, "%v\n", w)
			}
			if err != nil {
				fmt.Fprintf(&text, "%v\n", err)
			}
			for i := 0; i+4 <= len(echoSentinel); i++ {
				if part := echoSentinel[i : i+4]; strings.Contains(text.String(), part) {
					t.Fatalf("diagnostics contain %q of the %s:\n%s", part, key[0], text.String())
				}
			}
		}
	})
}
