package config

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// Format is the syntax of a cloud-config file.
type Format int

const (
	// FormatYAML is the primary format (the reference CCM's YAML schema).
	FormatYAML Format = iota
	// FormatINI is the legacy gcfg-style vsphere.conf.
	FormatINI
)

func (f Format) String() string {
	if f == FormatINI {
		return "INI"
	}
	return "YAML"
}

// Defaults. They are applied in exactly one place, build.go.
const (
	DefaultPort               = 443
	DefaultSOAPRoundtripCount = 3
	DefaultConnectTimeout     = 30 * time.Second
	DefaultRequestTimeout     = 60 * time.Second
	DefaultLoginBackoff       = 3 * time.Minute
	DefaultTagRefreshInterval = 5 * time.Minute
	// DefaultTokenLifetime is the STS token lifetime asked for in
	// certificate mode; MaxTokenLifetime is vCenter SSO's default maximum
	// holder-of-key token lifetime (30 days).
	DefaultTokenLifetime = 24 * time.Hour
	MaxTokenLifetime     = 30 * 24 * time.Hour
	// DefaultOutOfServiceNotReadyFor and DefaultOutOfServicePoweredOffFor
	// are nodes.outOfService's grace periods.
	DefaultOutOfServiceNotReadyFor   = 60 * time.Second
	DefaultOutOfServicePoweredOffFor = 30 * time.Second
)

// DefaultIPFamilies is the ipFamily default: IPv4 only.
var DefaultIPFamilies = []IPFamily{IPv4}

// DefaultLookupOrder is the nodes.lookupOrder default.
var DefaultLookupOrder = []LookupMethod{LookupUUID, LookupVMName}

// Config is the validated cloud-config. Treat it as immutable once returned
// by Parse or Load.
type Config struct {
	// Global holds settings that are not per vCenter.
	Global Global
	// VCenters lists every vCenter, sorted by Name. Never empty.
	VCenters []VCenter
	// Labels names the tag categories that become node labels.
	Labels Labels
	// Nodes holds the node address selection rules and the VM lookup order.
	Nodes Nodes
	// HostGroupZones maps clusters' DRS host groups to zones; the first
	// entry matching a VM's cluster applies.
	HostGroupZones []HostGroupZones
	// NSXT is what the file asks of the reference CCM's NSX-T load
	// balancer and route controllers, which this CCM does not run.
	NSXT NSXT
}

// VCenter returns the vCenter with the given name, or false.
func (c *Config) VCenter(name string) (VCenter, bool) {
	for _, vc := range c.VCenters {
		if vc.Name == name {
			return vc, true
		}
	}
	return VCenter{}, false
}

// Global holds process-wide settings.
type Global struct {
	// SecretsDirectory is a directory of files named like Secret keys
	// (global.secretsDirectory). Empty: not used.
	SecretsDirectory string `json:"secretsDirectory,omitempty"`
	// ConnectTimeout bounds the first connection to each vCenter (default 30s).
	ConnectTimeout time.Duration `json:"connectTimeout"`
	// RequestTimeout bounds every single vSphere request (default 60s).
	RequestTimeout time.Duration `json:"requestTimeout"`
	// LoginBackoff is the minimum wait after a rejected login before the same
	// credentials are tried again (default and minimum 3m: vCenter SSO locks an
	// account after 5 failures in 180 s; we cause at most one per window).
	LoginBackoff time.Duration `json:"loginBackoff" validate:"min=180000000000"`
	// TagRefreshInterval is how often tag categories and tags are re-read
	// (default 5m, minimum 10s).
	TagRefreshInterval time.Duration `json:"tagRefreshInterval" validate:"min=10000000000"`
	// TokenLifetime is the lifetime asked of vCenter's STS for the token of
	// a certificate login (default 24h, from 10s to 30 days, vCenter SSO's
	// default maximum; STS may grant less). The vAPI session opened with a
	// token ends with it: the session is renewed at three quarters of the
	// granted lifetime, and the SOAP session (and with it the inventory)
	// is kept unless vCenter ends it too.
	TokenLifetime time.Duration `json:"tokenLifetime" validate:"min=10000000000,max=2592000000000000"`
}

