package config

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// builder turns a rawConfig into a Config: defaults and the inheritance of
// global values into each vCenter happen here and nowhere else.
type builder struct {
	d        *decoder
	warnings []Diagnostic
	// origin maps a typed field path to the raw path its value came from,
	// when different (inherited from global).
	origin map[string]string
	// reported de-duplicates problems of a value inherited by many vCenters.
	reported map[string]bool
	// ignoredSecret says why global.secretName is not used, if it is not.
	ignoredSecret string
	// globalInlineUnused lists the vCenters that read a Secret instead of
	// global's inline user and password.
	globalInlineUnused []string
}

func newBuilder(d *decoder) *builder {
	return &builder{d: d, origin: map[string]string{}, reported: map[string]bool{}}
}

func (b *builder) warnf(path, format string, args ...any) {
	b.warnings = append(b.warnings, Diagnostic{Pos: b.position(path), Field: path, Key: b.d.written[path], Message: fmt.Sprintf(format, args...)})
}

// errorf records a problem. A problem with an inherited value is reported
// once, at the global key that holds it, not once per vCenter.
func (b *builder) errorf(path, format string, args ...any) {
	path = b.source(path)
	msg := fmt.Sprintf(format, args...)
	if b.reported[path+"\x00"+msg] {
		return
	}
	b.reported[path+"\x00"+msg] = true
	b.d.diags = append(b.d.diags, Diagnostic{Pos: b.position(path), Field: path, Key: b.d.written[path], Message: msg})
}

// source maps a typed path to the raw path its value was written at:
// vcenter["a"].ipFamily[1] -> global.ipFamily[1] when ipFamily was inherited.
func (b *builder) source(path string) string {
	for p := path; p != ""; p = parentPath(p) {
		if o, ok := b.origin[p]; ok {
			return o + path[len(p):]
		}
	}
	return path
}

// position finds where a path (or the value it inherited) was written,
// falling back to its nearest written parent.
func (b *builder) position(path string) Position {
	for p := path; p != ""; p = parentPath(p) {
		if pos, ok := b.d.pos[p]; ok {
			return pos
		}
		if o, ok := b.origin[p]; ok {
			if pos, ok := b.d.pos[o]; ok {
				return pos
			}
		}
	}
	return Position{File: b.d.file}
}

// parentPath strips the last element: a.b[0] -> a.b, a["x"].c -> a["x"], a -> "".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i > 0 {
			return p[:i]
		}
	}
	inQuote := false
	for i := len(p) - 1; i >= 0; i-- {
		switch p[i] {
		case '"':
			inQuote = !inQuote
		case '.':
			if !inQuote {
				return p[:i]
			}
		}
	}
	return ""
}

func vcenterPath(name string) string { return fmt.Sprintf("vcenter[%q]", name) }

// inherit resolves one connection value: the vCenter's if set, else the
// global one, else def. isSet decides what "set" means for the type (an
// empty string or list inherits, an explicit false does not).
func inherit[T any](b *builder, vcPath, key string, vc, g *T, def T, isSet func(T) bool) T {
	if vc != nil && isSet(*vc) {
		return *vc
	}
	if g != nil && isSet(*g) {
		b.origin[vcPath+"."+key] = "global." + key
		return *g
	}
	return def
}

func nonEmpty(s string) bool       { return s != "" }
func nonEmptyList(l []string) bool { return len(l) > 0 }
func always[T any](T) bool         { return true }

