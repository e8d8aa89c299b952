// Command refverdict reads every cloud-config of the migration corpus with
// the reference CCM's own loader (k8s.io/cloud-provider-vsphere's
// ReadCPIConfig, as its binary calls it at start, validation included) and
// writes the reference's verdict and reading of each to MANIFEST.yaml.
// The origins are kept from the existing manifest.
//
//	cd hack/refverdict && go run . ../../pkg/config/testdata/migration
//	cd hack/refverdict && go run . -complete ../../pkg/config/testdata/nsxt
//	cd hack/refverdict && go run . -env ../../pkg/config/testdata/env/CASES.yaml
//
// With -complete, each file is read with one vCenter appended (withVCenter):
// the NSX-T readers' own test configs are fragments.
//
// It is a module of its own, so the reference's dependencies never enter
// the CCM's.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	cpiconfig "k8s.io/cloud-provider-vsphere/pkg/cloudprovider/vsphere/config"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

type entry struct {
	File           string `json:"file"`
	Origin         string `json:"origin"`
	Format         string `json:"format"`
	Reference      string `json:"reference"`
	ReferenceError string `json:"referenceError,omitempty"`
	// Here and Why (hand-written) record a deliberate divergence: a config
	// the reference accepts that this CCM rejects, and why.
	Here    string   `json:"here,omitempty"`
	Why     string   `json:"why,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	Meaning *meaning `json:"meaning,omitempty"`
	// Network is the reading of the reference's NSX-T load balancer,
	// route and NSX-T readers (nsxt.go).
	Network *network `json:"network,omitempty"`
}

type meaning struct {
	SecretsDirectory string            `json:"secretsDirectory,omitempty"`
	VCenters         []vcenter         `json:"vcenters,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	Nodes            map[string]string `json:"nodes,omitempty"`
}

type vcenter struct {
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

func main() {
	args := os.Args[1:]
	if len(args) == 2 && args[0] == "-env" {
		envCases(args[1])
		return
	}
	complete := len(args) == 2 && args[0] == "-complete"
	if complete {
		args = args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: refverdict [-complete] DIR")
		os.Exit(2)
	}
	// The reference logs its reading; only the verdicts matter here.
	klog.LogToStderr(false)
	klog.SetOutput(nopWriter{})
	// Its environment overrides (VSPHERE_*, VCENTER_*) must not apply.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "VSPHERE_") || strings.HasPrefix(k, "VCENTER_") {
			os.Unsetenv(k)
		}
	}
	dir := args[0]
	manifest := filepath.Join(dir, "MANIFEST.yaml")
	origins := map[string]entry{}
	if b, err := os.ReadFile(manifest); err == nil {
		var old []entry
		if err := yaml.Unmarshal(b, &old); err != nil {
			fail(err)
		}
		for _, e := range old {
			origins[e.File] = e
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		fail(err)
	}
	sort.Strings(files)
	var out []entry
	for _, f := range files {
		name := filepath.Base(f)
		if name == "MANIFEST.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		old := origins[name]
		e := entry{File: name, Origin: old.Origin, Here: old.Here, Why: old.Why, Notes: old.Notes, Format: "yaml"}
		if strings.HasSuffix(name, ".conf") || strings.HasSuffix(name, ".ini") {
			e.Format = "ini"
		}
		if complete {
			b = withVCenter(b, e.Format)
		}
		e.Network = readNetwork(b)
		cfg, err := cpiconfig.ReadCPIConfig(b)
		if err != nil {
			e.Reference, e.ReferenceError = "reject", err.Error()
		} else {
			e.Reference, e.Meaning = "accept", read(cfg)
		}
		out = append(out, e)
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		fail(err)
	}
	head := "# The migration corpus: each file as its origin has it, with the reference CCM's\n" +
		"# verdict and reading (hack/refverdict, k8s.io/cloud-provider-vsphere " + refVersion + ").\n" +
		"# Edit only origin, here, why and notes; the rest is generated.\n"
	if err := os.WriteFile(manifest, append([]byte(head), b...), 0o644); err != nil {
		fail(err)
	}
}

const refVersion = "v1.36.0"

func read(cfg *cpiconfig.CPIConfig) *meaning {
	m := &meaning{SecretsDirectory: cfg.Global.SecretsDirectory,
		Labels: nonEmpty(map[string]string{"zone": cfg.Labels.Zone, "region": cfg.Labels.Region}),
		Nodes: nonEmpty(map[string]string{
			"internalNetworkSubnetCidr":        cfg.Nodes.InternalNetworkSubnetCIDR,
			"externalNetworkSubnetCidr":        cfg.Nodes.ExternalNetworkSubnetCIDR,
			"internalVmNetworkName":            cfg.Nodes.InternalVMNetworkName,
			"externalVmNetworkName":            cfg.Nodes.ExternalVMNetworkName,
			"excludeInternalNetworkSubnetCidr": cfg.Nodes.ExcludeInternalNetworkSubnetCIDR,
			"excludeExternalNetworkSubnetCidr": cfg.Nodes.ExcludeExternalNetworkSubnetCIDR,
		})}
	names := make([]string, 0, len(cfg.VirtualCenter))
	for n := range cfg.VirtualCenter {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		vc := cfg.VirtualCenter[n]
		v := vcenter{Name: n, Server: vc.VCenterIP, Port: vc.VCenterPort, Insecure: vc.InsecureFlag,
			CAFile: vc.CAFile, Thumbprint: vc.Thumbprint, User: vc.User, PasswordSet: vc.Password != "",
			IPFamily: vc.IPFamilyPriority, RoundTripCount: int(vc.RoundTripperCount)}
		if vc.SecretName != "" && vc.SecretNamespace != "" {
			v.SecretName, v.SecretNamespace = vc.SecretName, vc.SecretNamespace
		}
		for _, dc := range strings.Split(vc.Datacenters, ",") {
			if dc = strings.TrimSpace(dc); dc != "" {
				v.Datacenters = append(v.Datacenters, dc)
			}
		}
		if _, err := strconv.Atoi(v.Port); err != nil && v.Port != "" {
			v.Port = "invalid:" + v.Port
		}
		m.VCenters = append(m.VCenters, v)
	}
	return m
}

func nonEmpty(m map[string]string) map[string]string {
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "refverdict:", err)
	os.Exit(1)
}
