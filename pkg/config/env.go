package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Environment overrides, compatible with the reference CCM's variable names.
// Values from the environment override the file. Unlike the reference:
// VSPHERE_VCENTER_PORT is the global port (never a vCenter named "PORT"),
// values containing "=" are kept whole, and a malformed value is an error
// naming the variable instead of being dropped.
//
// These tables are read-only.
var globalEnvKeys = map[string]string{
	"VSPHERE_VCENTER":           "server",
	"VSPHERE_VCENTER_PORT":      "port",
	"VSPHERE_USER":              "user",
	"VSPHERE_PASSWORD":          "password",
	"VSPHERE_INSECURE":          "insecureFlag",
	"VSPHERE_DATACENTER":        "datacenters",
	"VSPHERE_SECRET_NAME":       "secretName",
	"VSPHERE_SECRET_NAMESPACE":  "secretNamespace",
	"VSPHERE_SECRETS_DIRECTORY": "secretsDirectory",
	"VSPHERE_ROUNDTRIP_COUNT":   "soapRoundtripCount",
	"VSPHERE_CAFILE":            "caFile",
	"VSPHERE_THUMBPRINT":        "thumbprint",
	"VSPHERE_API_DISABLE":       "apiDisable",
	"VSPHERE_API_BINDING":       "apiBinding",
}

// nodesEnvKeys and labelsEnvKeys are the reference's overrides of the
// nodes and labels sections (its FromCPIEnv and FromEnv).
var (
	nodesEnvKeys = map[string]string{
		"VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR": "internalNetworkSubnetCidr",
		"VSPHERE_NODES_EXTERNAL_NETWORK_SUBNET_CIDR": "externalNetworkSubnetCidr",
		"VSPHERE_NODES_INTERNAL_VM_NETWORK_NAME":     "internalVmNetworkName",
		"VSPHERE_NODES_EXTERNAL_VM_NETWORK_NAME":     "externalVmNetworkName",
	}
	labelsEnvKeys = map[string]string{
		"VSPHERE_LABEL_REGION": "region",
		"VSPHERE_LABEL_ZONE":   "zone",
	}
)

// nsxtEnvKeys are the reference's variables of its NSX-T connection
// (pkg/nsxt/config FromEnv): warned about, never used.
var nsxtEnvKeys = []string{"NSXT_MANAGER_HOST", "NSXT_USERNAME", "NSXT_PASSWORD", "NSXT_ALLOW_UNVERIFIED_SSL",
	"NSXT_CLIENT_AUTH_CERT_FILE", "NSXT_CLIENT_AUTH_KEY_FILE", "NSXT_CA_FILE", "NSXT_SECRET_NAME", "NSXT_SECRET_NAMESPACE"}

// vcenterEnvSuffixes maps VCENTER_<id>_<SUFFIX> to a vCenter key; the vCenter
// itself is declared by VSPHERE_VCENTER_<id>=<server>.
var vcenterEnvSuffixes = map[string]string{
	"USERNAME":         "user",
	"PASSWORD":         "password",
	"PORT":             "port",
	"INSECURE":         "insecureFlag",
	"DATACENTERS":      "datacenters",
	"ROUNDTRIP":        "soapRoundtripCount",
	"CAFILE":           "caFile",
	"THUMBPRINT":       "thumbprint",
	"SECRET_NAME":      "secretName",
	"SECRET_NAMESPACE": "secretNamespace",
	"IP_FAMILY":        "ipFamily",
}

// referenceIgnored are the VCENTER_<id>_ suffixes the reference reads
// only when they are absent (an inverted error check in its FromEnv), so
// that a value set never took effect there.
var referenceIgnored = map[string]bool{"INSECURE": true, "ROUNDTRIP": true, "IP_FAMILY": true}

