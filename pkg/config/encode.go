package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
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
	TokenLifetime      string `json:"tokenLifetime"`
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
	StaticTopology     *StaticTopology `json:"staticTopology,omitempty"`
	// SessionManagerTokenFile is written when not the default.
	SessionManagerTokenFile string `json:"sessionManagerTokenFile,omitempty"`
	SessionManagerAllowHTTP bool   `json:"sessionManagerAllowHTTP,omitempty"`
	// SessionManagerURL stays in the config when the session manager has
	// no token of its own: the token file (the Pod's service-account
	// token) goes only to a session manager the config names.
	SessionManagerURL string `json:"sessionManagerURL,omitempty"`
}

type yamlNodes struct {
	InternalNetworkSubnetCIDR        []string             `json:"internalNetworkSubnetCidr,omitempty"`
	ExternalNetworkSubnetCIDR        []string             `json:"externalNetworkSubnetCidr,omitempty"`
	ExcludeInternalNetworkSubnetCIDR []string             `json:"excludeInternalNetworkSubnetCidr,omitempty"`
	ExcludeExternalNetworkSubnetCIDR []string             `json:"excludeExternalNetworkSubnetCidr,omitempty"`
	InternalVMNetworkName            string               `json:"internalVmNetworkName,omitempty"`
	ExternalVMNetworkName            string               `json:"externalVmNetworkName,omitempty"`
	LookupOrder                      []LookupMethod       `json:"lookupOrder"`
	Deletion                         DeletionPolicy       `json:"deletion"`
	DeletionDelay                    string               `json:"deletionDelay,omitempty"`
	OutOfService                     *yamlOutOfService    `json:"outOfService,omitempty"`
	ServingCertificates              *ServingCertificates `json:"servingCertificates,omitempty"`
	AdoptUntainted                   bool                 `json:"adoptUntainted,omitempty"`
	Identity                         *yamlIdentity        `json:"identity,omitempty"`
}

type yamlIdentity struct {
	ApproveClientCertificates bool   `json:"approveClientCertificates"`
	KeyFingerprintKey         string `json:"keyFingerprintKey,omitempty"`
	KeyPublishTimeout         string `json:"keyPublishTimeout,omitempty"`
	NodeNameKey               string `json:"nodeNameKey,omitempty"`
}

type yamlOutOfService struct {
	Enabled       bool   `json:"enabled"`
	NotReadyFor   string `json:"notReadyFor"`
	PoweredOffFor string `json:"poweredOffFor"`
}

// DefaultConvertSecret is the Secret that inline credentials are moved to
// when EncodeOptions names none.
func DefaultConvertSecret() SecretRef {
	return SecretRef{Namespace: "kube-system", Name: "vsphere-credentials"}
}

// EncodeOptions says where the vCenters whose credentials were inline find
// them after Encode, which never writes a password into the config.
type EncodeOptions struct {
	// Secret receives them (DefaultConvertSecret when zero); the config
	// names it in global.secretName, or per vCenter when global names
	// another Secret.
	Secret SecretRef
	// SecretsDirectory, when set, receives them instead, as the config's
	// global.secretsDirectory.
	SecretsDirectory string
}

// InlineCredential is one vCenter's inline credentials (any mode), moved
// out of the config by Encode: the caller writes them to the Secret or
// directory of EncodeOptions, in the keys the reference CCM reads.
type InlineCredential struct {
	VCenter     string
	Server      string
	Credentials secret.Credentials
}

