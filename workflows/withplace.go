package workflows

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/acpflow/acpflow/steps"
)

// This file words the mistakes of indentation around a step's with:,
// which YAML accepts and which would otherwise read as unknown keys: a
// with: key written at the step's level (`prompt:` beside `uses:`), a
// with: left empty because its keys are not indented below it, a step
// key written under with:, and `key:value` without the blank that makes
// it a key.

// stepFields is fields for a step: it returns the step's values by key
// and reports its unknown keys, except that a key the step's kind takes
// under with: is reported as belonging there, and is decoded as if it
// were there (so that one mistake gives one message, not a missing
// prompt as well).
func (d *decoder) stepFields(info *stepInfo, n *node) map[string]*node {
	if !d.mapping(n, info.label) {
		return nil
	}
	var kind steps.Kind
	if s, ok := n.get("uses").str(); ok {
		kind, _ = steps.Lookup(s)
	}
	out := make(map[string]*node, len(n.keys))
	var misplaced []int // indexes in n.keys of with: keys at the step's level
	for i, k := range n.keys {
		name := k.value.(string)
		switch {
		case contains(stepKeys, name):
			out[name] = n.vals[i]
		case kind != nil && contains(kind.Keys(), name):
			misplaced = append(misplaced, i)
		default:
			d.at(k.pos, "%s: unknown key %q%s", info.label, name, didYouMean(name, stepKeys))
		}
	}
	if w := out["with"]; w != nil && w.kind == scalarNode && !w.bad {
		if s, ok := w.str(); ok && missingBlank.MatchString(s) {
			d.at(w.pos, "%s: with: want a mapping, got the string %q: a key needs a blank after its colon (%s)", info.label, s, missingBlank.ReplaceAllString(firstWord(s), "$1: $2"))
			out["with"] = badNode(w.pos)
		}
	}
	if len(misplaced) == 0 {
		return out
	}
	names := make([]string, len(misplaced))
	for j, i := range misplaced {
		names[j] = n.keys[i].value.(string)
	}
	w := out["with"]
	switch {
	case w != nil && w.isNull() && !w.bad:
		d.at(keyAt(n, "with"), "%s: with: is empty: %s below it %s written as keys of the step; indent %s under with:",
			info.label, strings.Join(names, ", "), plural(len(names), "is", "are"), plural(len(names), "it", "them"))
	case w == nil || w.kind == mappingNode:
		for _, i := range misplaced {
			d.at(n.keys[i].pos, "%s: %q belongs under with: (a key of %s, not of the step); indent it below with:", info.label, n.keys[i].value, kind.Name())
		}
	default:
		// with: is something else, reported as such: its own message says enough.
		return out
	}
	// Decode the step as meant, with the misplaced keys under with:.
	merged := &node{kind: mappingNode, pos: n.keys[misplaced[0]].pos, size: 1}
	if w != nil && w.kind == mappingNode {
		merged.pos = w.pos
		merged.keys = append(merged.keys, w.keys...)
		merged.vals = append(merged.vals, w.vals...)
	}
	for _, i := range misplaced {
		if merged.get(n.keys[i].value.(string)) == nil {
			merged.keys = append(merged.keys, n.keys[i])
			merged.vals = append(merged.vals, n.vals[i])
		}
	}
	out["with"] = merged
	return out
}

// missingBlank matches `key:value` at the start of a string: a key
// without the blank YAML needs after its colon.
var missingBlank = regexp.MustCompile(`^([A-Za-z_][\w-]*):([^\s:/])`)

// unknownWithKey is the message for a key of with: the step's kind does
// not take: one that is a key of the step is said to belong beside uses:.
func unknownWithKey(ctx, name string, kind steps.Kind, known []string) string {
	if contains(stepKeys, name) && name != "with" {
		return fmt.Sprintf("%s: %q is a key of the step, not of with: for %s; line it up with uses:", ctx, name, kind.Name())
	}
	return fmt.Sprintf("%s: unknown key %q for %s%s", ctx, name, kind.Name(), didYouMean(name, known))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
