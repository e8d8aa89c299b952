package config

import (
	"slices"
	"strings"
	"testing"
)

// TestReferenceReadings: what the reference CCM reads silently is read the
// same way here, with a warning that names it; what it reads differently on
// purpose is warned about.
func TestReferenceReadings(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		check    func(t *testing.T, cfg *Config)
		warning  string // a warning must contain it
	}{
		{
			name: "secret-name without namespace next to inline credentials",
			in:   "[Global]\nsecret-name = vsphere-creds\nuser = u\npassword = p\n[VirtualCenter \"vc.example.com\"]\n",
			check: func(t *testing.T, cfg *Config) {
				c := cfg.VCenters[0].Credentials
				if c.GlobalSecret != nil || inlineUser(c) != "u" {
					t.Errorf("credentials %+v, want inline only", c.Sources())
				}
			},
			warning: `secretName "vsphere-creds" has no namespace, so the Secret is not used`,
		},
		{
			name: "trailing separator in ip-family",
			in:   "[Global]\nuser = u\npassword = p\nip-family = \"ipv4, \"\n[VirtualCenter \"vc.example.com\"]\n",
			check: func(t *testing.T, cfg *Config) {
				if got := cfg.VCenters[0].IPFamilies; !slices.Equal(got, []IPFamily{IPv4}) {
					t.Errorf("ip families %v", got)
				}
			},
			warning: "empty element in the comma-separated list ignored",
		},
		{
			name: "ca-file in YAML, as the reference's chart writes it",
			in:   "global:\n  secretName: s\n  secretNamespace: kube-system\nvcenter:\n  a:\n    server: vc.example.com\n    ca-file: /etc/cloud/ca.pem\n    insecureFlag: true\n",
			check: func(t *testing.T, cfg *Config) {
				if cfg.VCenters[0].CAFile != "" {
					t.Errorf("caFile %q, want it ignored as the reference does", cfg.VCenters[0].CAFile)
				}
			},
			warning: `"ca-file" is the INI spelling of caFile and is ignored in YAML`,
		},
		{
			name: "in-tree and CSI keys in [Global]",
			in:   "[Global]\nuser = u\npassword = p\nworking-dir = /dc/vm/k8s\nvm-uuid = 4211\ncluster-id = c1\nservice-account = cloud-controller-manager\n[VirtualCenter \"vc.example.com\"]\n",
			check: func(t *testing.T, cfg *Config) {
				if len(cfg.VCenters) != 1 {
					t.Errorf("vCenters %v", cfg.VCenters)
				}
			},
			warning: `key "working-dir" belongs to the in-tree vSphere provider and has no effect here`,
		},
		{
			name: "insecure-flag false under a global true",
			in:   "[Global]\nuser = u\npassword = p\ninsecure-flag = true\n[VirtualCenter \"vc.example.com\"]\ninsecure-flag = false\n",
			check: func(t *testing.T, cfg *Config) {
				if cfg.VCenters[0].InsecureFlag {
					t.Error("insecure; this CCM reads an explicit false as false")
				}
			},
			warning: "the reference CCM did not (it inherits the global true)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, warnings, err := Parse("vsphere.conf", []byte(tc.in), Options{})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg)
			var all []string
			for _, w := range warnings {
				all = append(all, w.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.warning) {
				t.Errorf("no warning %q in:\n%s", tc.warning, strings.Join(all, "\n"))
			}
		})
	}
}
