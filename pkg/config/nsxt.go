package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// The reference CCM's NSX-T sections: nsxt (the NSX-T manager connection),
// loadBalancer and loadBalancerClass (its service controller's NSX-T load
// balancer) and route (its route controller's static routes on a tier-1
// router). This CCM runs neither controller (docs/migration.md, "NSX-T load
// balancers and routes"); it reads every key of these sections as strictly
// as the rest, so that a config written for the reference starts here and
// a typo is still an error, and reports what the reference did with them.

type rawNSXT struct {
	User               *string       `yaml:"user" ini:"user"`
	Password           *secret.Value `yaml:"password" ini:"password"`
	Host               *string       `yaml:"host" ini:"host"`
	InsecureFlag       *bool         `yaml:"insecureFlag" ini:"insecure-flag"`
	RemoteAuth         *bool         `yaml:"remoteAuth" ini:"remote-auth"`
	SecretName         *string       `yaml:"secretName" ini:"secret-name"`
	SecretNamespace    *string       `yaml:"secretNamespace" ini:"secret-namespace"`
	VMCAccessToken     *secret.Value `yaml:"vmcAccessToken" ini:"vmc-access-token"`
	VMCAuthHost        *string       `yaml:"vmcAuthHost" ini:"vmc-auth-host"`
	ClientAuthCertFile *string       `yaml:"clientAuthCertFile" ini:"client-auth-cert-file"`
	ClientAuthKeyFile  *string       `yaml:"clientAuthKeyFile" ini:"client-auth-key-file"`
	CAFile             *string       `yaml:"caFile" ini:"ca-file"`
}

type rawLoadBalancerClass struct {
	IPPoolName        *string `yaml:"ipPoolName" ini:"ip-pool-name"`
	IPPoolID          *string `yaml:"ipPoolId" ini:"ip-pool-id"`
	TCPAppProfileName *string `yaml:"tcpAppProfileName" ini:"tcp-app-profile-name"`
	TCPAppProfilePath *string `yaml:"tcpAppProfilePath" ini:"tcp-app-profile-path"`
	UDPAppProfileName *string `yaml:"udpAppProfileName" ini:"udp-app-profile-name"`
	UDPAppProfilePath *string `yaml:"udpAppProfilePath" ini:"udp-app-profile-path"`
}

type rawLoadBalancer struct {
	rawLoadBalancerClass `yaml:",inline"`

	Size             *string `yaml:"size" ini:"size"`
	LBServiceID      *string `yaml:"lbServiceId" ini:"lb-service-id"`
	Tier1GatewayPath *string `yaml:"tier1GatewayPath" ini:"tier1-gateway-path"`
	SnatDisabled     *bool   `yaml:"snatDisabled" ini:"snat-disabled"`
	// Tags are a mapping in YAML and a JSON object in INI, as in the
	// reference.
	Tags     map[string]*string `yaml:"tags" ini:"-"`
	TagsJSON *string            `yaml:"-" ini:"tags"`
}

type rawRoute struct {
	RouterPath *string `yaml:"routerPath" ini:"router-path"`
}

// DefaultLoadBalancerClass is the class of a Service without the
// loadbalancer.vmware.io/class annotation, in the reference.
const DefaultLoadBalancerClass = "default"

// LoadBalancerClassAnnotation is the Service annotation that chose a load
// balancer class in the reference.
const LoadBalancerClassAnnotation = "loadbalancer.vmware.io/class"

// loadBalancerSizes are the sizes the reference accepts (NSX-T's LBService
// sizes).
var loadBalancerSizes = []string{"DLB", "LARGE", "MEDIUM", "SMALL", "XLARGE"}

