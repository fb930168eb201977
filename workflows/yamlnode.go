package workflows

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// node is a YAML value with its position. The decoder works on these rather
// than on goccy's AST so that anchors, aliases, merge keys and tags are
// resolved in one place and every later check sees plain mappings, lists
// and scalars.
type node struct {
	kind nodeKind
	pos  pos

	value any // scalars: string, int, float64, bool or nil

	keys []*node // mappings: the key nodes (string scalars), in file order
	vals []*node // mappings: the values, parallel to keys

	items []*node // sequences

	// bad marks a stand-in for a value that could not be read, reported
	// already: the decoder says nothing more about it.
	bad bool

	// keyCol is, for a scalar that is a mapping value, its key's column:
	// the lines of a block or folded scalar are indented deeper than it.
	keyCol int

	// size counts the nodes below and including this one, aliases
	// expanded, to refuse "billion laughs" files before anything walks them.
	size int
}

type nodeKind int

const (
	scalarNode nodeKind = iota
	mappingNode
	sequenceNode
)

// maxNodes bounds the expanded size of a file. A 200-step workflow has a
// few thousand nodes; the bound only stops alias bombs.
const maxNodes = 100_000

// str returns the value of a string scalar.
func (n *node) str() (string, bool) {
	if n == nil || n.kind != scalarNode {
		return "", false
	}
	s, ok := n.value.(string)
	return s, ok
}

func (n *node) isNull() bool { return n == nil || (n.kind == scalarNode && n.value == nil) }

// get returns the value under key in a mapping.
func (n *node) get(key string) *node {
	for i, k := range n.keys {
		if k.value == key {
			return n.vals[i]
		}
	}
	return nil
}

// follow walks path down from n through mappings and lists (a list's
// element by its index, "0", "1", …), as far as the keys exist, and
// returns the node it reached and how many keys it followed.
func follow(n *node, path []string) (*node, int) {
	depth := 0
	for _, key := range path {
		var v *node
		switch n.kind {
		case mappingNode:
			v = n.get(key)
		case sequenceNode:
			if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(n.items) && strconv.Itoa(i) == key {
				v = n.items[i]
			}
		}
		if v == nil {
			break
		}
		n = v
		depth++
	}
	return n, depth
}

// describe names what the node is, for "want X, got Y" messages.
func (n *node) describe() string {
	switch {
	case n == nil:
		return "nothing"
	case n.kind == mappingNode:
		return "a mapping"
	case n.kind == sequenceNode:
		return "a list"
	}
	switch v := n.value.(type) {
	case nil:
		return "nothing (null)"
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %t", v)
	case int:
		return fmt.Sprintf("the number %d", v)
	case float64:
		return "the number " + strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprintf("%v", n.value)
}

// plain converts a node to the plain Go values the step kinds and JSON use:
// map[string]any, []any, string, int, float64, bool, nil.
func (n *node) plain() any {
	switch n.kind {
	case mappingNode:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k.value.(string)] = n.vals[i].plain()
		}
		return m
	case sequenceNode:
		l := make([]any, len(n.items))
		for i, it := range n.items {
			l[i] = it.plain()
		}
		return l
	}
	return n.value
}

// parseYAML parses src into a node tree. A syntax error keeps goccy's
// position, reworded where a common mistake is behind it (yamlSyntax);
// anchors, aliases and merge keys are resolved here.
func parseYAML(src []byte, errs *errorList) *node {
	if at, msg, ok := prescan(src); !ok {
		errs.at(at, "%s", msg)
		return nil
	}
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil {
			p := ye.GetToken().Position
			at, msg := yamlSyntax(errs.lines, pos{p.Line, p.Column}, ye.GetMessage())
			errs.at(at, "%s", msg)
		} else {
			errs.at(pos{1, 1}, "YAML syntax: %v", err)
		}
		return nil
	}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || isEmpty(doc.Body) {
			continue
		}
		if body != nil {
			errs.at(position(doc.Body), "a workflow file holds one YAML document; remove the second one (from here on)")
			break
		}
		body = doc.Body
	}
	if body == nil {
		errs.at(pos{1, 1}, "the file is empty; a workflow needs at least name and steps")
		return nil
	}
	c := &converter{errs: errs, anchors: map[string]*node{}}
	return c.convert(body)
}

