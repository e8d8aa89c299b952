package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// decoder fills a rawConfig from a tree, driven by the yaml/ini struct tags of
// the raw types. It never stops at the first problem: every unknown key and
// every value of the wrong type becomes a Diagnostic.
type decoder struct {
	format Format
	file   string
	diags  []Diagnostic
	// warnings are what the reference CCM reads silently and this one
	// reads the same way, saying so: legacy keys, empty list elements.
	warnings []Diagnostic
	// pos records where each field path was written, for later diagnostics.
	pos map[string]Position
	// written records the key as written when it differs from the path's last element.
	written map[string]string
	// env, when set, is the environment variable being decoded: positions
	// name it instead of a file line.
	env string
}

func (d *decoder) at(line int) Position {
	if d.env != "" {
		return Position{Env: d.env}
	}
	return Position{File: d.file, Line: line}
}

func newDecoder(format Format, file string) *decoder {
	return &decoder{format: format, file: file, pos: map[string]Position{}, written: map[string]string{}}
}

func (d *decoder) errorf(line int, field, key, format string, args ...any) {
	d.diags = append(d.diags, Diagnostic{
		Pos:     d.at(line),
		Field:   field,
		Key:     key,
		Message: fmt.Sprintf(format, args...),
	})
}

func (d *decoder) warnf(line int, field, key, format string, args ...any) {
	d.warnings = append(d.warnings, Diagnostic{
		Pos:     d.at(line),
		Field:   field,
		Key:     key,
		Message: fmt.Sprintf(format, args...),
	})
}

// schemaField is one key of a raw struct as seen by one format.
type schemaField struct {
	yamlName string
	iniName  string // "-" when the key exists only in YAML
	index    []int
}

// fieldsOf lists the keys of a raw struct type, flattening embedded structs.
func fieldsOf(t reflect.Type) []schemaField {
	var out []schemaField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			for _, sub := range fieldsOf(f.Type) {
				sub.index = append([]int{i}, sub.index...)
				out = append(out, sub)
			}
			continue
		}
		out = append(out, schemaField{yamlName: f.Tag.Get("yaml"), iniName: f.Tag.Get("ini"), index: []int{i}})
	}
	return out
}

func (f schemaField) name(format Format) string {
	if format == FormatINI {
		return f.iniName
	}
	return f.yamlName
}

// pathName is the field's name in diagnostics' field paths: its YAML key,
// or its INI key for a field only INI has.
func (f schemaField) pathName() string {
	if f.yamlName == "-" {
		return f.iniName
	}
	return f.yamlName
}

