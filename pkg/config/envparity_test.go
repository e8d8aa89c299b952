package config

import (
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type envCase struct {
	Name           string          `json:"name"`
	Format         string          `json:"format"`
	Config         string          `json:"config"`
	Env            []string        `json:"env"`
	Differences    []envDifference `json:"differences,omitempty"`
	Reference      string          `json:"reference"`
	ReferenceError string          `json:"referenceError,omitempty"`
	Meaning        *corpusConfig   `json:"meaning,omitempty"`
}

type envDifference struct {
	Diff string `json:"diff"`
	Why  string `json:"why"`
}

// TestEnvParity: every environment variable the reference's config reads
// (VSPHERE_*, VCENTER_<id>_*), in the cases of testdata/env/CASES.yaml, is
// read here as the reference's own loader read it (hack/refverdict -env)
// except for the differences each case lists with their reason: a
// difference not listed fails, and so does a listed one that no longer
// happens.
func TestEnvParity(t *testing.T) {
	data, err := os.ReadFile("testdata/env/CASES.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []envCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 5 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			file := "vsphere.yaml"
			if c.Format == "ini" {
				file = "vsphere.conf"
			}
			cfg, warnings, err := Parse(file, []byte(c.Config), Options{Env: c.Env})
			if c.Reference != "accept" {
				t.Fatalf("the reference rejects the case (%s): make it one it accepts", c.ReferenceError)
			}
			if err != nil {
				t.Fatalf("the reference accepts it; here: %v", err)
			}
			var ws []string
			for _, w := range warnings {
				ws = append(ws, w.Error())
			}
			got := sameMeaning(cfg, c.Meaning, "")
			var listed []string
			for _, d := range c.Differences {
				if d.Why == "" {
					t.Errorf("difference %q has no why", d.Diff)
				}
				listed = append(listed, d.Diff)
			}
			for _, d := range got {
				if !slices.Contains(listed, d) {
					t.Errorf("not listed in CASES.yaml: %s", d)
				}
			}
			for _, d := range listed {
				if !slices.Contains(got, d) {
					t.Errorf("listed in CASES.yaml, but no longer differs: %s", d)
				}
			}
			if t.Failed() {
				t.Logf("warnings:\n%s", strings.Join(ws, "\n"))
			}
		})
	}
}
