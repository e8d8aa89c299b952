// Command recorded builds property-collector pages from SOAP answers that
// real vCenters gave, as recorded in public repositories, for the fast
// decoder's tests and fuzz corpus (pkg/collectorxml/testdata/recorded).
//
// Its source today is pyVmomi's test cassettes (vcrpy YAML, Apache 2.0):
// vCenter Server 8.0.3 answering Fetch, one VM property at a time. For
// each VM it takes the answers for the properties the inventory reads and
// puts each value, its bytes as the vCenter wrote them, into a
// WaitForUpdatesEx page (an "enter" of the VM) and a RetrievePropertiesEx
// page, under the property path the inventory asks for ("config.uuid" out
// of the recorded "config", with the xsi:type vCenter writes for that
// path's type). What is recorded is never edited; what the pages add is
// the envelope a property collector puts around values.
//
//	go run ./hack/recorded -cassettes <pyvmomi>/tests/fixtures -origin "vmware/pyvmomi@<commit>" \
//	    -out pkg/collectorxml/testdata/recorded
package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// cassette is the part of a vcrpy cassette read here.
type cassette struct {
	Interactions []struct {
		Request struct {
			Body string `json:"body"`
		} `json:"request"`
		Response struct {
			Body struct {
				String string `json:"string"`
			} `json:"body"`
		} `json:"response"`
	} `json:"interactions"`
}

var (
	fetchRE   = regexp.MustCompile(`<Fetch xmlns="urn:vim25"><_this[^>]*type="VirtualMachine">([^<]+)</_this><prop[^>]*>([^<]+)</prop>`)
	returnRE  = regexp.MustCompile(`(?s)<FetchResponse xmlns="urn:vim25">(<returnval[^>]*>.*</returnval>|<returnval[^>]*/>)</FetchResponse>`)
	versionRE = regexp.MustCompile(`<fullName>([^<]+)</fullName>`)
)

// value is one property's value as a property collector writes it: the
// xsi:type attribute (and a reference's type attribute) and the content.
type value struct {
	attrs   string
	content string
}

func main() {
	dir := flag.String("cassettes", "", "directory of vcrpy cassettes (pyVmomi's tests/fixtures)")
	origin := flag.String("origin", "", "where they come from, for SOURCES.md (repository@commit)")
	out := flag.String("out", "pkg/collectorxml/testdata/recorded", "output directory")
	flag.Parse()
	if *dir == "" || *origin == "" {
		fmt.Fprintln(os.Stderr, "recorded: -cassettes and -origin are required")
		os.Exit(2)
	}
	files, _ := filepath.Glob(filepath.Join(*dir, "*.yaml"))
	sort.Strings(files)
	var sources []string
	written := map[string]string{} // page -> the name it was written under
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		var c cassette
		if err := yaml.Unmarshal(b, &c); err != nil {
			continue // not a cassette, or bodies this reader does not take
		}
		server := ""
		props := map[string]map[string]string{} // VM -> property -> returnval element
		for _, it := range c.Interactions {
			if m := versionRE.FindStringSubmatch(it.Response.Body.String); m != nil && server == "" {
				server = m[1]
			}
			m := fetchRE.FindStringSubmatch(it.Request.Body)
			if m == nil {
				continue
			}
			r := returnRE.FindStringSubmatch(it.Response.Body.String)
			if r == nil {
				continue
			}
			if props[m[1]] == nil {
				props[m[1]] = map[string]string{}
			}
			props[m[1]][m[2]] = r[1]
		}
		base := strings.TrimSuffix(filepath.Base(f), ".yaml")
		for _, vm := range slices.Sorted(maps.Keys(props)) {
			vals := paths(props[vm])
			if len(vals) == 0 {
				continue
			}
			name := fmt.Sprintf("pyvmomi-%s-%s", base, vm)
			wait := page(waitPage(vm, vals))
			if same, ok := written[string(wait)]; ok {
				// Several cassettes recorded the same VM unchanged.
				sources = append(sources, fmt.Sprintf("| `%s-{wait,retrieve}.xml` (the same again) | `tests/fixtures/%s.yaml`, %s | %s | |", same, base, vm, server))
				continue
			}
			written[string(wait)] = name
			if err := os.WriteFile(filepath.Join(*out, name+"-wait.xml"), wait, 0o644); err != nil {
				fail(err)
			}
			if err := os.WriteFile(filepath.Join(*out, name+"-retrieve.xml"), page(retrievePage(vm, vals)), 0o644); err != nil {
				fail(err)
			}
			sources = append(sources, fmt.Sprintf("| `%s-{wait,retrieve}.xml` | `tests/fixtures/%s.yaml`, %s | %s | %s |",
				name, base, vm, server, strings.Join(slices.Sorted(maps.Keys(vals)), ", ")))
		}
	}
	var doc bytes.Buffer
	fmt.Fprintf(&doc, "# Recorded answers of real vCenters\n\n"+
		"Built by `go run ./hack/recorded` from %s (Apache License 2.0): the\n"+
		"answers a real vCenter gave to `Fetch` of a VM's properties, recorded by pyVmomi's tests.\n"+
		"Each value's bytes are the vCenter's; a page adds the envelope a property collector\n"+
		"writes around values (a WaitForUpdatesEx \"enter\", a RetrievePropertiesEx object) and\n"+
		"takes a path's value out of the recorded property (`config.uuid` out of `config`).\n\n"+
		"| Pages | Recorded in | Server | Properties |\n|---|---|---|---|\n", *origin)
	for _, s := range sources {
		doc.WriteString(s + "\n")
	}
	if err := os.WriteFile(filepath.Join(*out, "SOURCES.md"), doc.Bytes(), 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "recorded:", err)
	os.Exit(1)
}