func (f schemaField) matches(format Format, key string) bool {
	if format == FormatINI {
		return f.iniName != "-" && strings.EqualFold(f.iniName, key)
	}
	return f.yamlName != "-" && f.yamlName == key
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func (d *decoder) decodeStruct(path string, n *node, v reflect.Value) {
	fields := fieldsOf(v.Type())
	seen := map[string]int{}
	for _, e := range n.entries {
		var field *schemaField
		for i := range fields {
			if fields[i].matches(d.format, e.key) {
				field = &fields[i]
				break
			}
		}
		if field == nil {
			d.unknownKey(path, e, fields)
			continue
		}
		fpath := joinPath(path, field.pathName())
		if first, dup := seen[fpath]; dup {
			d.errorf(e.line, fpath, e.key, "duplicate key (first set at line %d); remove one of them", first)
			continue
		}
		seen[fpath] = e.line
		d.pos[fpath] = d.at(e.line)
		if e.key != field.pathName() {
			d.written[fpath] = e.key
		}
		d.decodeValue(fpath, e, v.FieldByIndex(field.index))
	}
}

func (d *decoder) unknownKey(path string, e entry, fields []schemaField) {
	where := "at the top level"
	if path != "" {
		where = "in " + path
	}
	if why, ok := legacyKey(d.format, path, e.key, fields); ok {
		// Defined by the in-tree provider or the reference (which ignores
		// every key it does not know): read the same way, with a warning.
		d.warnf(e.line, joinPath(path, e.key), "", "%s", why)
		return
	}
	hint, echo := suggest(d.format, e.key, fields)
	if !echo && showableKey(e) {
		// A key written with a value: its name is a key, not a secret.
		echo = true
	}
	if hint == "" {
		var names []string
		for _, f := range fields {
			if n := f.name(d.format); n != "-" {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		hint = "valid keys: " + strings.Join(names, ", ")
	}
	if echo {
		d.errorf(e.line, joinPath(path, e.key), "", "unknown key %q %s; %s", e.key, where, hint)
		return
	}
	// Not shown: a key written without a value may be a password pasted on
	// its own line, a name like one may hold a glued secret.
	d.errorf(e.line, path, "", "unknown key %s (its name is not shown, in case the line holds a secret); %s", where, hint)
}

// showableKey tells whether an unknown key's name may appear in an error:
// only when it was written with a value (name = value, name: value), so
// that it is a name and not a stray value, and when it does not look like
// the name of a secret (a password glued to its key).
func showableKey(e entry) bool {
	if e.val == nil || e.val.kind == nullNode {
		return false
	}
	k := normalizeKey(e.key)
	for _, s := range []string{"pass", "pwd", "secret", "token", "credential", "private"} {
		if strings.Contains(k, s) {
			return false
		}
	}
	return levenshtein(k, "password") > 3
}

var (
	typeString   = reflect.TypeFor[string]()
	typeInt      = reflect.TypeFor[int]()
	typeBool     = reflect.TypeFor[bool]()
	typeDuration = reflect.TypeFor[time.Duration]()
	typeList     = reflect.TypeFor[[]string]()
	typeSecret   = reflect.TypeFor[secret.Value]()
)

// decodeValue stores e.val into v, a field of a raw struct.
func (d *decoder) decodeValue(path string, e entry, v reflect.Value) {
	n := e.val
	key := d.written[path]
	t := v.Type()
	switch {
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && t.Elem() != typeSecret:
		if n.kind == nullNode {
			return
		}
		if n.kind != mappingNode {
			d.errorf(n.line, path, key, "expected a mapping of keys, got %s", n.kind)
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decodeStruct(path, n, v.Elem())
	case t.Kind() == reflect.Map:
		// Names to sections (map[string]*struct), or names to single values
		// (map[string]*string).
		leaf := t.Elem().Elem().Kind() != reflect.Struct
		if n.kind == nullNode {
			return
		}
		if n.kind != mappingNode {
			what := "settings"
			if leaf {
				what = "values"
			}
			d.errorf(n.line, path, key, "expected a mapping of names to %s, got %s", what, n.kind)
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(t))
		}
		for _, sub := range n.entries {
			if r, bad := controlRune(sub.key); bad {
				// Neither the name nor the character is shown: code point only.
				d.errorf(sub.line, path, "", "a name contains the control character %U; remove it", r)
				continue
			}
			spath := fmt.Sprintf("%s[%q]", path, sub.key)
			if leaf {
				d.decodeMapValue(spath, sub, v)
			} else {
				d.decodeMapSection(spath, sub, v)
			}
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		if n.kind == nullNode {
			return
		}
		if n.kind != sequenceNode {
			d.errorf(n.line, path, key, "expected a list, got %s", n.kind)
			return
		}
		out := reflect.MakeSlice(t, len(n.items), len(n.items))
		for i, item := range n.items {
			ipath := fmt.Sprintf("%s[%d]", path, i)
			d.pos[ipath] = d.at(item.line)
			if item.kind != mappingNode {
				d.errorf(item.line, ipath, "", "expected a mapping of keys, got %s", item.kind)
				continue
			}
			d.decodeStruct(ipath, item, out.Index(i))
		}
		v.Set(out)
	case t.Kind() == reflect.Pointer:
		d.decodeLeaf(path, key, n, v)
	default:
		panic(fmt.Sprintf("config: raw field %s has unsupported type %s", path, t))
	}
}

// decodeMapValue stores one name: value entry of a map of single values.
// A name given twice is an error.
func (d *decoder) decodeMapValue(spath string, sub entry, m reflect.Value) {
	if m.MapIndex(reflect.ValueOf(sub.key)).IsValid() {
		d.errorf(sub.line, spath, "", "duplicate name (first set at line %d); remove one of them", d.pos[spath].Line)
		return
	}
	d.pos[spath] = d.at(sub.line)
	elem := reflect.New(m.Type().Elem()).Elem()
	d.decodeLeaf(spath, "", sub.val, elem)
	m.SetMapIndex(reflect.ValueOf(sub.key), elem)
}

// decodeMapSection decodes one name: {keys} entry of a map of sections. A
// name given twice is merged (gcfg: a repeated section is merged).
func (d *decoder) decodeMapSection(spath string, sub entry, m reflect.Value) {
	if sub.val.kind != mappingNode && sub.val.kind != nullNode {
		d.errorf(sub.line, spath, "", "expected a mapping of keys, got %s", sub.val.kind)
		return
	}
	elem := m.MapIndex(reflect.ValueOf(sub.key))
	if !elem.IsValid() {
		elem = reflect.New(m.Type().Elem().Elem())
		m.SetMapIndex(reflect.ValueOf(sub.key), elem)
	}
	d.pos[spath] = d.at(sub.line)
	if sub.val.kind == mappingNode {
		d.decodeStruct(spath, sub.val, elem.Elem())
	}
}

// decodeLeaf parses a scalar (or, for lists, a sequence) into a pointer field.
func (d *decoder) decodeLeaf(path, key string, n *node, v reflect.Value) {
	elem := v.Type().Elem()
	if n.kind == nullNode {
		if elem == typeBool && d.format == FormatINI {
			// gcfg: a boolean variable written without "=" is true.
			v.Set(reflect.ValueOf(new(true)))
		}
		return
	}
	value := n.value
	if pemKeys[lastElement(path)] && strings.Contains(value, "-----BEGIN") {
		// A PEM certificate or key spans lines (a password does not).
		value = strings.NewReplacer("\n", "", "\r", "").Replace(value)
	}
	if r, bad := controlRune(value); bad && n.kind == scalarNode {
		// Never echo the value: it may be a password.
		d.errorf(n.line, path, key, "the value contains the control character %U; remove it", r)
		return
	}
	if elem == typeList {
		list, ok := d.list(path, key, n)
		if ok {
			v.Set(reflect.ValueOf(&list))
		}
		return
	}
	if n.kind != scalarNode {
		d.errorf(n.line, path, key, "expected a single value, got %s", n.kind)
		return
	}
	s := strings.TrimSpace(n.value)
	var val any
	switch elem {
	case typeString:
		val = n.value
	case typeSecret:
		val = secret.New(n.value)
	case typeInt:
		i, err := strconv.Atoi(s)
		if err != nil {
			d.errorf(n.line, path, key, "%q is not a whole number", s)
			return
		}
		val = i
	case typeBool:
		b, ok := parseBool(s)
		if !ok {
			d.errorf(n.line, path, key, "%q is not a boolean; use true or false", s)
			return
		}
		val = b
	case typeDuration:
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.errorf(n.line, path, key, "%q is not a duration; write it like 90s, 5m or 1h30m", s)
			return
		}
		val = dur
	default:
		panic(fmt.Sprintf("config: raw field %s has unsupported type %s", path, elem))
	}
	p := reflect.New(elem)
	p.Elem().Set(reflect.ValueOf(val))
	v.Set(p)
}

// list accepts a YAML sequence of single values or a comma-separated string
// (the reference's format, and the only one INI has).
func (d *decoder) list(path, key string, n *node) ([]string, bool) {
	switch n.kind {
	case sequenceNode:
		out := make([]string, 0, len(n.items))
		for i, item := range n.items {
			if item.kind != scalarNode {
				d.errorf(item.line, fmt.Sprintf("%s[%d]", path, i), key, "expected a single value, got %s", item.kind)
				return nil, false
			}
			if r, bad := controlRune(item.value); bad {
				d.errorf(item.line, fmt.Sprintf("%s[%d]", path, i), key, "the value contains the control character %U; remove it", r)
				return nil, false
			}
			out = append(out, strings.TrimSpace(item.value))
		}
		return out, true
	case scalarNode:
		if strings.TrimSpace(n.value) == "" {
			return []string{}, true
		}
		var parts []string
		empty := 0
		for _, p := range strings.Split(n.value, ",") {
			if p = strings.TrimSpace(p); p == "" {
				empty++
				continue
			}
			parts = append(parts, p)
		}
		if empty > 0 {
			// "ipv4, " is valid to the reference, which skips empty
			// elements: so does this CCM, saying so.
			d.warnf(n.line, path, key, "empty element in the comma-separated list ignored (a trailing or doubled comma); remove the extra comma")
		}
		if parts == nil {
			parts = []string{}
		}
		return parts, true
	default:
		d.errorf(n.line, path, key, "expected a list or a comma-separated string, got %s", n.kind)
		return nil, false
	}
}

// controlRune returns the first control character of s (tab included:
// no field may contain one), which a YAML document cannot carry and no
// vSphere name or credential uses.
// pemKeys are the keys whose values may be PEM (several lines): a
// solution user's certificate (user, certificate) and its key (password,
// privateKey).
var pemKeys = map[string]bool{"user": true, "password": true, "certificate": true, "privateKey": true, "private-key": true}

// lastElement is the last element of a field path: vcenter["a"].user -> user.
func lastElement(path string) string {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[i+1:]
	}
	return path
}

func controlRune(s string) (rune, bool) {
	for _, r := range s {
		if unicode.IsControl(r) {
			return r, true
		}
	}
	return 0, false
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "on", "1":
		return true, true
	case "false", "no", "off", "0":
		return false, true
	}
	return false, false
}