// NSXT is what the cloud-config asks of the reference CCM's NSX-T load
// balancer and route controllers, which this CCM does not run. It is
// reported (config validate, a start-up warning, the metric
// vsphere_ccm_config_unserved_controllers, migrate preflight) and never
// acted on.
type NSXT struct {
	// Sections are the sections the file has, by YAML name.
	Sections []string `json:"sections,omitempty"`
	// LoadBalancer is true when the reference ran its NSX-T load balancer
	// for Services: a loadBalancer or loadBalancerClass section that its
	// validation accepts.
	LoadBalancer bool `json:"loadBalancer,omitempty"`
	// LoadBalancerRefused says why the reference refused the load balancer
	// sections (it then ran no load balancer, silently).
	LoadBalancerRefused string `json:"loadBalancerRefused,omitempty"`
	// Classes are the classes a Service could name in its
	// loadbalancer.vmware.io/class annotation, sorted; "default" is a
	// Service without it.
	Classes []string `json:"classes,omitempty"`
	// RouterPath is route.routerPath: when set, the reference's route
	// controller kept a static route per Node's Pod range on this tier-1
	// router.
	RouterPath string `json:"routerPath,omitempty"`
	// Manager is nsxt.host.
	Manager string `json:"manager,omitempty"`
}

// Serves tells whether a Service with this value of the
// loadbalancer.vmware.io/class annotation (absent: "") got an NSX-T load
// balancer from the reference.
func (n NSXT) Serves(class string) bool {
	if !n.LoadBalancer {
		return false
	}
	if class == "" {
		class = DefaultLoadBalancerClass
	}
	return slices.Contains(n.Classes, class)
}

// buildNSXT reads the NSX-T sections and warns about each: the reference
// acted on them, this CCM does not.
func (b *builder) buildNSXT(raw *rawConfig) NSXT {
	var n NSXT
	if raw.NSXT != nil {
		n.Sections = append(n.Sections, "nsxt")
		n.Manager = deref(raw.NSXT.Host)
	}
	lb := raw.LoadBalancer
	if lb != nil {
		n.Sections = append(n.Sections, "loadBalancer")
	}
	tagsRefused := ""
	if lb != nil && lb.TagsJSON != nil && strings.TrimSpace(*lb.TagsJSON) != "" {
		var tags map[string]string
		if err := json.Unmarshal([]byte(*lb.TagsJSON), &tags); err != nil {
			// The reference's load balancer reader fails on it, and the
			// reference then runs no load balancer (and starts).
			tagsRefused = "tags is not a JSON object of names to strings (" + jsonProblem(err) + `; in INI, quotes must be escaped: tags = {\"owner\": \"team-a\"})`
		}
	}
	if raw.LoadBalancerClass != nil {
		n.Sections = append(n.Sections, "loadBalancerClass")
	}
	if raw.Route != nil {
		n.Sections = append(n.Sections, "route")
		n.RouterPath = deref(raw.Route.RouterPath)
	}
	if lbEnabled(lb, raw.LoadBalancerClass) || tagsRefused != "" {
		why := tagsRefused
		if why == "" {
			why = lbRefused(lb, raw.LoadBalancerClass)
		}
		if why != "" {
			n.LoadBalancerRefused = why
		} else {
			n.LoadBalancer = true
			n.Classes = []string{DefaultLoadBalancerClass}
			for name := range raw.LoadBalancerClass {
				if !slices.Contains(n.Classes, name) {
					n.Classes = append(n.Classes, name)
				}
			}
			slices.Sort(n.Classes)
		}
	}

	const after = "after the switch, changes to those Services are not applied to NSX-T and their NSX-T load balancers are left behind when they are deleted; run `migrate preflight` first (docs/migration.md, \"NSX-T load balancers and routes\")"
	switch {
	case n.LoadBalancer:
		b.warnf(lbPath(raw), "the reference CCM served Services of type LoadBalancer with an NSX-T load balancer (classes %s); this CCM runs no load balancer controller: %s", strings.Join(n.Classes, ", "), after)
	case n.LoadBalancerRefused != "":
		b.warnf(lbPath(raw), "the reference CCM ran no load balancer with these sections (it refused them: %s), and neither does this CCM; remove them when convenient", n.LoadBalancerRefused)
	case lb != nil || raw.LoadBalancerClass != nil:
		b.warnf(lbPath(raw), "empty load balancer settings: neither the reference CCM nor this CCM runs a load balancer with them; remove them when convenient")
	}
	switch {
	case n.RouterPath != "":
		b.warnf("route.routerPath", "the reference CCM kept a static route for each Node's Pod range on the NSX-T router %s; this CCM runs no route controller: after the switch, routes of new Nodes are not added and routes of deleted Nodes are left behind; run `migrate preflight` first (docs/migration.md, \"NSX-T load balancers and routes\")", n.RouterPath)
	case raw.Route != nil:
		b.warnf("route", "route has no routerPath: neither the reference CCM nor this CCM manages routes with it; remove it when convenient")
	}
	if raw.NSXT != nil && !n.LoadBalancer && n.RouterPath == "" {
		b.warnf("nsxt", "the NSX-T connection serves only the reference CCM's load balancer and route controllers, which this config does not enable and this CCM does not run; ignored; remove it when convenient")
	}
	return n
}

