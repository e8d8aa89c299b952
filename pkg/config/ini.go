package config

import (
	"fmt"
	"strings"
)

// The in-tree provider's sections, accepted in old files and ignored.
var iniIgnoredSections = map[string]bool{"workspace": true, "disk": true, "network": true}

// iniSectionsWithName are the sections written [Section "name"].
var iniSectionsWithName = map[string]bool{"virtualcenter": true, "loadbalancerclass": true}

// readINI parses a gcfg-style INI file into a tree:
//
//	[Global]                -> global: {...}
//	[VirtualCenter "name"]  -> vcenter: {name: {...}}
//
// Rules follow gcfg (and git-config): section and key names are
// case-insensitive; ';' and '#' start comments outside double quotes; values
// are trimmed; double quotes group text and allow \" \\ \n \t \b escapes; a
// trailing backslash continues the value on the next line; a key written
// without '=' is a boolean true. A section repeated is merged; a key repeated
// within one section (or one vCenter) is reported by the decoder.
func readINI(file string, data []byte) (*node, []Diagnostic, []Diagnostic) {
	var diags, warnings []Diagnostic
	errorf := func(line int, format string, args ...any) {
		diags = append(diags, Diagnostic{Pos: Position{File: file, Line: line}, Message: fmt.Sprintf(format, args...)})
	}
	// sectionErrorf names the section's field, for the NSX-T sections
	// whose problems are warnings (lenientNSXT).
	sectionErrorf := func(line int, lname, format string, args ...any) {
		field := map[string]string{"loadbalancer": "loadBalancer", "loadbalancerclass": "loadBalancerClass", "route": "route", "nsxt": "nsxt"}[lname]
		diags = append(diags, Diagnostic{Pos: Position{File: file, Line: line}, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	root := &node{kind: mappingNode, line: 1}
	sections := map[string]*node{} // lower-case section (+ "\x00" + name) -> mapping of keys
	var current *node              // nil before the first section or inside an ignored one
	inIgnored := false
	type named struct {
		vc   *node
		name string
		line int
	}
	var vcenters []named

	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimSpace(lines[i])
		// Line continuation: a value ending in an unescaped backslash.
		for strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimSpace(lines[i])
		}
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			name, sub, hasSub, err := parseINISection(line)
			if err != "" {
				errorf(lineNo, "%s", err)
				current, inIgnored = nil, true
				continue
			}
			lname := strings.ToLower(name)
			if iniIgnoredSections[lname] {
				warnings = append(warnings, Diagnostic{Pos: Position{File: file, Line: lineNo},
					Message: fmt.Sprintf("section [%s] belongs to the in-tree vSphere provider and is ignored by this CCM; remove it when convenient", name)})
				current, inIgnored = nil, true
				continue
			}
			inIgnored = false
			switch {
			case iniSectionsWithName[lname] && !hasSub:
				example := "vcenter.example.com"
				if lname == "loadbalancerclass" {
					example = "public"
				}
				sectionErrorf(lineNo, lname, "section [%s] needs a name: [%s \"%s\"]", name, name, example)
				current, inIgnored = nil, true
				continue
			case !iniSectionsWithName[lname] && hasSub:
				sectionErrorf(lineNo, lname, "section [%s] takes no name; write [%s]", name, name)
				current, inIgnored = nil, true
				continue
			}
			key := lname
			if hasSub {
				key += "\x00" + sub
			}
			if m, ok := sections[key]; ok {
				current = m
				continue
			}
			current = &node{kind: mappingNode, line: lineNo}
			sections[key] = current
			if hasSub {
				parent := sections[lname]
				if parent == nil {
					parent = &node{kind: mappingNode, line: lineNo}
					sections[lname] = parent
					root.entries = append(root.entries, entry{key: name, line: lineNo, val: parent})
				}
				parent.entries = append(parent.entries, entry{key: sub, line: lineNo, val: current})
				if lname == "virtualcenter" {
					vcenters = append(vcenters, named{vc: current, name: sub, line: lineNo})
				}
			} else {
				root.entries = append(root.entries, entry{key: name, line: lineNo, val: current})
			}
			continue
		}
		if inIgnored {
			continue
		}
		if current == nil {
			errorf(lineNo, "key outside any section; start the file with [Global]")
			inIgnored = true
			continue
		}
		name, value, hasValue, err := parseINIVariable(line)
		if err != "" {
			errorf(lineNo, "%s", err)
			continue
		}
		val := &node{kind: nullNode, line: lineNo}
		if hasValue {
			val = &node{kind: scalarNode, line: lineNo, value: value}
		}
		current.entries = append(current.entries, entry{key: name, line: lineNo, val: val})
	}
	for _, v := range vcenters {
		// Without a server key, the section name is the server (the gcfg-era rule).
		addDefaultServer(v.vc, v.name, v.line)
	}
	return root, diags, warnings
}