// Encode writes cfg as canonical YAML: every inherited value and default
// written out per vCenter, so the result reads the same without knowing the
// inheritance rules. Encode never writes a password: the vCenters whose
// credentials were inline (user and password in the config) reference the
// Secret or directory of opts instead, and moved lists their credentials for
// the caller to write there. Parsing the result gives back an equal Config,
// those credentials aside. notes lists what changed and what to do.
func Encode(cfg *Config, opts EncodeOptions) (out []byte, moved []InlineCredential, notes []string, err error) {
	if opts.Secret == (SecretRef{}) {
		opts.Secret = DefaultConvertSecret()
	}
	if opts.SecretsDirectory != "" && cfg.Global.SecretsDirectory != "" && opts.SecretsDirectory != cfg.Global.SecretsDirectory {
		return nil, nil, nil, fmt.Errorf("config: the config already reads the secrets directory %s; move the inline credentials to a Secret, or to that directory", cfg.Global.SecretsDirectory)
	}
	f := yamlFile{
		Global: yamlGlobal{
			SecretsDirectory:   cfg.Global.SecretsDirectory,
			ConnectTimeout:     cfg.Global.ConnectTimeout.String(),
			RequestTimeout:     cfg.Global.RequestTimeout.String(),
			LoginBackoff:       cfg.Global.LoginBackoff.String(),
			TagRefreshInterval: cfg.Global.TagRefreshInterval.String(),
			TokenLifetime:      cfg.Global.TokenLifetime.String(),
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
			AdoptUntainted:                   cfg.Nodes.AdoptUntainted,
		},
	}
	if d := cfg.Nodes.DeletionDelay; d > 0 {
		f.Nodes.DeletionDelay = d.String()
	}
	if o := cfg.Nodes.OutOfService; o != (OutOfService{NotReadyFor: DefaultOutOfServiceNotReadyFor, PoweredOffFor: DefaultOutOfServicePoweredOffFor}) {
		f.Nodes.OutOfService = &yamlOutOfService{Enabled: o.Enabled, NotReadyFor: o.NotReadyFor.String(), PoweredOffFor: o.PoweredOffFor.String()}
	}
	if sc := cfg.Nodes.ServingCertificates; !reflect.DeepEqual(sc, ServingCertificates{ClusterDomain: DefaultClusterDomain}) {
		if sc.ClusterDomain == DefaultClusterDomain {
			sc.ClusterDomain = "" // omitted: the default
		}
		f.Nodes.ServingCertificates = &sc
	}
	if id := cfg.Nodes.Identity; id != (Identity{KeyFingerprintKey: DefaultKeyFingerprintKey, KeyPublishTimeout: DefaultKeyPublishTimeout}) {
		y := &yamlIdentity{ApproveClientCertificates: id.ApproveClientCertificates, NodeNameKey: id.NodeNameKey}
		if id.KeyFingerprintKey != DefaultKeyFingerprintKey {
			y.KeyFingerprintKey = id.KeyFingerprintKey
		}
		if id.KeyPublishTimeout != DefaultKeyPublishTimeout {
			y.KeyPublishTimeout = id.KeyPublishTimeout.String()
		}
		f.Nodes.Identity = y
	}
	if !reflect.DeepEqual(cfg.Labels, Labels{OnDrift: DriftKeep}) {
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
		y.SessionManagerTokenFile = vc.Credentials.TokenFile
		y.SessionManagerAllowHTTP = vc.Credentials.AllowHTTP
		if s, ok := vc.Credentials.Inline.(secret.SharedSession); ok && !s.Token.IsSet() {
			y.SessionManagerURL = s.URL
			f.VCenter[vc.Name] = y
			notes = append(notes, fmt.Sprintf("vcenter %q: its session manager URL stays in the config: it has no token of its own, and the service-account token goes only to a session manager the config names", vc.Name))
			continue
		}
		f.VCenter[vc.Name] = y
		if vc.Credentials.Inline != nil {
			moved = append(moved, InlineCredential{VCenter: vc.Name, Server: vc.Server, Credentials: vc.Credentials.Inline})
		}
	}
	for _, m := range moved {
		y := f.VCenter[m.VCenter]
		vc, _ := cfg.VCenter(m.VCenter)
		switch {
		case opts.SecretsDirectory != "":
			f.Global.SecretsDirectory = opts.SecretsDirectory
			if vc.Credentials.Secret != nil || vc.Credentials.GlobalSecret != nil {
				notes = append(notes, fmt.Sprintf("vcenter %q: its Secret still takes precedence over the secrets directory its inline credentials moved to, as it did over them", m.VCenter))
			}
		case y.SecretName == "" && (f.Global.SecretName == "" || SecretRef{Namespace: f.Global.SecretNamespace, Name: f.Global.SecretName} == opts.Secret):
			f.Global.SecretName, f.Global.SecretNamespace = opts.Secret.Name, opts.Secret.Namespace
		case y.SecretName == "":
			// global names another Secret: this vCenter names its own,
			// which comes first; the other Secret came first before.
			y.SecretName, y.SecretNamespace = opts.Secret.Name, opts.Secret.Namespace
			f.VCenter[m.VCenter] = y
			notes = append(notes, fmt.Sprintf("vcenter %q: its credentials moved to Secret %s, named by the vCenter; the global Secret %s/%s, which came before the inline credentials, now comes after", m.VCenter, opts.Secret, f.Global.SecretNamespace, f.Global.SecretName))
		default:
			notes = append(notes, fmt.Sprintf("vcenter %q: its own Secret takes precedence; its inline credentials moved to Secret %s are a fallback no longer read: put them in its Secret if needed", m.VCenter, opts.Secret))
		}
	}
	if len(moved) > 0 {
		where := "Secret " + opts.Secret.String()
		if opts.SecretsDirectory != "" {
			where = "the secrets directory " + opts.SecretsDirectory
		}
		notes = append(notes, fmt.Sprintf("the inline credentials of %d vCenter(s) are not in the config: it reads them from %s", len(moved), where))
	}
	if len(cfg.NSXT.Sections) > 0 {
		// Read for the reference's NSX-T controllers, which this CCM does
		// not run: not carried over (docs/migration.md).
		notes = append(notes, fmt.Sprintf("the reference CCM's NSX-T sections (%s) are left out: this CCM runs no load balancer or route controller; run `migrate preflight` for what that means for your Services and Nodes", strings.Join(cfg.NSXT.Sections, ", ")))
	}
	out, err = yaml.Marshal(f)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	return out, moved, notes, nil
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
