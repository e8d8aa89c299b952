package config

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-playground/validator/v10"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// newValidator returns a validator that names fields by their YAML key and
// knows this package's custom rules.
func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			return f.Name
		}
		return name
	})
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(v.RegisterValidation("vchost", func(fl validator.FieldLevel) bool { return validHost(fl.Field().String()) }))
	must(v.RegisterValidation("endpointhost", func(fl validator.FieldLevel) bool { return validHost(fl.Field().String()) }))
	must(v.RegisterValidation("dnsdomain", func(fl validator.FieldLevel) bool {
		s := fl.Field().String()
		return !strings.Contains(s, "*") && len(k8svalidation.IsDNS1123Subdomain(s)) == 0
	}))
	must(v.RegisterValidation("thumbprint", func(fl validator.FieldLevel) bool { return thumbprintRE.MatchString(fl.Field().String()) }))
	must(v.RegisterValidation("labelvalue", func(fl validator.FieldLevel) bool {
		return len(k8svalidation.IsValidLabelValue(fl.Field().String())) == 0
	}))
	must(v.RegisterValidation("labelkey", func(fl validator.FieldLevel) bool {
		return len(k8svalidation.IsQualifiedName(fl.Field().String())) == 0
	}))
	return v
}

// thumbprintRE accepts SHA-1 (20 bytes) or SHA-256 (32 bytes) fingerprints
// written as colon-separated hex pairs, as vCenter and govc print them.
var thumbprintRE = regexp.MustCompile(`^(?:[0-9A-Fa-f]{2}:){19}[0-9A-Fa-f]{2}$|^(?:[0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}$`)

// validHost accepts an IP address or an RFC 1123 host name, with
// underscores allowed (internal DNS zones have them, Go's resolver and the
// reference CCM accept them).
func validHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if len(k8svalidation.IsDNS1123Label(strings.ReplaceAll(strings.ToLower(label), "_", "x"))) != 0 {
			return false
		}
	}
	return true
}

// validate runs the struct rules (validator/v10) and the cross-field rules
// and records every problem with its field path.
func (b *builder) validate(cfg *Config) {
	v := newValidator()
	b.structRules(v, "global", cfg.Global)
	servers := map[string]string{}
	for _, vc := range cfg.VCenters {
		p := vcenterPath(vc.Name)
		b.structRules(v, p, vc)
		key := strings.ToLower(vc.Address())
		if other, dup := servers[key]; dup {
			b.errorf(p+".server", "vCenter %q has the same server and port (%s) as vCenter %q; describe each vCenter once", vc.Name, vc.Address(), other)
		} else {
			servers[key] = vc.Name
		}
	}
	b.structRules(v, "labels", cfg.Labels)
	b.structRules(v, "nodes", cfg.Nodes)
	for i, h := range cfg.HostGroupZones {
		b.structRules(v, fmt.Sprintf("hostGroupZones[%d]", i), h)
	}
}

func (b *builder) structRules(v *validator.Validate, prefix string, s any) {
	err := v.Struct(s)
	var verrs validator.ValidationErrors
	if err == nil || !errors.As(err, &verrs) {
		return
	}
	for _, fe := range verrs {
		// Namespace is "VCenter.port" or "Labels.additional[0].label": drop the type name.
		_, rest, _ := strings.Cut(fe.Namespace(), ".")
		path := prefix + "." + quoteMapKeys(rest)
		b.errorf(path, "%s", ruleMessage(fe))
	}
}

// quoteMapKeys writes map keys the way the decoder records positions:
// hostGroups[site-a] -> hostGroups["site-a"]; list indexes stay as they are.
func quoteMapKeys(path string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(path, '[')
		if open < 0 {
			b.WriteString(path)
			return b.String()
		}
		end := strings.IndexByte(path[open:], ']')
		if end < 0 {
			b.WriteString(path)
			return b.String()
		}
		key := path[open+1 : open+end]
		b.WriteString(path[:open])
		if _, err := strconv.Atoi(key); err == nil || strings.HasPrefix(key, `"`) {
			b.WriteString("[" + key + "]")
		} else {
			b.WriteString("[" + strconv.Quote(key) + "]")
		}
		path = path[open+end+1:]
	}
}

func ruleMessage(fe validator.FieldError) string {
	val := fe.Value()
	switch fe.Tag() {
	case "required":
		if fe.Field() == "server" {
			return "is required: the vCenter's host name or IP address"
		}
		if fe.Kind() == reflect.String {
			return "must not be empty"
		}
		return "is required"
	case "vchost":
		s := fmt.Sprint(val)
		switch {
		case strings.Contains(s, "://"):
			return fmt.Sprintf("%q is not a host name: write only the host, without the scheme (https://)", s)
		case strings.Count(s, ":") == 1:
			return fmt.Sprintf("%q is not a host name: put the port in the port field", s)
		}
		return fmt.Sprintf("%q is not a valid host name or IP address", s)
	case "endpointhost":
		return fmt.Sprintf("%q is not a host name or IP address: write the name or the address alone, without a scheme or port", val)
	case "dnsdomain":
		return fmt.Sprintf("%q is not a DNS domain: write it like example.com (letters, digits, '-' and '.', no wildcard)", val)
	case "thumbprint":
		return fmt.Sprintf("%q is not a certificate fingerprint: write the SHA-1 or SHA-256 fingerprint as colon-separated hex pairs (AB:CD:...)", val)
	case "labelvalue":
		return fmt.Sprintf("%q is not a valid label value: at most 63 characters, letters, digits, '-', '_' or '.', starting and ending with a letter or digit", val)
	case "labelkey":
		return fmt.Sprintf("%q is not a valid label key: write it like example.com/rack", val)
	case "oneof":
		return fmt.Sprintf("%q is not one of: %s", val, strings.ReplaceAll(fe.Param(), " ", ", "))
	case "unique":
		return "lists the same value twice"
	case "min", "max":
		return boundMessage(fe)
	}
	return fmt.Sprintf("fails rule %q", fe.Tag())
}

func boundMessage(fe validator.FieldError) string {
	word := "at least"
	if fe.Tag() == "max" {
		word = "at most"
	}
	switch fe.Kind() {
	case reflect.Slice, reflect.Map:
		return fmt.Sprintf("must list %s %s value(s)", word, fe.Param())
	}
	if fe.Type() == reflect.TypeFor[time.Duration]() {
		n, _ := strconv.ParseInt(fe.Param(), 10, 64)
		return fmt.Sprintf("%v must be %s %v", fe.Value(), word, time.Duration(n))
	}
	if fe.Field() == "port" {
		return fmt.Sprintf("%v is not a port: must be between 1 and 65535", fe.Value())
	}
	return fmt.Sprintf("%v must be %s %s", fe.Value(), word, fe.Param())
}