func isEmpty(n ast.Node) bool {
	if n == nil {
		return true
	}
	_, comment := n.(*ast.CommentGroupNode)
	return comment
}

// position is where a goccy node starts. Mappings in block style report the
// first key rather than goccy's first colon, so a caret lands on a word.
func position(n ast.Node) pos {
	switch x := n.(type) {
	case *ast.MappingNode:
		if !x.IsFlowStyle && len(x.Values) > 0 {
			return position(x.Values[0].Key)
		}
	case *ast.MappingValueNode:
		return position(x.Key)
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return pos{1, 1}
	}
	return pos{tk.Position.Line, tk.Position.Column}
}

type converter struct {
	errs    *errorList
	anchors map[string]*node
	aliased bool // an alias was expanded: a value may be larger than its text
}

func (c *converter) convert(n ast.Node) *node {
	switch x := n.(type) {
	case nil:
		return &node{kind: scalarNode, pos: pos{1, 1}, size: 1}
	case *ast.MappingNode:
		return c.mapping(position(x), x.Values)
	case *ast.MappingValueNode:
		return c.mapping(position(x), []*ast.MappingValueNode{x})
	case *ast.SequenceNode:
		out := &node{kind: sequenceNode, pos: position(x), size: 1}
		for _, v := range x.Values {
			it := c.convert(v)
			out.items = append(out.items, it)
			out.size += it.size
		}
		return c.bounded(out)
	case *ast.AnchorNode:
		v := c.convert(x.Value)
		if x.Name != nil {
			c.anchors[x.Name.GetToken().Value] = v
		}
		return v
	case *ast.AliasNode:
		name := ""
		if x.Value != nil {
			name = x.Value.GetToken().Value
		}
		if v, ok := c.anchors[name]; ok {
			c.aliased = true
			return v
		}
		c.errs.at(position(x), "unknown alias *%s: define the anchor &%s before using it", name, name)
		return badNode(position(x))
	case *ast.TagNode:
		return c.tagged(x)
	case *ast.LiteralNode:
		s := ""
		if x.Value != nil {
			s = x.Value.Value
		}
		return scalar(position(x), s)
	case *ast.StringNode:
		return scalar(position(x), x.Value)
	case *ast.IntegerNode:
		switch v := x.Value.(type) {
		case int64:
			if v >= math.MinInt && v <= math.MaxInt {
				return scalar(position(x), int(v))
			}
			return scalar(position(x), float64(v))
		case uint64:
			if v <= math.MaxInt {
				return scalar(position(x), int(v))
			}
			return scalar(position(x), float64(v))
		}
		return scalar(position(x), x.GetToken().Value)
	case *ast.FloatNode:
		return scalar(position(x), x.Value)
	case *ast.InfinityNode:
		return scalar(position(x), x.Value)
	case *ast.NanNode:
		return scalar(position(x), math.NaN())
	case *ast.BoolNode:
		return scalar(position(x), x.Value)
	case *ast.NullNode:
		return scalar(position(x), nil)
	case *ast.CommentGroupNode:
		return scalar(position(x), nil)
	}
	c.errs.at(position(n), "unsupported YAML construct (%s)", n.Type())
	return badNode(position(n))
}

func scalar(p pos, v any) *node { return &node{kind: scalarNode, pos: p, value: v, size: 1} }

// badNode stands for a value that could not be read.
func badNode(p pos) *node { return &node{kind: scalarNode, pos: p, size: 1, bad: true} }

