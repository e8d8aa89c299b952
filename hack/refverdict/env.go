package main

import (
	"os"
	"strings"

	cpiconfig "k8s.io/cloud-provider-vsphere/pkg/cloudprovider/vsphere/config"
	"sigs.k8s.io/yaml"
)

// envCase is one environment of pkg/config/testdata/env/CASES.yaml: a
// config file and the variables set when the reference reads it. Name,
// Format, Config, Env and Differences are hand-written; the rest is the
// reference's reading (ReadCPIConfig with exactly these variables set).
type envCase struct {
	Name   string   `json:"name"`
	Format string   `json:"format"`
	Config string   `json:"config"`
	Env    []string `json:"env"`
	// Differences are this CCM's deliberate departures for the case, each
	// as TestEnvParity prints it, with why (hand-written).
	Differences    []difference `json:"differences,omitempty"`
	Reference      string       `json:"reference"`
	ReferenceError string       `json:"referenceError,omitempty"`
	Meaning        *meaning     `json:"meaning,omitempty"`
}

type difference struct {
	Diff string `json:"diff"`
	Why  string `json:"why"`
}

// envCases reads every case with the reference's loader, its environment
// set (and every other VSPHERE_ and VCENTER_ variable unset), and writes
// the readings back.
func envCases(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		fail(err)
	}
	head, _, _ := strings.Cut(string(b), "\n- ")
	var cases []envCase
	if err := yaml.UnmarshalStrict(b, &cases); err != nil {
		fail(err)
	}
	for i := range cases {
		c := &cases[i]
		clearEnv()
		for _, kv := range c.Env {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
		c.Reference, c.ReferenceError, c.Meaning = "", "", nil
		cfg, err := cpiconfig.ReadCPIConfig([]byte(c.Config))
		if err != nil {
			c.Reference, c.ReferenceError = "reject", err.Error()
		} else {
			c.Reference, c.Meaning = "accept", read(cfg)
		}
	}
	clearEnv()
	out, err := yaml.Marshal(cases)
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(path, append([]byte(head+"\n"), out...), 0o644); err != nil {
		fail(err)
	}
}

func clearEnv() {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "VSPHERE_") || strings.HasPrefix(k, "VCENTER_") || strings.HasPrefix(k, "NSXT_") {
			os.Unsetenv(k)
		}
	}
}