// inNSXTSection tells whether a field path is in a section only the
// reference's NSX-T, load balancer and route readers read.
func inNSXTSection(field string) bool {
	top, _, _ := strings.Cut(field, ".")
	top, _, _ = strings.Cut(top, "[")
	switch top {
	case "nsxt", "loadBalancer", "loadBalancerClass", "route":
		return true
	}
	return false
}

// lenientNSXT turns the problems found in the NSX-T sections into
// warnings. The reference reads each of them apart, ignoring unknown keys,
// and when its reader fails it logs that and starts without the section
// (its cloud.go); this CCM never acts on them. So a config the reference
// started with starts here, and says what the reference did
// (testdata/nsxt: lenient-*, read by hack/refverdict).
func lenientNSXT(diags []Diagnostic) (errs, warnings []Diagnostic) {
	for _, d := range diags {
		if !inNSXTSection(d.Field) {
			errs = append(errs, d)
			continue
		}
		d.Message += "; a warning, not an error: the reference CCM reads this section apart from the rest and starts with whatever its reader makes of it (unknown keys ignored, a section it cannot read left out), and this CCM never acts on it; fix or remove it when convenient"
		warnings = append(warnings, d)
	}
	return errs, warnings
}

func lbPath(raw *rawConfig) string {
	if raw.LoadBalancer != nil {
		return "loadBalancer"
	}
	return "loadBalancerClass"
}

// lbEnabled is the reference's LBConfig.IsEnabled: any class, or a
// loadBalancer section with a size, service, pool or gateway.
func lbEnabled(lb *rawLoadBalancer, classes map[string]*rawLoadBalancerClass) bool {
	if len(classes) > 0 {
		return true
	}
	if lb == nil {
		return false
	}
	return deref(lb.Size) != "" || deref(lb.LBServiceID) != "" || deref(lb.IPPoolID) != "" ||
		deref(lb.IPPoolName) != "" || deref(lb.Tier1GatewayPath) != ""
}

// lbRefused is the reference's validation of an enabled load balancer
// config (its CompleteAndValidate), in its order: the reason it gave, or
// "" when it ran the load balancer.
func lbRefused(lb *rawLoadBalancer, classes map[string]*rawLoadBalancerClass) string {
	if lb == nil {
		lb = &rawLoadBalancer{}
	}
	switch {
	case deref(lb.LBServiceID) == "" && deref(lb.Tier1GatewayPath) == "":
		return "either load balancer service id or T1 gateway path required"
	case deref(lb.TCPAppProfileName) == "" && deref(lb.TCPAppProfilePath) == "":
		return "either load balancer TCP application profile name or path required"
	case deref(lb.UDPAppProfileName) == "" && deref(lb.UDPAppProfilePath) == "":
		return "either load balancer UDP application profile name or path required"
	case !slices.Contains(loadBalancerSizes, deref(lb.Size)):
		return "load balancer size is invalid. Valid values are: " + strings.Join(loadBalancerSizes, ",")
	}
	if deref(lb.IPPoolID) == "" && deref(lb.IPPoolName) == "" {
		class, ok := classes[DefaultLoadBalancerClass]
		switch {
		case !ok:
			return "no default load balancer class defined"
		case class == nil || (deref(class.IPPoolName) == "" && deref(class.IPPoolID) == ""):
			return "default load balancer class: ipPoolName and ipPoolID is empty"
		}
	} else if deref(lb.IPPoolName) != "" && deref(lb.IPPoolID) != "" {
		return "either load balancer ipPoolName or ipPoolID can be set"
	}
	return ""
}

// jsonProblem describes a JSON error without quoting the input.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("invalid JSON at character %d", syn.Offset)
	}
	return "not an object of strings"
}