// VCenter is one vCenter with every inherited value resolved.
type VCenter struct {
	// Name is the key under vcenter (YAML) or the [VirtualCenter "name"] section name.
	Name string `json:"name"`
	// Server is the host name or IP address of the vCenter (no scheme, no port).
	Server string `json:"server" validate:"required,vchost"`
	// Port is the HTTPS port (default 443).
	Port int `json:"port" validate:"min=1,max=65535"`
	// Datacenters limits the search to these datacenters. Empty: every datacenter.
	Datacenters []string `json:"datacenters" validate:"dive,required"`
	// InsecureFlag disables TLS verification. Off unless set explicitly.
	InsecureFlag bool `json:"insecureFlag"`
	// CAFile is a PEM bundle used to verify the vCenter certificate.
	CAFile string `json:"caFile"`
	// Thumbprint pins the vCenter certificate (SHA-1 or SHA-256, colon-separated hex).
	Thumbprint string `json:"thumbprint" validate:"omitempty,thumbprint"`
	// SOAPRoundtripCount is the number of attempts per SOAP call (default 3).
	SOAPRoundtripCount int `json:"soapRoundtripCount" validate:"min=1,max=10"`
	// IPFamilies is the ordered list of address families reported for nodes (default [ipv4]).
	IPFamilies []IPFamily `json:"ipFamily" validate:"min=1,unique,dive,oneof=ipv4 ipv6"`
	// Credentials says where the username and password come from.
	Credentials Credentials `json:"credentials"`
	// StaticTopology optionally assigns zone/region without tags.
	StaticTopology StaticTopology `json:"staticTopology"`
}

// Address returns host:port, with brackets around IPv6 literals.
func (vc VCenter) Address() string {
	return netJoinHostPort(vc.Server, vc.Port)
}

// SecretRef names a Kubernetes Secret.
type SecretRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (r SecretRef) String() string { return r.Namespace + "/" + r.Name }

// DefaultSessionManagerTokenFile is the bearer token sent to a session
// manager that has no token of its own: the Pod's service-account token, as
// in the reference CCM.
const DefaultSessionManagerTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// Credentials lists every configured source of a vCenter's credentials. The
// credential manager uses them in this order of precedence: Secret,
// GlobalSecret, SecretsDirectory, Inline.
type Credentials struct {
	// Secret is the vCenter's own Secret (vcenter.<name>.secretName).
	Secret *SecretRef `json:"secret,omitempty"`
	// GlobalSecret is global.secretName/secretNamespace.
	GlobalSecret *SecretRef `json:"globalSecret,omitempty"`
	// SecretsDirectory is global.secretsDirectory.
	SecretsDirectory string `json:"secretsDirectory,omitempty"`
	// Inline is what the config itself holds (vCenter values, else global):
	// a secret.Password (user and password), a secret.Certificate (a PEM
	// certificate as user with its key as password, or certificate and
	// privateKey) or a secret.SharedSession (sessionManagerURL); nil when
	// the config holds none.
	Inline secret.Credentials `json:"-"`
	// TokenFile is the bearer token file of a session manager that has no
	// token (sessionManagerTokenFile); empty means
	// DefaultSessionManagerTokenFile. It is sent only to a session manager
	// named in the config itself, never to one a Secret names.
	TokenFile string `json:"sessionManagerTokenFile,omitempty"`
	// AllowHTTP (vcenter.<name>.sessionManagerAllowHTTP) allows a plain
	// http session manager URL for this vCenter, from any source; without
	// it such a URL is refused (the bearer token and the clone ticket
	// would travel in clear).
	AllowHTTP bool `json:"sessionManagerAllowHTTP,omitempty"`
}

// InlineMode is the mode of the inline credentials, "" when none.
func (c Credentials) InlineMode() secret.Mode {
	if c.Inline == nil {
		return ""
	}
	return c.Inline.Mode()
}

// Sources describes the credential sources in precedence order, without
// revealing any secret, for example
// ["Secret kube-system/vc-a", "inline password of admin@vsphere.local"].
func (c Credentials) Sources() []string {
	var out []string
	if c.Secret != nil {
		out = append(out, "Secret "+c.Secret.String())
	}
	if c.GlobalSecret != nil {
		out = append(out, "Secret "+c.GlobalSecret.String()+" (global)")
	}
	if c.SecretsDirectory != "" {
		out = append(out, "secrets directory "+c.SecretsDirectory)
	}
	if c.Inline != nil {
		out = append(out, DescribeCredentials("inline", c.Inline))
	}
	return out
}

// DescribeCredentials says what creds are, without anything secret:
// "<where> password of admin@vsphere.local", "<where> certificate CN=...",
// "<where> shared session from https://...".
func DescribeCredentials(where string, creds secret.Credentials) string {
	switch c := creds.(type) {
	case secret.Password:
		return where + " password of " + c.Username
	case secret.Certificate:
		return where + " " + c.Identity()
	case secret.SharedSession:
		return where + " shared session from " + secret.RedactURL(c.URL)
	}
	return where
}