func (b *builder) build(raw *rawConfig) *Config {
	g := raw.Global
	if g == nil {
		g = &rawGlobal{}
	}
	cfg := &Config{}
	cfg.Global = b.buildGlobal(g)

	vcenters := raw.VCenter
	if s := deref(g.Server); s != "" {
		b.warnf("global.server", "global.server is deprecated; describe the vCenter under vcenter.<name> instead")
		exists := false
		for name, vc := range vcenters {
			if name == s || (vc != nil && deref(vc.Server) == s) {
				exists = true
			}
		}
		if !exists {
			if vcenters == nil {
				vcenters = map[string]*rawVCenter{}
			}
			vcenters[s] = &rawVCenter{}
			b.origin[vcenterPath(s)] = "global.server"
		}
	}
	if name := deref(g.SecretName); name != "" && deref(g.SecretNamespace) == "" {
		// The reference uses a Secret only when both are set, and ignores
		// one half: so does this CCM, saying so. A vCenter left without
		// credentials is an error (buildCredentials).
		b.warnf("global.secretName", "secretName %q has no namespace, so the Secret is not used (as the reference CCM does not use it); set global.secretNamespace to use it", name)
		b.ignoredSecret = "global.secretName has no secretNamespace"
	}
	if g.APIDisable != nil {
		b.warnf("global.apiDisable", "apiDisable has no effect in this CCM and is ignored")
	}
	if g.APIBinding != nil {
		b.warnf("global.apiBinding", "apiBinding has no effect in this CCM and is ignored")
	}

	names := make([]string, 0, len(vcenters))
	for name := range vcenters {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		vc := vcenters[name]
		if vc == nil {
			vc = &rawVCenter{}
		}
		cfg.VCenters = append(cfg.VCenters, b.buildVCenter(name, vc, g, cfg.Global))
	}
	if len(cfg.VCenters) == 0 {
		b.errorf("vcenter", "no vCenter configured; add one under vcenter.<name> with at least a server")
	}
	if len(b.globalInlineUnused) > 0 {
		b.warnf(globalInlineKey(&g.rawConnection), "global inline credentials are not used by %s, which read a Secret (as in the reference CCM); remove them, or give those vCenters their own", strings.Join(b.globalInlineUnused, ", "))
	}
	cfg.Labels = b.buildLabels(raw.Labels)
	cfg.Nodes = b.buildNodes(raw.Nodes)
	cfg.HostGroupZones = b.buildHostGroupZones(raw.HostGroupZones, cfg.VCenters)
	cfg.NSXT = b.buildNSXT(raw)
	if cfg.Labels.CSICompatible {
		// vSphere CSI reads tags on the host chain and nothing else.
		if len(cfg.HostGroupZones) > 0 {
			b.errorf("labels.csiCompatible", "csiCompatible is set, but vSphere CSI cannot see the zones of hostGroupZones: remove hostGroupZones, or unset csiCompatible and tag the hosts of each site (docs/csi.md)")
		}
		for _, vc := range cfg.VCenters {
			if !vc.StaticTopology.IsZero() {
				b.errorf(vcenterPath(vc.Name)+".staticTopology", "labels.csiCompatible is set, but vSphere CSI cannot see staticTopology: remove it and tag the clusters or hosts, or unset csiCompatible")
			}
		}
	}
	return cfg
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func orDefault[T comparable](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func (b *builder) buildGlobal(g *rawGlobal) Global {
	if g.TokenLifetime != nil && *g.TokenLifetime >= 10*time.Second && *g.TokenLifetime < 5*time.Minute {
		b.warnf("global.tokenLifetime", "a token lifetime of %s renews the vAPI session of every vCenter in certificate mode every %s; the default is %s",
			*g.TokenLifetime, *g.TokenLifetime*3/4, DefaultTokenLifetime)
	}
	return Global{
		SecretsDirectory:   deref(g.SecretsDirectory),
		ConnectTimeout:     orDefault(g.ConnectTimeout, DefaultConnectTimeout),
		RequestTimeout:     orDefault(g.RequestTimeout, DefaultRequestTimeout),
		LoginBackoff:       orDefault(g.LoginBackoff, DefaultLoginBackoff),
		TagRefreshInterval: orDefault(g.TagRefreshInterval, DefaultTagRefreshInterval),
		TokenLifetime:      orDefault(g.TokenLifetime, DefaultTokenLifetime),
	}
}

func (b *builder) buildVCenter(name string, vc *rawVCenter, g *rawGlobal, global Global) VCenter {
	p := vcenterPath(name)
	gc := &g.rawConnection
	c := &vc.rawConnection
	out := VCenter{
		Name:               name,
		Server:             strings.TrimSpace(inherit(b, p, "server", c.Server, nil, "", nonEmpty)),
		Port:               inherit(b, p, "port", c.Port, gc.Port, DefaultPort, always[int]),
		Datacenters:        inherit(b, p, "datacenters", c.Datacenters, gc.Datacenters, []string{}, nonEmptyList),
		InsecureFlag:       inherit(b, p, "insecureFlag", c.InsecureFlag, gc.InsecureFlag, false, always[bool]),
		CAFile:             inherit(b, p, "caFile", c.CAFile, gc.CAFile, "", nonEmpty),
		Thumbprint:         inherit(b, p, "thumbprint", c.Thumbprint, gc.Thumbprint, "", nonEmpty),
		SOAPRoundtripCount: inherit(b, p, "soapRoundtripCount", c.SOAPRoundtripCount, gc.SOAPRoundtripCount, DefaultSOAPRoundtripCount, func(n int) bool { return n != 0 }),
	}
	if _, implicit := b.origin[p]; implicit {
		// The vCenter created from global.server.
		out.Server = deref(g.Server)
		b.origin[p+".server"] = "global.server"
	}
	for _, f := range inherit(b, p, "ipFamily", c.IPFamily, gc.IPFamily, nil, nonEmptyList) {
		out.IPFamilies = append(out.IPFamilies, IPFamily(f))
	}
	if len(out.IPFamilies) == 0 {
		out.IPFamilies = append([]IPFamily(nil), DefaultIPFamilies...)
	}
	if c.InsecureFlag != nil && !*c.InsecureFlag && gc.InsecureFlag != nil && *gc.InsecureFlag {
		// The reference's zero-value inheritance reads this false as unset,
		// so it took global's true: this vCenter was not verified there.
		b.warnf(p+".insecureFlag", "insecureFlag: false under a global insecureFlag: true: this CCM verifies vCenter %q's certificate, the reference CCM did not (it inherits the global true); give it caFile or thumbprint, or set insecureFlag: true to keep the reference's behaviour", name)
	}
	if out.InsecureFlag {
		b.warnf(p+".insecureFlag", "TLS certificate verification is disabled for vCenter %q; use caFile or thumbprint in production", name)
		if out.CAFile != "" || out.Thumbprint != "" {
			b.warnf(p+".insecureFlag", "insecureFlag is set, so caFile and thumbprint are ignored for vCenter %q", name)
		}
	}
	out.Credentials = b.buildCredentials(p, c, gc, global, deref(vc.SessionManagerAllowHTTP))
	out.StaticTopology = b.buildStaticTopology(p, vc.StaticTopology, out.Datacenters)
	return out
}

func (b *builder) buildCredentials(p string, c, gc *rawConnection, global Global, allowHTTP bool) Credentials {
	cred := Credentials{SecretsDirectory: global.SecretsDirectory, AllowHTTP: allowHTTP}
	if allowHTTP {
		b.warnf(p+".sessionManagerAllowHTTP", "a plain http session manager URL is allowed for this vCenter: its bearer token and the session ticket may travel in clear; use https")
	}
	ignored := "" // why a Secret named here or in global is not used
	gns := deref(gc.SecretNamespace)
	if name := deref(c.SecretName); name != "" {
		ns := deref(c.SecretNamespace)
		if ns == "" {
			ns = gns
			b.origin[p+".secretNamespace"] = "global.secretNamespace"
		}
		if ns == "" {
			b.warnf(p+".secretName", "secretName %q has no namespace, so the Secret is not used (as the reference CCM does not use it); set secretNamespace here or in global to use it", name)
			ignored = fmt.Sprintf("secretName %q has no secretNamespace", name)
		} else {
			cred.Secret = &SecretRef{Namespace: ns, Name: name}
		}
	} else if deref(c.SecretNamespace) != "" {
		b.errorf(p+".secretNamespace", "secretNamespace is set but secretName is not; name the Secret or remove secretNamespace")
	}
	if name := deref(gc.SecretName); name != "" && gns != "" {
		cred.GlobalSecret = &SecretRef{Namespace: gns, Name: name}
	} else if name != "" && ignored == "" {
		ignored = b.ignoredSecret
	}
	// A vCenter that reads a Secret does not inherit global's inline
	// credentials (the reference uses the Secret alone then); its own
	// inline credentials stay, after the Secret. The vCenter made from
	// global.server has global's as its own.
	_, implicit := b.origin[p]
	usesSecret := (cred.Secret != nil || cred.GlobalSecret != nil) && !implicit
	in := b.inlineFields(p, c, gc, usesSecret)
	cred.TokenFile = inherit(b, p, "sessionManagerTokenFile", c.SessionManagerTokenFile, gc.SessionManagerTokenFile, "", nonEmpty)
	cred.Inline = b.inlineCredentials(p, in, len(cred.Sources()) > 0, allowHTTP)
	switch {
	case len(cred.Sources()) > 0 || in.written():
		// a source, or inline credentials already reported as wrong
	case ignored != "":
		b.errorf(p, "no credentials: %s; set it, or global.secretsDirectory, or user and password", ignored)
	default:
		b.errorf(p, "no credentials: set secretName and secretNamespace (here or in global), global.secretsDirectory, or user and password")
	}
	return cred
}

// globalInlineKey is the first inline credential key set in global.
func globalInlineKey(gc *rawConnection) string {
	switch {
	case deref(gc.User) != "":
		return "global.user"
	case deref(gc.Certificate) != "":
		return "global.certificate"
	case deref(gc.SessionManagerURL) != "":
		return "global.sessionManagerURL"
	}
	return "global.user"
}

// inline is the inline credential fields of one vCenter, each its own
// value or global's.
type inline struct {
	user, certificate, url string
	password, key, token   secret.Value
}

func (in inline) written() bool {
	return in.user != "" || in.certificate != "" || in.url != "" ||
		in.password.IsSet() || in.key.IsSet() || in.token.IsSet()
}

// inlineFields inherits each inline credential field. Global's are not
// inherited by a vCenter that reads a Secret, nor, by a vCenter that sets
// inline fields of one mode itself, those of another mode (a vCenter with
// its own session manager does not get global's user); a session-manager
// token is inherited only with its URL (a token never goes to another
// session manager than the one it was written for).
func (b *builder) inlineFields(p string, c, gc *rawConnection, usesSecret bool) inline {
	set := func(v *secret.Value) bool { return v != nil && v.IsSet() }
	own := map[secret.Mode]bool{
		secret.ModePassword:      deref(c.User) != "" || set(c.Password),
		secret.ModeCertificate:   deref(c.Certificate) != "" || set(c.PrivateKey),
		secret.ModeSharedSession: deref(c.SessionManagerURL) != "" || set(c.SessionManagerToken),
	}
	anyOwn := own[secret.ModePassword] || own[secret.ModeCertificate] || own[secret.ModeSharedSession]
	inherits := func(m secret.Mode) bool { return !usesSecret && (!anyOwn || own[m]) }
	str := func(m secret.Mode, key string, v, g *string) string {
		if !inherits(m) {
			if usesSecret && deref(v) == "" && deref(g) != "" && !contains(b.globalInlineUnused, p) {
				b.globalInlineUnused = append(b.globalInlineUnused, p)
			}
			return deref(v)
		}
		return inherit(b, p, key, v, g, "", nonEmpty)
	}
	val := func(m secret.Mode, key string, v, g *secret.Value) secret.Value {
		switch {
		case set(v):
			return *v
		case set(g) && inherits(m):
			b.origin[p+"."+key] = "global." + key
			return *g
		}
		return secret.Value{}
	}
	in := inline{
		user:        str(secret.ModePassword, "user", c.User, gc.User),
		password:    val(secret.ModePassword, "password", c.Password, gc.Password),
		certificate: str(secret.ModeCertificate, "certificate", c.Certificate, gc.Certificate),
		key:         val(secret.ModeCertificate, "privateKey", c.PrivateKey, gc.PrivateKey),
		url:         str(secret.ModeSharedSession, "sessionManagerURL", c.SessionManagerURL, gc.SessionManagerURL),
	}
	if deref(c.SessionManagerURL) != "" {
		in.token = val(secret.ModeSharedSession, "sessionManagerToken", c.SessionManagerToken, nil)
	} else {
		in.token = val(secret.ModeSharedSession, "sessionManagerToken", c.SessionManagerToken, gc.SessionManagerToken)
	}
	return in
}

// inlineCredentials chooses the mode of the inline credentials: the fields
// of one mode only, complete. Errors name fields, never values.
// An incomplete set is an error, or only a warning when other sources
// exist (the reference reads a user beside a Secret and uses the Secret).
func (b *builder) inlineCredentials(p string, in inline, others, allowHTTP bool) secret.Credentials {
	incomplete := b.errorf
	if others {
		incomplete = func(path, format string, args ...any) {
			b.warnf(path, format+" (ignored: the vCenter's other credential sources are used)", args...)
		}
	}
	hasPassword := in.user != "" || in.password.IsSet()
	hasCert := in.certificate != "" || in.key.IsSet()
	hasSession := in.url != "" || in.token.IsSet()
	modes := 0
	for _, m := range []bool{hasPassword, hasCert, hasSession} {
		if m {
			modes++
		}
	}
	if modes > 1 {
		b.errorf(p, "the inline credentials mix modes (user and password, certificate and privateKey, sessionManagerURL): set the fields of one")
		return nil
	}
	switch {
	case hasSession:
		if in.url == "" {
			incomplete(p+".sessionManagerToken", "sessionManagerToken is set but sessionManagerURL is not; add the session manager's URL")
			return nil
		}
		s, err := secret.NewSharedSession(in.url, in.token, "")
		if err != nil {
			b.errorf(p+".sessionManagerURL", "%v", err)
			return nil
		}
		if s.Insecure() && !allowHTTP {
			b.errorf(p+".sessionManagerURL", "the session manager URL is plain http: the bearer token and the session ticket would travel in clear; use https, or allow it for this vCenter with vcenter.<name>.sessionManagerAllowHTTP: true")
			return nil
		}
		return s
	case hasCert:
		switch {
		case in.certificate == "":
			incomplete(p+".privateKey", "privateKey is set but certificate is not; add the solution user's PEM certificate")
			return nil
		case !in.key.IsSet():
			incomplete(p+".certificate", "certificate is set but privateKey is not; add its PEM private key")
			return nil
		}
		c, err := secret.NewCertificate(in.certificate, in.key)
		if err != nil {
			b.errorf(p+certificateErrorField(err, ".certificate", ".privateKey"), "%v", err)
			return nil
		}
		return c
	case hasPassword:
		switch {
		case in.user != "" && !in.password.IsSet():
			incomplete(p+".user", "user is set but no password is; add password, or better, use secretName/secretNamespace or global.secretsDirectory")
			return nil
		case in.user == "":
			incomplete(p+".password", "password is set but no user is; add user")
			return nil
		}
		c, err := secret.FromUserPassword(in.user, in.password)
		if err != nil {
			b.errorf(p+certificateErrorField(err, ".user", ".password"), "%v", err)
			return nil
		}
		return c
	}
	return nil
}

func (b *builder) buildStaticTopology(p string, raw *rawStaticTopology, datacenters []string) StaticTopology {
	if raw == nil {
		return StaticTopology{}
	}
	st := StaticTopology{Zone: deref(raw.Zone), Region: deref(raw.Region)}
	sp := p + ".staticTopology"
	for name, zr := range raw.Datacenters {
		if st.Datacenters == nil {
			st.Datacenters = map[string]ZoneRegion{}
		}
		if zr == nil {
			zr = &rawZoneRegion{}
		}
		st.Datacenters[name] = ZoneRegion{Zone: deref(zr.Zone), Region: deref(zr.Region)}
		if len(datacenters) > 0 && !contains(datacenters, name) {
			b.errorf(fmt.Sprintf("%s.datacenters[%q]", sp, name), "datacenter %q is not in this vCenter's datacenters %v", name, datacenters)
		}
	}
	return st
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (b *builder) buildLabels(raw *rawLabels) Labels {
	if raw == nil {
		return Labels{OnDrift: DriftKeep}
	}
	l := Labels{Zone: deref(raw.Zone), Region: deref(raw.Region), CSICompatible: deref(raw.CSICompatible),
		OnDrift: DriftPolicy(orDefault(raw.OnDrift, string(DriftKeep))), InstanceType: deref(raw.InstanceType),
		InstanceTypeAttribute: deref(raw.InstanceTypeAttribute)}
	for _, p := range deref(raw.Placement) {
		l.Placement = append(l.Placement, PlacementLabel(p))
	}
	if raw.InstanceType != nil && strings.TrimSpace(*raw.InstanceType) == "" {
		b.errorf("labels.instanceType", "instance type category name is empty; name a tag category or remove the key")
	}
	if raw.Zone != nil && strings.TrimSpace(*raw.Zone) == "" {
		b.errorf("labels.zone", "zone category name is empty; name a tag category or remove the key")
	}
	if raw.Region != nil && strings.TrimSpace(*raw.Region) == "" {
		b.errorf("labels.region", "region category name is empty; name a tag category or remove the key")
	}
	if l.Zone != "" && l.Zone == l.Region {
		b.errorf("labels.region", "zone and region use the same tag category %q; use two categories", l.Zone)
	}
	seen := map[string]string{}
	for i, a := range raw.Additional {
		ap := fmt.Sprintf("labels.additional[%d]", i)
		al := AdditionalLabel{Category: deref(a.Category), Attribute: deref(a.Attribute), Label: deref(a.Label)}
		if al.Category == "" && al.Attribute == "" {
			b.errorf(ap, "names neither a tag category (category) nor a custom attribute (attribute); name one")
		}
		if al.Category != "" && al.Attribute != "" {
			b.errorf(ap, "both category %q and attribute %q: a label comes from one of them; split it in two entries with two labels", al.Category, al.Attribute)
		}
		for _, reserved := range []string{"topology.kubernetes.io/zone", "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"} {
			if al.Label == reserved {
				b.errorf(ap+".label", "label %q is set from labels.zone/labels.region; choose another key", al.Label)
			}
		}
		for _, reserved := range []string{"node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"} {
			if al.Label == reserved {
				b.errorf(ap+".label", "label %q is the instance type; name its category in labels.instanceType instead", al.Label)
			}
		}
		if prev, dup := seen[al.Label]; dup && al.Label != "" {
			b.errorf(ap+".label", "label %q is already filled from %s", al.Label, prev)
		}
		seen[al.Label] = fmt.Sprintf("category %q", al.Category)
		if al.Attribute != "" {
			seen[al.Label] = fmt.Sprintf("attribute %q", al.Attribute)
		}
		l.Additional = append(l.Additional, al)
	}
	return l
}

func (b *builder) buildNodes(raw *rawNodes) Nodes {
	if raw == nil {
		raw = &rawNodes{}
	}
	n := Nodes{
		InternalSubnets:        b.prefixes("nodes.internalNetworkSubnetCidr", raw.InternalNetworkSubnetCIDR),
		ExternalSubnets:        b.prefixes("nodes.externalNetworkSubnetCidr", raw.ExternalNetworkSubnetCIDR),
		ExcludeInternalSubnets: b.prefixes("nodes.excludeInternalNetworkSubnetCidr", raw.ExcludeInternalNetworkSubnetCIDR),
		ExcludeExternalSubnets: b.prefixes("nodes.excludeExternalNetworkSubnetCidr", raw.ExcludeExternalNetworkSubnetCIDR),
		InternalVMNetworkName:  deref(raw.InternalVMNetworkName),
		ExternalVMNetworkName:  deref(raw.ExternalVMNetworkName),
		Deletion:               DeletionPolicy(deref(raw.Deletion)),
		DeletionDelay:          deref(raw.DeletionDelay),
		AdoptUntainted:         deref(raw.AdoptUntainted),
	}
	if raw.Deletion == nil {
		n.Deletion = DeletionOnProof
	}
	if n.DeletionDelay > 0 && n.Deletion == DeletionNever {
		b.warnf("nodes.deletionDelay", "nodes.deletionDelay has no effect with nodes.deletion: never (no Node is deleted for a missing VM); remove one of them")
	}
	oos := raw.OutOfService
	if oos == nil {
		oos = &rawOutOfService{}
	}
	n.OutOfService = OutOfService{Enabled: deref(oos.Enabled),
		NotReadyFor:   orDefault(oos.NotReadyFor, DefaultOutOfServiceNotReadyFor),
		PoweredOffFor: orDefault(oos.PoweredOffFor, DefaultOutOfServicePoweredOffFor)}
	n.ServingCertificates = b.buildServingCertificates(raw.ServingCertificates)
	n.Identity = b.buildIdentity(raw.Identity)
	for _, m := range deref(raw.LookupOrder) {
		n.LookupOrder = append(n.LookupOrder, LookupMethod(m))
	}
	if raw.LookupOrder == nil {
		n.LookupOrder = append([]LookupMethod(nil), DefaultLookupOrder...)
	}
	return n
}

// buildServingCertificates reads nodes.servingCertificates; names are
// compared lower case, without a dot at either end.
func (b *builder) buildServingCertificates(sc *rawServingCertificates) ServingCertificates {
	const p = "nodes.servingCertificates"
	if sc == nil {
		return ServingCertificates{ClusterDomain: DefaultClusterDomain}
	}
	out := ServingCertificates{Approve: deref(sc.Approve),
		AllowedIPRanges: b.prefixes(p+".allowedIPRanges", sc.AllowedIPRanges),
		ServiceCIDRs:    b.prefixes(p+".serviceCIDRs", sc.ServiceCIDRs),
		PodCIDRs:        b.prefixes(p+".podCIDRs", sc.PodCIDRs),
		ClusterDomain:   dnsName(orDefault(sc.ClusterDomain, DefaultClusterDomain)),
	}
	for _, d := range deref(sc.AllowedDNSDomains) {
		out.AllowedDNSDomains = append(out.AllowedDNSDomains, dnsName(d))
	}
	for _, e := range deref(sc.ControlPlaneEndpoints) {
		out.ControlPlaneEndpoints = append(out.ControlPlaneEndpoints, dnsName(e))
	}
	if sc.AllowedIPRanges != nil && len(*sc.AllowedIPRanges) == 0 {
		b.errorf(p+".allowedIPRanges", "is empty: it would deny every IP SAN; list the ranges Node addresses are in, or remove the key")
	}
	return out
}

// buildIdentity reads nodes.identity.
func (b *builder) buildIdentity(id *rawIdentity) Identity {
	if id == nil {
		return Identity{KeyFingerprintKey: DefaultKeyFingerprintKey, KeyPublishTimeout: DefaultKeyPublishTimeout}
	}
	out := Identity{ApproveClientCertificates: deref(id.ApproveClientCertificates),
		KeyFingerprintKey: orDefault(id.KeyFingerprintKey, DefaultKeyFingerprintKey),
		KeyPublishTimeout: orDefault(id.KeyPublishTimeout, DefaultKeyPublishTimeout),
		NodeNameKey:       strings.TrimSpace(deref(id.NodeNameKey))}
	if out.KeyPublishTimeout < 0 {
		b.errorf("nodes.identity.keyPublishTimeout", "is negative; write a duration like 5m (0: deny at once a request whose key no VM publishes)")
	}
	k := out.KeyFingerprintKey
	switch {
	case !strings.HasPrefix(k, "guestinfo.") || len(k) == len("guestinfo."):
		b.errorf("nodes.identity.keyFingerprintKey", "%q is not a guestinfo.* key: the guest publishes its key's fingerprint with vmware-rpctool \"info-set guestinfo.<name> <fingerprint>\", and can write no other key", k)
	case strings.ContainsAny(k, " \t\"[]"):
		b.errorf("nodes.identity.keyFingerprintKey", "%q holds a space, a quote or a bracket: write a key like guestinfo.vsphere-ccm.kubelet-client-key", k)
	}
	switch n := out.NodeNameKey; {
	case id.NodeNameKey != nil && n == "":
		b.errorf("nodes.identity.nodeNameKey", "is empty: name the extraConfig key your provisioner sets to the Node name (for example k8s.node-name), or remove the key to bind Nodes by VM name")
	case strings.HasPrefix(strings.ToLower(n), "guestinfo."):
		b.errorf("nodes.identity.nodeNameKey", "%q is a guestinfo.* key, which the guest itself can write: a Node name bound by the guest's word binds nothing; use a key only the provisioner sets (not guestinfo.*), or remove the key to bind Nodes by VM name", n)
	case strings.ContainsAny(n, " \t\"[]"):
		b.errorf("nodes.identity.nodeNameKey", "%q holds a space, a quote or a bracket: write a key like k8s.node-name", n)
	case n != "" && !out.ApproveClientCertificates:
		b.warnf("nodes.identity.nodeNameKey", "is set while approveClientCertificates is off: nothing is bound by it; set approveClientCertificates: true, or remove the key")
	}
	return out
}

// dnsName is a name as compared: lower case, without surrounding blanks
// or a dot at either end.
func dnsName(s string) string { return strings.Trim(strings.ToLower(strings.TrimSpace(s)), ".") }

// prefixes parses a list of CIDRs; every bad entry is reported.
func (b *builder) prefixes(path string, raw *[]string) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range deref(raw) {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if s == "" {
			b.errorf(ip, "empty CIDR (a stray comma?)")
			continue
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			b.errorf(ip, "%q is not a valid CIDR; write it like 10.0.0.0/24 or fd00::/64", s)
			continue
		}
		if pfx.Masked() != pfx {
			b.warnf(ip, "%q has host bits set; using %s", s, pfx.Masked())
			pfx = pfx.Masked()
		}
		if pfx.Addr().Is4In6() {
			// Addresses are compared unmapped: an IPv4-mapped prefix
			// would never contain one. (Masked, a mapped prefix is at
			// least /96: shorter ones lose the ffff.)
			v4 := netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
			b.warnf(ip, "%q is an IPv4-mapped prefix; using %s", s, v4)
			pfx = v4
		}
		out = append(out, pfx)
	}
	return out
}

// certificateErrorField is where a credential error is reported: at the
// key's field when the key is wrong (not the certificate's, not a key, not
// RSA, or a key given as a password), else at the certificate's.
func certificateErrorField(err error, certField, keyField string) string {
	if errors.Is(err, secret.ErrPrivateKeyAsPassword) || errors.Is(err, secret.ErrPrivateKey) {
		return keyField
	}
	return certField
}