// applyEnv applies environment overrides (KEY=VALUE strings as os.Environ
// returns them) to raw. Problems are recorded in d, naming the variable.
func applyEnv(d *decoder, raw *rawConfig, environ []string, warn func(Diagnostic)) {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=") // split at the first "=" only: values keep theirs
		if ok && v != "" {
			env[k] = v
		}
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)

	envDecoder := newDecoder(FormatYAML, d.file)
	set := func(path string, target reflect.Value, envName, key string) {
		envDecoder.env = envName
		envDecoder.decodeStruct(path, &node{kind: mappingNode, entries: []entry{{key: key, val: &node{kind: scalarNode, value: env[envName]}}}}, target)
	}

	for _, name := range names {
		if key, ok := globalEnvKeys[name]; ok {
			if raw.Global == nil {
				raw.Global = &rawGlobal{}
			}
			set("global", reflect.ValueOf(raw.Global).Elem(), name, key)
		}
		if key, ok := nodesEnvKeys[name]; ok {
			if raw.Nodes == nil {
				raw.Nodes = &rawNodes{}
			}
			set("nodes", reflect.ValueOf(raw.Nodes).Elem(), name, key)
		}
		if key, ok := labelsEnvKeys[name]; ok {
			if raw.Labels == nil {
				raw.Labels = &rawLabels{}
			}
			set("labels", reflect.ValueOf(raw.Labels).Elem(), name, key)
		}
	}
	declared := map[string]bool{}
	for _, name := range names {
		id, ok := strings.CutPrefix(name, "VSPHERE_VCENTER_")
		if !ok || id == "PORT" || id == "" {
			continue
		}
		declared[id] = true
		server := env[name]
		vcName := server
		serverVar := name
		if s := env["VCENTER_"+id+"_SERVER"]; s != "" {
			// The reference: with a server, the declared value is the
			// vCenter's name (its tenant reference).
			server, serverVar = s, "VCENTER_"+id+"_SERVER"
		}
		for n, vc := range raw.VCenter {
			if n == vcName || (vc != nil && deref(vc.Server) == server && serverVar == name) {
				vcName = n
			}
		}
		if raw.VCenter == nil {
			raw.VCenter = map[string]*rawVCenter{}
		}
		if raw.VCenter[vcName] == nil {
			raw.VCenter[vcName] = &rawVCenter{}
		}
		target := reflect.ValueOf(raw.VCenter[vcName]).Elem()
		path := vcenterPath(vcName)
		set(path, target, serverVar, "server")
		for suffix, key := range vcenterEnvSuffixes {
			if v := "VCENTER_" + id + "_" + suffix; env[v] != "" {
				set(path, target, v, key)
				if referenceIgnored[suffix] {
					warn(Diagnostic{Pos: Position{Env: v}, Field: path + "." + key, Message: "read here; the reference CCM ignored this variable (a slip in its code kept insecureFlag false, 3 round trips and ipv4): check the value before switching"})
				}
			}
		}
	}
	for _, name := range names {
		if slices.Contains(nsxtEnvKeys, name) {
			warn(Diagnostic{Pos: Position{Env: name}, Message: "read by the reference CCM for its NSX-T connection (its load balancer and routes), which this CCM does not use: ignored"})
		}
	}
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, "VCENTER_")
		if !ok {
			continue
		}
		for _, suffix := range append(slices.Collect(maps.Keys(vcenterEnvSuffixes)), "SERVER") {
			if id, ok := strings.CutSuffix(rest, "_"+suffix); ok && !declared[id] {
				warn(Diagnostic{Pos: Position{Env: name}, Message: fmt.Sprintf("ignored: no VSPHERE_VCENTER_%s declares the vCenter it belongs to", id)})
			}
		}
	}
	for k, v := range envDecoder.pos {
		d.pos[k] = v
	}
	d.diags = append(d.diags, envDecoder.diags...)
}

// SkipNodeDeletionEnv is the reference CCM's switch that keeps every Node
// whose VM is gone: set to any value, even empty or "false" (the reference
// only looks whether it is set).
const SkipNodeDeletionEnv = "SKIP_NODE_DELETION"

func skipNodeDeletion(environ []string) bool {
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); k == SkipNodeDeletionEnv {
			return true
		}
	}
	return false
}