func addDefaultServer(vc *node, name string, line int) {
	for _, e := range vc.entries {
		if strings.EqualFold(e.key, "server") {
			return
		}
	}
	vc.entries = append(vc.entries, entry{key: "server", line: line, val: &node{kind: scalarNode, line: line, value: name}})
}

func isININameChar(r byte) bool {
	return r == '-' || r == '.' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

// parseINISection parses `[name]` or `[name "sub"]` (comments may follow).
func parseINISection(line string) (name, sub string, hasSub bool, errMsg string) {
	i := 1
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	start := i
	for i < len(line) && isININameChar(line[i]) {
		i++
	}
	name = line[start:i]
	if name == "" {
		return "", "", false, "invalid section header: expected [Name] or [Name \"subname\"]"
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	if i < len(line) && line[i] == '"' {
		var b strings.Builder
		i++
		for ; i < len(line) && line[i] != '"'; i++ {
			if line[i] == '\\' && i+1 < len(line) {
				i++
			}
			b.WriteByte(line[i])
		}
		if i >= len(line) {
			return "", "", false, "invalid section header: unterminated quoted name"
		}
		i++
		sub, hasSub = b.String(), true
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	if i >= len(line) || line[i] != ']' {
		return "", "", false, "invalid section header: expected ']'"
	}
	rest := strings.TrimSpace(line[i+1:])
	if rest != "" && rest[0] != ';' && rest[0] != '#' {
		return "", "", false, "unexpected text after the section header (not shown, in case it holds a secret); remove it or start it with ; or #"
	}
	return name, sub, hasSub, ""
}

// parseINIVariable parses `name`, `name =` or `name = value ; comment`.
func parseINIVariable(line string) (name, value string, hasValue bool, errMsg string) {
	i := 0
	for i < len(line) && isININameChar(line[i]) {
		i++
	}
	name = line[:i]
	if name == "" || !(name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z') {
		return "", "", false, "invalid line (not shown, in case it holds a secret): expected name = value, with a name that starts with a letter and has only letters, digits, - and _"
	}
	rest := strings.TrimLeft(line[i:], " \t")
	if rest == "" || rest[0] == ';' || rest[0] == '#' {
		return name, "", false, ""
	}
	if rest[0] != '=' {
		return "", "", false, "invalid line: expected '=' after the name (the line is not shown, in case it holds a secret)"
	}
	value, err := unquoteINIValue(strings.TrimSpace(rest[1:]))
	if err != "" {
		return "", "", false, "the value on this line: " + err + " (the line is not shown, in case it holds a secret)"
	}
	return name, value, true, ""
}

// unquoteINIValue applies gcfg's value rules: quotes group, escapes inside
// and outside quotes, comments end the value outside quotes, trailing
// unquoted whitespace is dropped.
func unquoteINIValue(s string) (string, string) {
	var b strings.Builder
	quoted := false
	trailing := 0 // unquoted whitespace at the end of b, trimmed at the end
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			quoted = !quoted
			trailing = 0
			continue
		case c == '\\':
			if i+1 >= len(s) {
				return "", "a backslash at the end of the value escapes nothing"
			}
			i++
			switch s[i] {
			case '"', '\\':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			default:
				return "", fmt.Sprintf(`unknown escape sequence at character %d of the value (only \", \\, \n, \t and \b are escapes; use \\ for a backslash)`, i)
			}
			trailing = 0
			continue
		case !quoted && (c == ';' || c == '#'):
			i = len(s)
			continue
		case !quoted && (c == ' ' || c == '\t'):
			trailing++
		default:
			trailing = 0
		}
		b.WriteByte(c)
	}
	if quoted {
		return "", "unterminated double quote"
	}
	out := b.String()
	return out[:len(out)-trailing], ""
}