// paths takes the inventory's property paths out of the recorded
// properties of one VM.
func paths(props map[string]string) map[string]value {
	out := map[string]value{}
	whole := func(prop string) {
		if rv, ok := props[prop]; ok {
			attrs, content := split(rv)
			out[prop] = value{attrs, content}
		}
	}
	whole("name")
	whole("parent")
	whole("resourcePool")
	field := func(prop, path, xsiType string, fields ...string) {
		rv, ok := props[prop]
		if !ok {
			return
		}
		_, content := split(rv)
		for _, f := range fields[:len(fields)-1] {
			if content, ok = child(content, f); !ok {
				return
			}
		}
		last := fields[len(fields)-1]
		el, ok := element(content, last)
		if !ok {
			return
		}
		attrs, inner := split(el)
		if !strings.Contains(attrs, "xsi:type") {
			attrs = strings.TrimSpace(attrs + ` xsi:type="` + xsiType + `"`)
		}
		out[path] = value{attrs, inner}
	}
	field("config", "config.uuid", "xsd:string", "uuid")
	field("config", "config.instanceUuid", "xsd:string", "instanceUuid")
	field("config", "config.guestId", "xsd:string", "guestId")
	field("config", "config.template", "xsd:boolean", "template")
	field("config", "config.hardware.numCPU", "xsd:int", "hardware", "numCPU")
	field("config", "config.hardware.memoryMB", "xsd:int", "hardware", "memoryMB")
	field("runtime", "runtime.powerState", "VirtualMachinePowerState", "powerState")
	field("runtime", "runtime.connectionState", "VirtualMachineConnectionState", "connectionState")
	field("runtime", "runtime.host", "ManagedObjectReference", "host")
	field("guest", "guest.hostName", "xsd:string", "hostName")
	// Keyed extraConfig entries, as the inventory asks for them
	// (config.extraConfig["key"]): the first few recorded.
	if rv, ok := props["config"]; ok {
		_, content := split(rv)
		for i, el := range elements(content, "extraConfig") {
			if i == 4 {
				break
			}
			_, inner := split(el)
			key, ok := child(inner, "key")
			if !ok {
				continue
			}
			out[`config.extraConfig["`+key+`"]`] = value{`xsi:type="OptionValue"`, inner}
		}
	}
	return out
}

