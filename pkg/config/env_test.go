package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEnvOverrides(t *testing.T) {
	base := "vcenter:\n  a:\n    server: vc-a.example.com\n    secretName: creds\n    secretNamespace: kube-system\n"
	tests := []struct {
		name    string
		file    string
		env     []string
		check   func(t *testing.T, cfg *Config)
		wantErr string
	}{
		{
			name: "nodes and labels from the reference's variables",
			file: base + "nodes:\n  internalNetworkSubnetCidr: 192.168.0.0/16\n",
			env: []string{"VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR=10.20.0.0/16,10.30.0.0/16", "VSPHERE_NODES_EXTERNAL_VM_NETWORK_NAME=pg-public",
				"VSPHERE_LABEL_ZONE=k8s-zone", "VSPHERE_LABEL_REGION=k8s-region"},
			check: func(t *testing.T, cfg *Config) {
				n := cfg.Nodes
				if len(n.InternalSubnets) != 2 || n.InternalSubnets[0].String() != "10.20.0.0/16" || n.ExternalVMNetworkName != "pg-public" {
					t.Errorf("nodes %+v", n)
				}
				if cfg.Labels.Zone != "k8s-zone" || cfg.Labels.Region != "k8s-region" {
					t.Errorf("labels %+v", cfg.Labels)
				}
			},
		},
		{
			name: "VSPHERE_VCENTER_PORT is the global port, not a vCenter",
			file: base,
			env:  []string{"VSPHERE_VCENTER_PORT=8443"},
			check: func(t *testing.T, cfg *Config) {
				if len(cfg.VCenters) != 1 || cfg.VCenters[0].Port != 8443 {
					t.Errorf("got %+v", cfg.VCenters)
				}
			},
		},
		{
			name: "values containing = are kept whole",
			file: "vcenter:\n  a:\n    server: vc-a.example.com\n",
			env:  []string{"VSPHERE_USER=admin", "VSPHERE_PASSWORD=a=b==c"},
			check: func(t *testing.T, cfg *Config) {
				c := cfg.VCenters[0].Credentials
				if inlineUser(c) != "admin" || inlinePassword(c) != "a=b==c" {
					t.Errorf("user %q, password kept whole: %v", inlineUser(c), inlinePassword(c) == "a=b==c")
				}
			},
		},
		{
			name: "environment overrides the file",
			file: base + "    port: 443\nglobal:\n  port: 443\n",
			env:  []string{"VCENTER_1_PORT=9443", "VSPHERE_VCENTER_1=vc-a.example.com", "VSPHERE_DATACENTER=dc1,dc2"},
			check: func(t *testing.T, cfg *Config) {
				vc := cfg.VCenters[0]
				if vc.Name != "a" || vc.Port != 9443 {
					t.Errorf("per-vCenter variables should update vCenter a: %+v", cfg.VCenters)
				}
				if diff := cmp.Diff([]string{"dc1", "dc2"}, vc.Datacenters); diff != "" {
					t.Errorf("datacenters from VSPHERE_DATACENTER: %s", diff)
				}
			},
		},
		{
			name: "a vCenter declared only in the environment",
			file: "",
			env:  []string{"VSPHERE_VCENTER_X=vc-x.example.com", "VCENTER_X_USERNAME=u", "VCENTER_X_PASSWORD=p", "VCENTER_X_INSECURE=true"},
			check: func(t *testing.T, cfg *Config) {
				vc, ok := cfg.VCenter("vc-x.example.com")
				if !ok || !vc.InsecureFlag || inlineUser(vc.Credentials) != "u" {
					t.Errorf("got %+v", cfg.VCenters)
				}
			},
		},
		{
			name:    "a malformed value names the variable",
			file:    base,
			env:     []string{"VSPHERE_INSECURE=sometimes"},
			wantErr: `$VSPHERE_INSECURE: global.insecureFlag: "sometimes" is not a boolean`,
		},
		{
			name: "empty values are ignored",
			file: base,
			env:  []string{"VSPHERE_VCENTER_PORT=", "VSPHERE_USER="},
			check: func(t *testing.T, cfg *Config) {
				if cfg.VCenters[0].Port != 443 || cfg.VCenters[0].Credentials.Inline != nil {
					t.Errorf("got %+v", cfg.VCenters[0])
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := Parse("cfg.yaml", []byte(tt.file), Options{Env: tt.env})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg)
		})
	}
}

func TestOrphanVCenterVariableWarns(t *testing.T) {
	_, warnings, err := Parse("cfg.yaml", []byte("vcenter:\n  a:\n    server: vc\n    user: u\n    password: p\n"), Options{Env: []string{"VCENTER_7_USERNAME=x"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		if w.Pos.Env == "VCENTER_7_USERNAME" && strings.Contains(w.Message, "VSPHERE_VCENTER_7") {
			return
		}
	}
	t.Errorf("no warning naming VCENTER_7_USERNAME: %v", warnings)
}

// SKIP_NODE_DELETION counts when set at all, as the reference reads it.
func TestSkipNodeDeletionEnv(t *testing.T) {
	for env, want := range map[string]bool{"SKIP_NODE_DELETION=true": true, "SKIP_NODE_DELETION=false": true,
		"SKIP_NODE_DELETION=": true, "SKIP_NODE_DELETIONS=1": false, "": false} {
		cfg, _, err := Parse("c.yaml", []byte("vcenter:\n  a:\n    server: a.example\n    user: u\n    password: p\n"), Options{Env: []string{env}})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Nodes.SkipNodeDeletion != want {
			t.Errorf("%q: SkipNodeDeletion = %v, want %v", env, cfg.Nodes.SkipNodeDeletion, want)
		}
	}
}

// The reference's NSX-T variables are warned about, by name, never used,
// their values never shown.
func TestNSXTEnvWarns(t *testing.T) {
	base := "vcenter:\n  a:\n    server: vc-a.example.com\n    user: u\n    password: p\n"
	cfg, warnings, err := Parse("c.yaml", []byte(base), Options{Env: []string{"NSXT_PASSWORD=nsx-secret-value", "NSXT_MANAGER_HOST=nsx.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, w := range warnings {
		all = append(all, w.Error())
	}
	text := strings.Join(all, "\n")
	if !strings.Contains(text, "NSXT_PASSWORD") || !strings.Contains(text, "NSXT_MANAGER_HOST") || strings.Contains(text, "nsx-secret-value") {
		t.Errorf("warnings:\n%s", text)
	}
	if len(cfg.NSXT.Sections) != 0 || cfg.NSXT.Manager != "" {
		t.Errorf("NSX-T read from the environment: %+v", cfg.NSXT)
	}
}
