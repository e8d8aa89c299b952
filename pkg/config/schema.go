package config

import (
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// The raw* types mirror the file schema. Every leaf is a pointer (or nil
// slice) so that "absent" and "set to the zero value" stay distinguishable:
// a per-vCenter insecureFlag: false must override a global true.
//
// Tags: yaml is the YAML key; ini is the INI key ("-" = YAML only). The
// decoder is driven entirely by these tags, so adding a field here is all a
// new key needs on the reading side.

type rawConfig struct {
	Global  *rawGlobal             `yaml:"global" ini:"global"`
	VCenter map[string]*rawVCenter `yaml:"vcenter" ini:"virtualcenter"`
	Labels  *rawLabels             `yaml:"labels" ini:"labels"`
	Nodes   *rawNodes              `yaml:"nodes" ini:"nodes"`
	// Extension: zones from DRS host groups (stretched clusters).
	HostGroupZones []rawHostGroupZones `yaml:"hostGroupZones" ini:"-"`

	// The reference's NSX-T sections: read and reported, not acted on
	// (nsxt.go).
	NSXT              *rawNSXT                         `yaml:"nsxt" ini:"nsxt"`
	LoadBalancer      *rawLoadBalancer                 `yaml:"loadBalancer" ini:"loadbalancer"`
	LoadBalancerClass map[string]*rawLoadBalancerClass `yaml:"loadBalancerClass" ini:"loadbalancerclass"`
	Route             *rawRoute                        `yaml:"route" ini:"route"`
}

type rawHostGroupZones struct {
	VCenter          *string            `yaml:"vcenter" ini:"-"`
	Datacenter       *string            `yaml:"datacenter" ini:"-"`
	Cluster          *string            `yaml:"cluster" ini:"-"`
	HostGroups       map[string]*string `yaml:"hostGroups" ini:"-"`
	HostGroupPattern *string            `yaml:"hostGroupPattern" ini:"-"`
	Region           *string            `yaml:"region" ini:"-"`
}

// rawConnection holds the keys that may appear both in global and in a
// vCenter; a vCenter's value overrides the global one.
type rawConnection struct {
	Server             *string       `yaml:"server" ini:"server"`
	Port               *int          `yaml:"port" ini:"port"`
	User               *string       `yaml:"user" ini:"user"`
	Password           *secret.Value `yaml:"password" ini:"password"`
	InsecureFlag       *bool         `yaml:"insecureFlag" ini:"insecure-flag"`
	Datacenters        *[]string     `yaml:"datacenters" ini:"datacenters"`
	SOAPRoundtripCount *int          `yaml:"soapRoundtripCount" ini:"soap-roundtrip-count"`
	CAFile             *string       `yaml:"caFile" ini:"ca-file"`
	Thumbprint         *string       `yaml:"thumbprint" ini:"thumbprint"`
	SecretName         *string       `yaml:"secretName" ini:"secret-name"`
	SecretNamespace    *string       `yaml:"secretNamespace" ini:"secret-namespace"`
	IPFamily           *[]string     `yaml:"ipFamily" ini:"ip-family"`
	// Extensions: credential modes written out. The reference reads a PEM
	// certificate as user with its key as password, and the session
	// manager only from a Secret.
	Certificate             *string       `yaml:"certificate" ini:"certificate"`
	PrivateKey              *secret.Value `yaml:"privateKey" ini:"private-key"`
	SessionManagerURL       *string       `yaml:"sessionManagerURL" ini:"vc-session-manager-url"`
	SessionManagerToken     *secret.Value `yaml:"sessionManagerToken" ini:"vc-session-manager-token"`
	SessionManagerTokenFile *string       `yaml:"sessionManagerTokenFile" ini:"vc-session-manager-token-file"`
}

type rawGlobal struct {
	rawConnection `yaml:",inline"`

	SecretsDirectory *string `yaml:"secretsDirectory" ini:"secrets-directory"`
	// Vestigial keys of the reference; accepted and ignored with a warning.
	APIDisable *bool   `yaml:"apiDisable" ini:"api-disable"`
	APIBinding *string `yaml:"apiBinding" ini:"api-binding"`

	// Extensions.
	ConnectTimeout     *time.Duration `yaml:"connectTimeout" ini:"connect-timeout"`
	RequestTimeout     *time.Duration `yaml:"requestTimeout" ini:"request-timeout"`
	LoginBackoff       *time.Duration `yaml:"loginBackoff" ini:"login-backoff"`
	TagRefreshInterval *time.Duration `yaml:"tagRefreshInterval" ini:"tag-refresh-interval"`
	TokenLifetime      *time.Duration `yaml:"tokenLifetime" ini:"token-lifetime"`
}

type rawVCenter struct {
	rawConnection `yaml:",inline"`

	// Extension: static zone/region for sites without tagging rights.
	StaticTopology *rawStaticTopology `yaml:"staticTopology" ini:"-"`
	// Extension: a plain http session manager URL, allowed for this
	// vCenter only (never global).
	SessionManagerAllowHTTP *bool `yaml:"sessionManagerAllowHTTP" ini:"vc-session-manager-allow-http"`
}

type rawStaticTopology struct {
	Zone        *string                   `yaml:"zone" ini:"-"`
	Region      *string                   `yaml:"region" ini:"-"`
	Datacenters map[string]*rawZoneRegion `yaml:"datacenters" ini:"-"`
}

type rawZoneRegion struct {
	Zone   *string `yaml:"zone" ini:"-"`
	Region *string `yaml:"region" ini:"-"`
}

type rawLabels struct {
	Zone   *string `yaml:"zone" ini:"zone"`
	Region *string `yaml:"region" ini:"region"`
	// Extension: further tag categories copied to node labels.
	Additional []rawAdditionalLabel `yaml:"additional" ini:"-"`
	// Extension: resolve like vSphere CSI (host chain only).
	CSICompatible *bool `yaml:"csiCompatible" ini:"csi-compatible"`
	// Extension: keep or relabel on drift.
	OnDrift *string `yaml:"onDrift" ini:"on-drift"`
	// Extension: placement labels kept current.
	Placement *[]string `yaml:"placement" ini:"-"`
	// Extension: the tag category of the instance type.
	InstanceType *string `yaml:"instanceType" ini:"instance-type"`
	// Extension: the custom attribute of the instance type.
	InstanceTypeAttribute *string `yaml:"instanceTypeAttribute" ini:"-"`
}

type rawAdditionalLabel struct {
	Category  *string `yaml:"category" ini:"-"`
	Attribute *string `yaml:"attribute" ini:"-"`
	Label     *string `yaml:"label" ini:"-"`
}

type rawNodes struct {
	InternalNetworkSubnetCIDR        *[]string `yaml:"internalNetworkSubnetCidr" ini:"internal-network-subnet-cidr"`
	ExternalNetworkSubnetCIDR        *[]string `yaml:"externalNetworkSubnetCidr" ini:"external-network-subnet-cidr"`
	InternalVMNetworkName            *string   `yaml:"internalVmNetworkName" ini:"internal-vm-network-name"`
	ExternalVMNetworkName            *string   `yaml:"externalVmNetworkName" ini:"external-vm-network-name"`
	ExcludeInternalNetworkSubnetCIDR *[]string `yaml:"excludeInternalNetworkSubnetCidr" ini:"exclude-internal-network-subnet-cidr"`
	ExcludeExternalNetworkSubnetCIDR *[]string `yaml:"excludeExternalNetworkSubnetCidr" ini:"exclude-external-network-subnet-cidr"`
	// Extension: how a Node is matched to a VM when it has no providerID.
	LookupOrder *[]string `yaml:"lookupOrder" ini:"lookup-order"`
	// Extension: when a VM may be reported gone (onProof, never).
	Deletion *string `yaml:"deletion" ini:"deletion"`
	// Extension: how long a VM stays proven gone before it is reported gone.
	DeletionDelay *time.Duration `yaml:"deletionDelay" ini:"-"`
	// Extension: the out-of-service taint policy.
	OutOfService *rawOutOfService `yaml:"outOfService" ini:"-"`
	// Extension: kubelet serving certificate requests checked against vCenter.
	ServingCertificates *rawServingCertificates `yaml:"servingCertificates" ini:"-"`
	// Extension: Nodes that joined without the uninitialized taint.
	AdoptUntainted *bool `yaml:"adoptUntainted" ini:"-"`
	// Extension: kubelet client certificates bound to VMs by vCenter.
	Identity *rawIdentity `yaml:"identity" ini:"-"`
}

type rawIdentity struct {
	ApproveClientCertificates *bool          `yaml:"approveClientCertificates" ini:"-"`
	KeyFingerprintKey         *string        `yaml:"keyFingerprintKey" ini:"-"`
	KeyPublishTimeout         *time.Duration `yaml:"keyPublishTimeout" ini:"-"`
	NodeNameKey               *string        `yaml:"nodeNameKey" ini:"-"`
}

type rawServingCertificates struct {
	Approve               *bool     `yaml:"approve" ini:"-"`
	AllowedIPRanges       *[]string `yaml:"allowedIPRanges" ini:"-"`
	AllowedDNSDomains     *[]string `yaml:"allowedDNSDomains" ini:"-"`
	ServiceCIDRs          *[]string `yaml:"serviceCIDRs" ini:"-"`
	PodCIDRs              *[]string `yaml:"podCIDRs" ini:"-"`
	ControlPlaneEndpoints *[]string `yaml:"controlPlaneEndpoints" ini:"-"`
	ClusterDomain         *string   `yaml:"clusterDomain" ini:"-"`
}

type rawOutOfService struct {
	Enabled       *bool          `yaml:"enabled" ini:"-"`
	NotReadyFor   *time.Duration `yaml:"notReadyFor" ini:"-"`
	PoweredOffFor *time.Duration `yaml:"poweredOffFor" ini:"-"`
}
