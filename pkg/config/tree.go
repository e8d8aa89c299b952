package config

// tree is the format-neutral shape both readers produce: mappings with
// ordered keys, sequences and scalars, each with the line it starts on.
// The decoder turns a tree into a rawConfig.

type nodeKind int

const (
	scalarNode nodeKind = iota
	mappingNode
	sequenceNode
	nullNode
)

func (k nodeKind) String() string {
	switch k {
	case scalarNode:
		return "a single value"
	case mappingNode:
		return "a mapping"
	case sequenceNode:
		return "a list"
	default:
		return "empty"
	}
}

type node struct {
	kind    nodeKind
	line    int
	value   string  // scalarNode
	entries []entry // mappingNode, in file order
	items   []*node // sequenceNode
}

type entry struct {
	key  string
	line int
	val  *node
}
