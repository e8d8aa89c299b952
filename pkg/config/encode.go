package config

import (
	"fmt"
	"net/netip"

	"sigs.k8s.io/yaml"
)

// The yaml* types are the canonical YAML written by Encode: every value
// resolved and explicit, per vCenter, in the schema Parse reads.

type yamlFile struct {
	Global  yamlGlobal             `json:"global"`
	VCenter map[string]yamlVCenter `json:"vcenter"`
	Labels  *Labels                `json:"labels,omitempty"`
	Nodes   yamlNodes              `json:"nodes"`
	// HostGroupZones is written as configured.
	HostGroupZones []HostGroupZones `json:"hostGroupZones,omitempty"`
}

type yamlGlobal struct {
	SecretName         string `json:"secretName,omitempty"`
	SecretNamespace    string `json:"secretNamespace,omitempty"`
	SecretsDirectory   string `json:"secretsDirectory,omitempty"`
	ConnectTimeout     string `json:"connectTimeout"`
	RequestTimeout     string `json:"requestTimeout"`
	LoginBackoff       string `json:"loginBackoff"`
	TagRefreshInterval string `json:"tagRefreshInterval"`
}

type yamlVCenter struct {
	Server             string          `json:"server"`
	Port               int             `json:"port"`
	Datacenters        []string        `json:"datacenters"`
	InsecureFlag       bool            `json:"insecureFlag"`
	CAFile             string          `json:"caFile,omitempty"`
	Thumbprint         string          `json:"thumbprint,omitempty"`
	SOAPRoundtripCount int             `json:"soapRoundtripCount"`
	IPFamily           []IPFamily      `json:"ipFamily"`
	SecretName         string          `json:"secretName,omitempty"`
	SecretNamespace    string          `json:"secretNamespace,omitempty"`
	User               string          `json:"user,omitempty"`
	StaticTopology     *StaticTopology `json:"staticTopology,omitempty"`
}

type yamlNodes struct {
	InternalNetworkSubnetCIDR        []string       `json:"internalNetworkSubnetCidr,omitempty"`
	ExternalNetworkSubnetCIDR        []string       `json:"externalNetworkSubnetCidr,omitempty"`
	ExcludeInternalNetworkSubnetCIDR []string       `json:"excludeInternalNetworkSubnetCidr,omitempty"`
	ExcludeExternalNetworkSubnetCIDR []string       `json:"excludeExternalNetworkSubnetCidr,omitempty"`
	InternalVMNetworkName            string         `json:"internalVmNetworkName,omitempty"`
	ExternalVMNetworkName            string         `json:"externalVmNetworkName,omitempty"`
	LookupOrder                      []LookupMethod `json:"lookupOrder"`
	Deletion                         DeletionPolicy `json:"deletion"`
}

// Encode writes cfg as canonical YAML: every inherited value and default
// written out per vCenter, so the result reads the same without knowing the
// inheritance rules. Parsing the result gives back an equal Config, except
// for inline passwords: Encode never writes a password. notes lists what was
// left out and what to do about it.
func Encode(cfg *Config) (out []byte, notes []string, err error) {
	f := yamlFile{
		Global: yamlGlobal{
			SecretsDirectory:   cfg.Global.SecretsDirectory,
			ConnectTimeout:     cfg.Global.ConnectTimeout.String(),
			RequestTimeout:     cfg.Global.RequestTimeout.String(),
			LoginBackoff:       cfg.Global.LoginBackoff.String(),
			TagRefreshInterval: cfg.Global.TagRefreshInterval.String(),
		},
		VCenter:        map[string]yamlVCenter{},
		HostGroupZones: cfg.HostGroupZones,
		Nodes: yamlNodes{
			InternalNetworkSubnetCIDR:        prefixStrings(cfg.Nodes.InternalSubnets),
			ExternalNetworkSubnetCIDR:        prefixStrings(cfg.Nodes.ExternalSubnets),
			ExcludeInternalNetworkSubnetCIDR: prefixStrings(cfg.Nodes.ExcludeInternalSubnets),
			ExcludeExternalNetworkSubnetCIDR: prefixStrings(cfg.Nodes.ExcludeExternalSubnets),
			InternalVMNetworkName:            cfg.Nodes.InternalVMNetworkName,
			ExternalVMNetworkName:            cfg.Nodes.ExternalVMNetworkName,
			LookupOrder:                      cfg.Nodes.LookupOrder,
			Deletion:                         cfg.Nodes.Deletion,
		},
	}
	if cfg.Labels.Zone != "" || cfg.Labels.Region != "" || len(cfg.Labels.Additional) > 0 {
		f.Labels = &cfg.Labels
	}
	for _, vc := range cfg.VCenters {
		y := yamlVCenter{
			Server:             vc.Server,
			Port:               vc.Port,
			Datacenters:        vc.Datacenters,
			InsecureFlag:       vc.InsecureFlag,
			CAFile:             vc.CAFile,
			Thumbprint:         vc.Thumbprint,
			SOAPRoundtripCount: vc.SOAPRoundtripCount,
			IPFamily:           vc.IPFamilies,
			User:               vc.Credentials.User,
		}
		if y.Datacenters == nil {
			y.Datacenters = []string{}
		}
		if s := vc.Credentials.Secret; s != nil {
			y.SecretName, y.SecretNamespace = s.Name, s.Namespace
		}
		if s := vc.Credentials.GlobalSecret; s != nil {
			f.Global.SecretName, f.Global.SecretNamespace = s.Name, s.Namespace
		}
		if !vc.StaticTopology.IsZero() {
			st := vc.StaticTopology
			y.StaticTopology = &st
		}
		if vc.Credentials.Password.IsSet() {
			notes = append(notes, fmt.Sprintf("vcenter %q: the inline password was not written; keep credentials in a Secret (secretName/secretNamespace) or global.secretsDirectory", vc.Name))
		}
		f.VCenter[vc.Name] = y
	}
	out, err = yaml.Marshal(f)
	if err != nil {
		return nil, nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	return out, notes, nil
}

func prefixStrings(ps []netip.Prefix) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
