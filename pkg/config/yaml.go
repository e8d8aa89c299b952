package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// readYAML parses YAML into a tree. go.yaml.in/yaml/v3 is the parser
// sigs.k8s.io/yaml is built on; its node API keeps the line numbers that
// sigs.k8s.io/yaml's YAML-to-JSON conversion drops.
func readYAML(file string, data []byte) (*node, []Diagnostic) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, []Diagnostic{yamlSyntaxError(file, err)}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &node{kind: mappingNode, line: 1}, nil
	}
	c := &yamlConverter{file: file}
	root := c.convert(doc.Content[0], 0)
	diags := c.diags
	if root.kind == nullNode {
		return &node{kind: mappingNode, line: 1}, diags
	}
	if root.kind != mappingNode {
		diags = append(diags, Diagnostic{Pos: Position{File: file, Line: root.line},
			Message: fmt.Sprintf("the document must be a mapping with keys global, vcenter, labels, nodes; got %s", root.kind)})
		return nil, diags
	}
	return root, diags
}

var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// yamlQuotedRE matches what the YAML library quotes from the document in
// its messages (anchor names, scalars): never shown, it may be a secret.
var yamlQuotedRE = regexp.MustCompile("'[^']*'|\"[^\"]*\"|`[^`]*`")

func yamlSyntaxError(file string, err error) Diagnostic {
	d := Diagnostic{Pos: Position{File: file}}
	msg := err.Error()
	var te *yaml.TypeError
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil && !errors.As(err, &te) {
		if m[1] != "" {
			d.Pos.Line, _ = strconv.Atoi(m[1])
		}
		msg = m[2]
	}
	if redacted := yamlQuotedRE.ReplaceAllString(msg, "(…)"); redacted != msg {
		msg = redacted + " (quoted text not shown, in case it holds a secret)"
	}
	d.Message = "YAML syntax error: " + msg
	return d
}

// Limits that keep hostile input (deep nesting, alias bombs) cheap.
const (
	maxYAMLDepth = 64
	maxYAMLNodes = 100000
)

type yamlConverter struct {
	file  string
	diags []Diagnostic
	nodes int
}

func (c *yamlConverter) errorf(line int, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Pos: Position{File: c.file, Line: line}, Message: fmt.Sprintf(format, args...)})
}

func (c *yamlConverter) convert(y *yaml.Node, depth int) *node {
	c.nodes++
	if depth > maxYAMLDepth || c.nodes > maxYAMLNodes {
		if c.nodes == maxYAMLNodes+1 || depth == maxYAMLDepth+1 {
			c.errorf(y.Line, "YAML document too large or nested too deeply (limits: %d levels, %d values)", maxYAMLDepth, maxYAMLNodes)
		}
		return &node{kind: nullNode, line: y.Line}
	}
	for y.Kind == yaml.AliasNode && y.Alias != nil {
		y = y.Alias
	}
	n := &node{line: y.Line}
	switch y.Kind {
	case yaml.ScalarNode:
		if y.Tag == "!!null" {
			n.kind = nullNode
			return n
		}
		n.kind = scalarNode
		n.value = y.Value
	case yaml.MappingNode:
		n.kind = mappingNode
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, v := y.Content[i], y.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				c.errorf(k.Line, "mapping keys must be plain strings")
				continue
			}
			if k.Tag == "!!merge" {
				c.errorf(k.Line, "YAML merge keys (<<) are not supported; write the keys out")
				continue
			}
			n.entries = append(n.entries, entry{key: k.Value, line: k.Line, val: c.convert(v, depth+1)})
		}
	case yaml.SequenceNode:
		n.kind = sequenceNode
		for _, item := range y.Content {
			n.items = append(n.items, c.convert(item, depth+1))
		}
	default:
		n.kind = nullNode
	}
	return n
}
