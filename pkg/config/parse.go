package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Options tunes Parse and Load.
type Options struct {
	// Env is the environment as os.Environ returns it, for the reference
	// CCM's VSPHERE_* overrides. Nil: no overrides. The package never reads
	// the process environment itself.
	Env []string
}

// Load reads and parses the cloud-config file at path. See Parse.
func Load(path string, opts Options) (*Config, []Diagnostic, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read cloud-config: %w", err)
	}
	return Parse(path, data, opts)
}

// Parse reads a cloud-config in either format (see DetectFormat), applies
// environment overrides and defaults, and validates it.
//
// It returns the Config, the warnings (ignored legacy sections, deprecated or
// vestigial keys, disabled TLS verification), and, when anything is wrong,
// an error of type Errors listing every problem; the Config is nil then.
// file is used only in messages.
func Parse(file string, data []byte, opts Options) (*Config, []Diagnostic, error) {
	if !utf8.Valid(data) {
		line := 1 + bytes.Count(data[:firstInvalidUTF8(data)], []byte("\n"))
		return nil, nil, Errors{{Pos: Position{File: file, Line: line}, Message: "the file is not valid UTF-8; save it as UTF-8 text"}}
	}
	format := DetectFormat(data)
	var (
		tree     *node
		diags    []Diagnostic
		warnings []Diagnostic
	)
	switch format {
	case FormatINI:
		tree, diags, warnings = readINI(file, data)
	default:
		tree, diags = readYAML(file, data)
	}
	d := newDecoder(format, file)
	d.diags = diags
	if tree == nil {
		return nil, warnings, finish(d.diags)
	}
	raw := &rawConfig{}
	d.decodeStruct("", tree, reflect.ValueOf(raw).Elem())
	applyEnv(d, raw, opts.Env, func(w Diagnostic) { warnings = append(warnings, w) })

	b := newBuilder(d)
	cfg := b.build(raw)
	cfg.Nodes.SkipNodeDeletion = skipNodeDeletion(opts.Env)
	b.validate(cfg)
	warnings = append(warnings, d.warnings...)
	warnings = append(warnings, b.warnings...)
	errs, lenient := lenientNSXT(d.diags)
	warnings = append(warnings, lenient...)
	sortDiagnostics(warnings)
	if err := finish(errs); err != nil {
		return nil, warnings, err
	}
	return cfg, warnings, nil
}

func firstInvalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(data)
}

func finish(diags []Diagnostic) error {
	if len(diags) == 0 {
		return nil
	}
	sortDiagnostics(diags)
	return Errors(diags)
}

// DetectFormat tells INI from YAML without trying both: a file whose first
// line that is neither blank nor a comment starts with "[" (a section
// header) or ";" (an INI comment) is INI; anything else is YAML.
func DetectFormat(data []byte) Format {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(line, "\ufeff"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line[0] == '[' || line[0] == ';' {
			return FormatINI
		}
		return FormatYAML
	}
	return FormatYAML
}

// AsErrors returns the Errors inside err, if any.
func AsErrors(err error) (Errors, bool) {
	var e Errors
	ok := errors.As(err, &e)
	return e, ok
}