// split returns an element's attributes and content.
func split(el string) (attrs, content string) {
	end := strings.IndexByte(el, '>')
	if end < 0 {
		return "", ""
	}
	open := el[1:end]
	if strings.HasSuffix(open, "/") {
		return strings.TrimSpace(strings.TrimSuffix(open[strings.IndexAny(open+" ", " /"):], "/")), ""
	}
	sp := strings.IndexByte(open, ' ')
	if sp >= 0 {
		attrs = strings.TrimSpace(open[sp:])
	}
	closeAt := strings.LastIndex(el, "</")
	if closeAt < end {
		return attrs, ""
	}
	return attrs, el[end+1 : closeAt]
}

// element returns the first child element named name of content (at the
// top level), whole.
func element(content, name string) (string, bool) {
	els := elements(content, name)
	if len(els) == 0 {
		return "", false
	}
	return els[0], true
}

// child returns the content of the first child element named name.
func child(content, name string) (string, bool) {
	el, ok := element(content, name)
	if !ok {
		return "", false
	}
	_, inner := split(el)
	return inner, true
}

// elements returns the top-level child elements of content named name.
func elements(content, name string) []string {
	var out []string
	depth, start := 0, -1
	for i := 0; i < len(content); {
		lt := strings.IndexByte(content[i:], '<')
		if lt < 0 {
			break
		}
		lt += i
		gt := strings.IndexByte(content[lt:], '>')
		if gt < 0 {
			break
		}
		gt += lt
		tag := content[lt+1 : gt]
		switch {
		case strings.HasPrefix(tag, "/"):
			depth--
			if depth == 0 && start >= 0 {
				out = append(out, content[start:gt+1])
				start = -1
			}
		case strings.HasSuffix(tag, "/"):
			if depth == 0 && tagName(tag) == name {
				out = append(out, content[lt:gt+1])
			}
		default:
			if depth == 0 && tagName(tag) == name {
				start = lt
			}
			depth++
		}
		i = gt + 1
	}
	return out
}

func tagName(tag string) string {
	tag = strings.TrimSuffix(tag, "/")
	if sp := strings.IndexByte(tag, ' '); sp >= 0 {
		return tag[:sp]
	}
	return tag
}

func page(body string) []byte {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/"
 xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"
 xmlns:xsd="http://www.w3.org/2001/XMLSchema"
 xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>
` + body + `
</soapenv:Body>
</soapenv:Envelope>
`)
}

func waitPage(vm string, vals map[string]value) string {
	var b strings.Builder
	b.WriteString(`<WaitForUpdatesExResponse xmlns="urn:vim25"><returnval><version>1</version><filterSet><filter type="PropertyFilter">session[00000000-0000-0000-0000-000000000000]00000000-0000-0000-0000-000000000001</filter><objectSet><kind>enter</kind><obj type="VirtualMachine">` + vm + `</obj>`)
	for _, p := range slices.Sorted(maps.Keys(vals)) {
		v := vals[p]
		fmt.Fprintf(&b, `<changeSet><name>%s</name><op>assign</op><val %s>%s</val></changeSet>`, p, v.attrs, v.content)
	}
	b.WriteString(`</objectSet></filterSet></returnval></WaitForUpdatesExResponse>`)
	return b.String()
}

func retrievePage(vm string, vals map[string]value) string {
	var b strings.Builder
	b.WriteString(`<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects><obj type="VirtualMachine">` + vm + `</obj>`)
	for _, p := range slices.Sorted(maps.Keys(vals)) {
		v := vals[p]
		fmt.Fprintf(&b, `<propSet><name>%s</name><val %s>%s</val></propSet>`, p, v.attrs, v.content)
	}
	b.WriteString(`</objects></returnval></RetrievePropertiesExResponse>`)
	return b.String()
}