// mapping converts the entries of a mapping, applying merge keys (`<<:`):
// merged entries never replace keys the mapping sets itself.
func (c *converter) mapping(p pos, entries []*ast.MappingValueNode) *node {
	out := &node{kind: mappingNode, pos: p, size: 1}
	explicit := map[string]bool{}
	for _, e := range entries {
		if _, merge := e.Key.(*ast.MergeKeyNode); !merge {
			if k, ok := c.key(e.Key); ok {
				explicit[k] = true
			}
		}
	}
	seen := map[string]bool{}
	add := func(k, v *node) {
		s := k.value.(string)
		if seen[s] {
			return
		}
		seen[s] = true
		out.keys = append(out.keys, k)
		out.vals = append(out.vals, v)
		out.size += v.size + 1
	}
	for _, e := range entries {
		if _, merge := e.Key.(*ast.MergeKeyNode); merge {
			for _, src := range c.mergeSources(e.Value) {
				for i, k := range src.keys {
					if !explicit[k.value.(string)] {
						add(k, src.vals[i])
					}
				}
			}
			continue
		}
		k, ok := c.key(e.Key)
		if !ok {
			continue
		}
		kp := position(e.Key)
		v := c.convert(e.Value)
		if v.kind == scalarNode && v.keyCol == 0 {
			v.keyCol = kp.col
		}
		add(scalar(kp, k), v)
	}
	return c.bounded(out)
}

// mergeSources are the mappings a merge key's value names: one mapping or
// a list of them.
func (c *converter) mergeSources(v ast.Node) []*node {
	n := c.convert(v)
	at := position(v) // the alias, not the anchor it names
	switch n.kind {
	case mappingNode:
		return []*node{n}
	case sequenceNode:
		var out []*node
		for _, it := range n.items {
			if it.kind != mappingNode {
				c.errs.at(at, "a merge key (<<) takes a mapping or a list of mappings, got a list with %s", it.describe())
				continue
			}
			out = append(out, it)
		}
		return out
	}
	if !n.bad {
		c.errs.at(at, "a merge key (<<) takes a mapping or a list of mappings, got %s", n.describe())
	}
	return nil
}

// key returns a mapping key as a string: keys are names, so a scalar of any
// type is taken as written (`1:` is the key "1").
func (c *converter) key(k ast.Node) (string, bool) {
	switch x := k.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode, *ast.InfinityNode, *ast.NanNode:
		return x.GetToken().Value, true
	}
	c.errs.at(position(k), "a mapping key must be a plain name")
	return "", false
}

// tagged applies the standard tags. !!str turns a scalar into the string as
// written; the other core tags are what the value already is.
func (c *converter) tagged(x *ast.TagNode) *node {
	tag := ""
	if x.Start != nil {
		tag = x.Start.Value
	}
	switch tag {
	case "!!str":
		if x.Value == nil {
			return scalar(position(x), "")
		}
		switch v := x.Value.(type) {
		case *ast.StringNode:
			return scalar(position(x), v.Value)
		case *ast.LiteralNode:
			return c.convert(v)
		case ast.ScalarNode:
			return scalar(position(x), strings.TrimSpace(v.GetToken().Value))
		}
		c.errs.at(position(x), "!!str applies to a scalar, not %s", c.convert(x.Value).describe())
		return badNode(position(x))
	case "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq":
		return c.convert(x.Value)
	}
	c.errs.at(position(x), "unsupported YAML tag %s (acpflow knows !!str, !!int, !!float, !!bool, !!null, !!map, !!seq)", tag)
	return badNode(position(x))
}

// bounded refuses a node whose aliases expand past maxNodes, replacing it
// with an empty one so that nothing walks the expansion.
func (c *converter) bounded(n *node) *node {
	if n.size <= maxNodes {
		return n
	}
	if c.aliased {
		c.errs.at(n.pos, "this value expands to more than %d YAML nodes through aliases", maxNodes)
	} else {
		c.errs.at(n.pos, "this value has more than %d YAML nodes; a workflow has a few thousand", maxNodes)
	}
	return &node{kind: n.kind, pos: n.pos, size: 1, bad: true}
}
