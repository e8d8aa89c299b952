package config

import (
	"os"
	"path/filepath"
	"testing"
)

func addSeeds(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		for _, file := range files {
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