// StaticTopology is a zone/region written in the config instead of tags.
// A datacenter entry overrides the vCenter-wide values.
type StaticTopology struct {
	Zone        string                `json:"zone,omitempty" validate:"omitempty,labelvalue"`
	Region      string                `json:"region,omitempty" validate:"omitempty,labelvalue"`
	Datacenters map[string]ZoneRegion `json:"datacenters,omitempty" validate:"dive,keys,required,endkeys"`
}

// IsZero reports whether no static topology is configured.
func (s StaticTopology) IsZero() bool {
	return s.Zone == "" && s.Region == "" && len(s.Datacenters) == 0
}

// ZoneRegion is a static zone and region.
type ZoneRegion struct {
	Zone   string `json:"zone,omitempty" validate:"omitempty,labelvalue"`
	Region string `json:"region,omitempty" validate:"omitempty,labelvalue"`
}

// IPFamily is an address family: ipv4 or ipv6.
type IPFamily string

// The IP families.
const (
	IPv4 IPFamily = "ipv4"
	IPv6 IPFamily = "ipv6"
)

// Labels names the vSphere tag categories whose tags become node labels.
type Labels struct {
	// Zone is the tag category for topology.kubernetes.io/zone. Empty: no zone from tags.
	Zone string `json:"zone,omitempty"`
	// Region is the tag category for topology.kubernetes.io/region. Empty: no region from tags.
	Region string `json:"region,omitempty"`
	// Additional maps further tag categories to node label keys.
	Additional []AdditionalLabel `json:"additional,omitempty" validate:"dive"`
	// Placement lists the placement labels set on Nodes and kept current
	// (host, cluster, hostGroup, datacenter, vcenter); empty: none beyond
	// the vCenter and datacenter labels set at initialization.
	Placement []PlacementLabel `json:"placement,omitempty" validate:"unique,dive,oneof=host cluster hostGroup datacenter vcenter"`
	// InstanceType is the tag category whose tag gives a Node's instance
	// type (node.kubernetes.io/instance-type), nearest the VM first. Empty,
	// or no such tag: the generated vsphere-vm.cpu-N.mem-Mgb.os-X.
	InstanceType string `json:"instanceType,omitempty"`
	// InstanceTypeAttribute is the VM custom attribute whose value gives
	// the instance type when no tag of InstanceType does.
	InstanceTypeAttribute string `json:"instanceTypeAttribute,omitempty"`
	// CSICompatible resolves zone and region exactly as vSphere CSI does:
	// tags on the host chain only (host, cluster, host folders, datacenter
	// and its folders), never the VM or its folders; staticTopology and
	// hostGroupZones are then not allowed.
	CSICompatible bool `json:"csiCompatible,omitempty"`
	// OnDrift says what happens when the zone or region of an initialized
	// Node's VM changes (a vMotion, an HA restart, a tag or group change):
	// keep (default: a Warning event and a gauge, labels unchanged) or
	// relabel (the labels follow the VM; volumes bound to the old zone
	// no longer match the Node).
	// Or taint: the labels are kept and the Node gets a NoSchedule taint
	// (vsphere.vsphere-ccm.io/zone-moved) until an operator acts.
	OnDrift DriftPolicy `json:"onDrift,omitempty" validate:"omitempty,oneof=keep relabel taint"`
}

// PlacementLabel is one of the placement labels (labels.placement).
type PlacementLabel string

// The placement labels.
const (
	PlacementHost       PlacementLabel = "host"
	PlacementCluster    PlacementLabel = "cluster"
	PlacementHostGroup  PlacementLabel = "hostGroup"
	PlacementDatacenter PlacementLabel = "datacenter"
	PlacementVCenter    PlacementLabel = "vcenter"
)

// AdditionalLabel copies the tag of Category (on the nearest ancestor), or
// the value of the VM's custom attribute Attribute, to the node label
// Label; exactly one of Category and Attribute is set.
type AdditionalLabel struct {
	Category  string `json:"category,omitempty"`
	Attribute string `json:"attribute,omitempty"`
	Label     string `json:"label" validate:"required,labelkey"`
}

// DriftPolicy is labels.onDrift.
type DriftPolicy string

// The drift policies.
const (
	DriftKeep    DriftPolicy = "keep"
	DriftRelabel DriftPolicy = "relabel"
	// DriftTaint keeps the labels and taints the Node NoSchedule until an
	// operator removes the taint (or the VM moves back).
	DriftTaint DriftPolicy = "taint"
)

// LookupMethod is one way of matching a Node without a providerID to a VM.
type LookupMethod string

