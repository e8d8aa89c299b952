package config

import (
	"fmt"
	"sort"
	"strings"
)

// Position says where a value came from: a file and line, or an environment
// variable. The zero Position is "unknown".
type Position struct {
	// File is the file name as given to Parse or Load.
	File string
	// Line is 1-based; 0 when unknown or when the value came from Env.
	Line int
	// Env is the environment variable that supplied the value, if any.
	Env string
}

func (p Position) String() string {
	switch {
	case p.Env != "":
		return "$" + p.Env
	case p.Line > 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	default:
		return p.File
	}
}

// Diagnostic is one problem (or warning) about one field.
type Diagnostic struct {
	// Pos is where the offending value (or its section) is written.
	Pos Position
	// Field is the path in the YAML schema, for example vcenter["a"].port.
	// Empty for problems that concern the whole file.
	Field string
	// Key is the key as written in the file when it differs from the last
	// element of Field (INI kebab-case keys, misspelled keys).
	Key string
	// Message says what is wrong and what to do.
	Message string
}

// Error formats the diagnostic as "file:line: field (key): message".
func (d Diagnostic) Error() string {
	var b strings.Builder
	if s := d.Pos.String(); s != "" {
		b.WriteString(s)
		b.WriteString(": ")
	}
	if d.Field != "" {
		b.WriteString(d.Field)
		if d.Key != "" {
			fmt.Fprintf(&b, " (%s)", d.Key)
		}
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// Errors is every problem found in one config, sorted by position. It is
// returned as the error of Parse and Load; use errors.As to get at it.
type Errors []Diagnostic

func (e Errors) Error() string {
	lines := make([]string, 0, len(e)+1)
	if len(e) != 1 {
		lines = append(lines, fmt.Sprintf("%d problems in the cloud-config:", len(e)))
	}
	for _, d := range e {
		lines = append(lines, d.Error())
	}
	return strings.Join(lines, "\n")
}

// Fields returns the field path of every diagnostic, in order.
func (e Errors) Fields() []string {
	out := make([]string, len(e))
	for i, d := range e {
		out[i] = d.Field
	}
	return out
}

// sortDiagnostics orders by line (env and unknown positions last), then field.
func sortDiagnostics(ds []Diagnostic) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		ka, kb := posKey(a), posKey(b)
		if ka != kb {
			return ka < kb
		}
		return ds[i].Field < ds[j].Field
	})
}

func posKey(p Position) int {
	switch {
	case p.Env != "":
		return 1 << 30
	case p.Line == 0:
		return 1<<30 + 1
	default:
		return p.Line
	}
}