// The lookup methods.
const (
	// LookupUUID matches the Node's systemUUID to the VM's BIOS UUID (both byte orders).
	LookupUUID LookupMethod = "uuid"
	// LookupVMName matches the Node name to the VM name.
	LookupVMName LookupMethod = "vmName"
	// LookupGuestHostname matches the Node name to the guest host name reported by VMware Tools.
	LookupGuestHostname LookupMethod = "guestHostname"
)

// DeletionPolicy says when the CCM may report a Node's VM as gone (which
// makes Kubernetes delete the Node).
type DeletionPolicy string

// The deletion policies.
const (
	// DeletionOnProof reports a VM gone only when its BIOS UUID (providerID or
	// systemUUID) is absent from every vCenter in scope, each fully synced and
	// connected. A miss by VM name or guest host name is never proof.
	DeletionOnProof DeletionPolicy = "onProof"
	// DeletionNever never reports a VM gone: Nodes are only deleted by people.
	DeletionNever DeletionPolicy = "never"
)

// Nodes holds the rules that pick node addresses among the guest NICs, and
// how Nodes are matched to VMs.
type Nodes struct {
	InternalSubnets        []netip.Prefix `json:"internalNetworkSubnetCidr,omitempty"`
	ExternalSubnets        []netip.Prefix `json:"externalNetworkSubnetCidr,omitempty"`
	ExcludeInternalSubnets []netip.Prefix `json:"excludeInternalNetworkSubnetCidr,omitempty"`
	ExcludeExternalSubnets []netip.Prefix `json:"excludeExternalNetworkSubnetCidr,omitempty"`
	InternalVMNetworkName  string         `json:"internalVmNetworkName,omitempty"`
	ExternalVMNetworkName  string         `json:"externalVmNetworkName,omitempty"`
	// LookupOrder is tried in order (default [uuid, vmName]).
	LookupOrder []LookupMethod `json:"lookupOrder" validate:"min=1,unique,dive,oneof=uuid vmName guestHostname"`
	// Deletion is when a VM may be reported gone (default onProof).
	Deletion DeletionPolicy `json:"deletion" validate:"oneof=onProof never"`
	// DeletionDelay (nodes.deletionDelay, default 0: at once, as the
	// reference): a VM is reported gone only once its absence has been
	// proven at every check for this long, so that a VM removed from the
	// inventory and registered again (maintenance, a host removed and added
	// back) keeps its Node. At most a day.
	DeletionDelay time.Duration `json:"deletionDelay,omitempty" validate:"min=0,max=86400000000000"`
	// SkipNodeDeletion is set when the environment has SKIP_NODE_DELETION
	// (any value), the reference CCM's switch: a VM proven gone is then
	// reported as an error, as the reference does, so its Node is kept.
	// Only the environment sets it; it is never encoded.
	SkipNodeDeletion bool `json:"-"`
	// OutOfService is the opt-in out-of-service taint policy.
	OutOfService OutOfService `json:"outOfService"`
	// AdoptUntainted (nodes.adoptUntainted, opt-in): a Node that joined
	// without the node.cloudprovider.kubernetes.io/uninitialized taint and
	// has no providerID is given the taint once its VM is found, so that
	// the node controller initializes it like any new Node.
	AdoptUntainted bool `json:"adoptUntainted,omitempty"`
	// ServingCertificates is the opt-in approval of kubelet serving
	// certificate requests.
	ServingCertificates ServingCertificates `json:"servingCertificates"`
	// Identity is the opt-in binding of kubelet client certificates, and
	// of Node initialization, to VMs by vCenter's records.
	Identity Identity `json:"identity"`
}

// Identity is the opt-in policy of the kubelet-client-csr controller: a
// kubelet's first client certificate request (signer
// kubernetes.io/kube-apiserver-client-kubelet, from a bootstrap token) is
// approved only when vCenter binds its public key and its Node name to one
// VM; such a Node is initialized only as that VM.
type Identity struct {
	// ApproveClientCertificates turns it on (default off).
	ApproveClientCertificates bool `json:"approveClientCertificates"`
	// KeyFingerprintKey is the extraConfig key in which a VM's guest
	// publishes the SHA-256 fingerprint of its kubelet's pending client
	// key (default guestinfo.vsphere-ccm.kubelet-client-key; it must be a
	// guestinfo.* key, the only ones a guest can write).
	KeyFingerprintKey string `json:"keyFingerprintKey,omitempty"`
	// KeyPublishTimeout is how long a request whose key no VM publishes
	// yet waits before it is denied (default 5m): the guest publishes it
	// before the kubelet starts, and the inventory sees it within seconds.
	KeyPublishTimeout time.Duration `json:"keyPublishTimeout"`
	// NodeNameKey, if set, is the extraConfig key whose value, as vCenter
	// holds it, is the Node name a VM may be: set by the provisioner
	// (Cluster API, Terraform), never by the guest, so it must not be a
	// guestinfo.* key. Unset, a VM may be the Node named like the VM.
	NodeNameKey string `json:"nodeNameKey,omitempty"`
}

// DefaultKeyPublishTimeout is the default of Identity.KeyPublishTimeout.
const DefaultKeyPublishTimeout = 5 * time.Minute

// DefaultKeyFingerprintKey is the default of Identity.KeyFingerprintKey.
const DefaultKeyFingerprintKey = "guestinfo.vsphere-ccm.kubelet-client-key"

// ServingCertificates is the opt-in policy under which the serving-csr
// controller approves a kubelet's serving certificate request (signer
// kubernetes.io/kubelet-serving) when vCenter proves every name and
// address in it is the requesting Node's VM's, and denies it when one is
// provably not.
type ServingCertificates struct {
	// Approve turns the controller on (default off). Every VM's guest
	// addresses are then read too (to tell an address only one VM reports).
	Approve bool `json:"approve"`
	// AllowedIPRanges, if set, bound the IP SANs: an address outside every
	// range is denied (default: none, no bound beyond the other checks).
	AllowedIPRanges []netip.Prefix `json:"allowedIPRanges,omitempty"`
	// AllowedDNSDomains, if set, bound the guest host names approved: a
	// DNS SAN other than the Node's own name must be under one of these
	// domains (default: none). The names are lower case, without a dot at
	// either end.
	AllowedDNSDomains []string `json:"allowedDNSDomains,omitempty" validate:"dive,dnsdomain"`
	// ServiceCIDRs are the cluster's Service ranges, for clusters whose
	// API server does not serve networking.k8s.io/v1 ServiceCIDRs
	// (before Kubernetes 1.33); the ServiceCIDR objects are read as well
	// when it does (default: none).
	ServiceCIDRs []netip.Prefix `json:"serviceCIDRs,omitempty"`
	// PodCIDRs are the cluster's Pod ranges (kube-controller-manager's
	// --cluster-cidr); every Node's spec.podCIDRs are read as well
	// (default: none).
	PodCIDRs []netip.Prefix `json:"podCIDRs,omitempty"`
	// ControlPlaneEndpoints are the API server's addresses and names as
	// clients reach them (kubeadm's controlPlaneEndpoint, a load
	// balancer's VIP and name), never approved for a Node; the addresses
	// of the default/kubernetes EndpointSlices are read as well (default:
	// none).
	ControlPlaneEndpoints []string `json:"controlPlaneEndpoints,omitempty" validate:"dive,endpointhost"`
	// ClusterDomain is the cluster's DNS domain: no name under it is
	// approved (default cluster.local).
	ClusterDomain string `json:"clusterDomain,omitempty" validate:"omitempty,dnsdomain"`
}

// DefaultClusterDomain is the default of ServingCertificates.ClusterDomain.
const DefaultClusterDomain = "cluster.local"

// OutOfService is the opt-in policy under which the node-topology
// controller adds node.kubernetes.io/out-of-service=nodeshutdown:NoExecute
// to a Node whose VM vCenter proves powered off, so that Kubernetes deletes
// its Pods and detaches their volumes at once instead of after minutes; and
// removes it when the VM powers on.
type OutOfService struct {
	// Enabled turns the policy on (default off).
	Enabled bool `json:"enabled"`
	// NotReadyFor: the Node's Ready condition has been False or Unknown at
	// least this long (default 60s).
	NotReadyFor time.Duration `json:"notReadyFor" validate:"min=1000000000"`
	// PoweredOffFor: the VM has been seen powered off, without a break and
	// with a current inventory, at least this long (default 30s).
	PoweredOffFor time.Duration `json:"poweredOffFor" validate:"min=1000000000"`
}

func netJoinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// String is a one-line description without secrets, for logs:
// "3 vCenter(s): site-a=vc-a.example.com:443[dc-east], ...; zone=k8s-zone region=k8s-region".
func (c *Config) String() string {
	if c == nil {
		return "<nil config>"
	}
	parts := make([]string, len(c.VCenters))
	for i, vc := range c.VCenters {
		parts[i] = fmt.Sprintf("%s=%s%v", vc.Name, vc.Address(), vc.Datacenters)
	}
	return fmt.Sprintf("%d vCenter(s): %s; zone=%q region=%q", len(c.VCenters), strings.Join(parts, ", "), c.Labels.Zone, c.Labels.Region)
}
