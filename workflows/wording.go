package workflows

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/acpflow/acpflow/steps"
)

// This file words the mistakes whose first message would otherwise be a
// library's: goccy's YAML syntax errors for tabs and mis-indented lines,
// and expr's for `=` and for an expression a YAML comment cut short. The
// library's text stays out of the message when the new one says more.

// yamlSyntax rewords a syntax error goccy reported at p with message msg,
// from the file's lines: a tab in the indentation, a line indented
// deeper than the key above it, a line that lines up with no key, or a
// mapping begun on its key's line. Any other error keeps goccy's text.
func yamlSyntax(lines []string, p pos, msg string) (pos, string) {
	if p.line >= 1 && p.line <= len(lines) {
		line := lines[p.line-1]
		if i := tabInIndent(line); i >= 0 {
			at := pos{p.line, utf8.RuneCountInString(line[:i]) + 1}
			if strings.TrimSpace(line) == "" {
				return at, "a tab on this blank line; YAML indents with spaces: remove it"
			}
			return at, "a tab indents this line; YAML indents with spaces"
		}
	}
	switch msg {
	case "mapping value is not allowed in this context":
		if at, m, ok := sameLineMapping(lines, p); ok {
			return at, m
		}
		if at, m, ok := deeperThanKey(lines, p); ok {
			return at, m
		}
		if at, m, ok := colonInPlainValue(lines, p); ok {
			return at, m
		}
	case "value is not allowed in this context":
		if at, m, ok := unalignedLine(lines, p); ok {
			return at, m
		}
	}
	return p, "YAML syntax: " + msg
}

// tabInIndent is the byte offset of the first tab in line's indentation
// (the blanks before its first other character), or -1.
func tabInIndent(line string) int {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\t':
			return i
		case ' ':
		default:
			return -1
		}
	}
	return -1
}

// keyLine matches a block mapping's `key:` line, a list item's `- key:`
// too: the key's column is the line's level.
var keyLine = regexp.MustCompile(`^(\s*(?:-\s+)*)([A-Za-z_][\w.-]*)\s*:(\s|$)`)

// level is the column (0-based) and name of the key line starts with, or
// ok false for a line that is not `key:` (blank, comment, text).
func level(line string) (col int, key string, ok bool) {
	m := keyLine.FindStringSubmatch(line)
	if m == nil || tabInIndent(line) >= 0 {
		return 0, "", false
	}
	return len(m[1]), m[2], true
}

// sameLineMapping words `with: agent: demo`: goccy points at the second
// key, on the line of the first.
func sameLineMapping(lines []string, p pos) (pos, string, bool) {
	if p.line < 1 || p.line > len(lines) {
		return p, "", false
	}
	line := lines[p.line-1]
	at := byteOffset(line, p.col-1)
	col, key, ok := level(line)
	if !ok || at <= col+len(key) || at >= len(line) || strings.TrimSpace(line[col+len(key):at]) != ":" {
		return p, "", false
	}
	value := strings.TrimSpace(line[at:])
	if _, _, ok := level(value); !ok {
		return p, "", false
	}
	if takesMapping[key] {
		return p, fmt.Sprintf("a mapping cannot begin on the line of its key: put %q on the next line, indented under %s:, or write %s: {%s}", value, key, key, value), true
	}
	inner, _, _ := strings.Cut(value, ":")
	return p, fmt.Sprintf("%q in %s's value starts a mapping, which cannot begin on the line of its key: if the value is text, quote it (%s: %q); if %s: is a key, put it on the next line, indented under %s:", inner+":", key, key, value, inner, key), true
}

// colonInPlainValue words a plain (unquoted) value holding ": ", which
// YAML reads as a mapping's key: `run: echo "main.go:12: oops"`, a prompt
// that quotes an error. goccy points at the value; the message points at
// the colon, on the key's line or a line the value continues on.
func colonInPlainValue(lines []string, p pos) (pos, string, bool) {
	if p.line < 1 || p.line > len(lines) {
		return p, "", false
	}
	line := lines[p.line-1]
	col, key, ok := level(line)
	start := byteOffset(line, p.col-1)
	if !ok || start <= col+len(key) || start >= len(line) || strings.ContainsRune(`'"|>{[&*!`, rune(line[start])) {
		return p, "", false
	}
	value := strings.TrimSpace(line[start:])
	for ln, from := p.line, start; ln <= len(lines); ln, from = ln+1, 0 {
		text := lines[ln-1]
		if ln > p.line && (strings.TrimSpace(text) == "" || indentOf(text) <= col) {
			return p, "", false
		}
		i := plainColon(text[from:])
		if i < 0 {
			continue
		}
		at := pos{ln, utf8.RuneCountInString(text[:from+i]) + 1}
		what := map[string]string{"run": "command", "prompt": "text"}[key]
		if what == "" {
			what = "value"
		}
		fix := fmt.Sprintf("quote the %s, or use %s: | and write it on the next lines, indented", what, key)
		if ln == p.line && !strings.Contains(value, " #") {
			fix = fmt.Sprintf("quote the %s (%s: '%s'), or use %s: | and write it on the next lines, indented", what, key, strings.ReplaceAll(value, "'", "''"), key)
		}
		return at, fmt.Sprintf("\": \" in the %s of %s: starts a YAML mapping, which cannot be there: %s", what, key, fix), true
	}
	return p, "", false
}

// plainColon is the byte offset of the first ": " (or a ":" that ends
// the text) in text, or -1.
func plainColon(text string) int {
	for i := 0; i < len(text); i++ {
		if text[i] == ':' && (i+1 == len(text) || text[i+1] == ' ' || text[i+1] == '\t') {
			return i
		}
	}
	return -1
}

// knownKey tells whether name is a key of a workflow anywhere (a step's,
// an agent's, a kind's with:, …): a line starting with one is more likely
// a misplaced key than a line of text.
func knownKey(name string) bool {
	for _, keys := range [][]string{workflowKeys, stepKeys, inputKeys, policyFileKeys, budgetKeys} {
		if contains(keys, name) {
			return true
		}
	}
	for _, kind := range steps.Names() {
		k, _ := steps.Lookup(kind)
		if contains(k.Keys(), name) {
			return true
		}
		if ak, ok := k.(steps.AgentKind); ok && contains(ak.AgentKeys(), name) {
			return true
		}
	}
	return false
}

// takesMapping are the keys whose value is a mapping in a workflow or a
// policy file: a `key: value` after one of them is a misplaced mapping,
// never text.
var takesMapping = map[string]bool{
	"with": true, "agents": true, "policies": true, "inputs": true, "outputs": true, "budget": true,
	"permission": true, "env": true, "config": true, "dispose": true, "cost": true, "sandbox": true,
}

// deeperThanKey words a `key:` line indented deeper than the `key: value`
// line above it, which YAML reads as more of that value: goccy points at
// the value above.
func deeperThanKey(lines []string, p pos) (pos, string, bool) {
	if p.line < 1 || p.line > len(lines) {
		return p, "", false
	}
	col, key, ok := level(lines[p.line-1])
	if !ok {
		return p, "", false
	}
	for ln := p.line + 1; ln <= len(lines); ln++ {
		line := lines[ln-1]
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		c, next, ok := level(line)
		if !ok || c <= col {
			return p, "", false
		}
		if takesMapping[key] {
			return p, "", false // `with: x` and a key below: not a continued text
		}
		asKey := fmt.Sprintf("if %s: is a key, indent it as %s: is (%d spaces)", next, key, col)
		asText := fmt.Sprintf("if the value is text, write it as a block (%s: |) or quote it", key)
		ways := asText + "; " + asKey
		if knownKey(next) {
			ways = asKey + "; " + asText
		}
		return pos{ln, c + 1}, fmt.Sprintf("%q is indented deeper than %q on line %d, so YAML reads it as more of %s's value, where \": \" cannot be: %s", next+":", key+":", p.line, key, ways), true
	}
	return p, "", false
}

// unalignedLine words a line indented less than the line above it but
// more than any key it could be beside: goccy points at the line.
func unalignedLine(lines []string, p pos) (pos, string, bool) {
	if p.line < 2 || p.line > len(lines) {
		return p, "", false
	}
	col := strings.IndexFunc(lines[p.line-1], func(r rune) bool { return r != ' ' })
	if col < 0 {
		return p, "", false
	}
	var above, below string // the nearest keys indented deeper, and less
	aboveCol, belowCol := -1, -1
	opens := false // the key above has no value on its line: it opens a mapping
	for ln := p.line - 1; ln >= 1; ln-- {
		c, key, ok := level(lines[ln-1])
		if !ok {
			continue
		}
		if above == "" && c > col {
			above, aboveCol = key, c
			_, rest, _ := strings.Cut(lines[ln-1], key)
			rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
			opens = rest == "" || strings.HasPrefix(rest, "#")
			continue
		}
		if c < col {
			below, belowCol = key, c
			break
		}
	}
	if above == "" {
		return p, "", false
	}
	var ways []string
	if opens {
		ways = append(ways, fmt.Sprintf("indent it by more than %d spaces to put it under %s:", aboveCol, above))
	}
	ways = append(ways, fmt.Sprintf("line it up with %s: (%d spaces)", above, aboveCol))
	if below != "" {
		ways = append(ways, fmt.Sprintf("with %s: (%d spaces)", below, belowCol))
	}
	return pos{p.line, col + 1}, fmt.Sprintf("this line is indented by %d %s, which lines it up with no key above it: %s", col, plural(col, "space", "spaces"), strings.Join(ways, ", or ")), true
}

// commentCut tells whether the plain scalar n was cut short by a YAML
// comment: its text is followed, in the file, by ` #` and more. It
// returns the position of the #.
//
// # Notes
//
// Only a plain scalar can be cut: a quoted one's text starts with its
// quote, so its source never starts with its value. The scalar's lines
// are its own line from its column, then those indented deeper than its
// key (a plain scalar folded over lines).
func (d *decoder) commentCut(n *node) (pos, bool) {
	s, ok := n.str()
	if !ok || s == "" || n.pos.line < 1 || n.pos.line > len(d.lines) {
		return pos{}, false
	}
	base := indentOf(d.lines[n.pos.line-1])
	if n.keyCol > 0 {
		base = n.keyCol - 1
	}
	for ln := n.pos.line; ln <= len(d.lines); ln++ {
		line := d.lines[ln-1]
		start := 0
		if ln == n.pos.line {
			start = byteOffset(line, n.pos.col-1)
			if !strings.HasPrefix(s, firstWord(line[start:])) {
				return pos{}, false // a quoted or block scalar: no comment cuts it
			}
		} else if strings.TrimSpace(line) != "" && indentOf(line) <= base {
			return pos{}, false
		}
		for i := start + 1; i < len(line); i++ {
			if line[i] != '#' || (line[i-1] != ' ' && line[i-1] != '\t') {
				continue
			}
			before := strings.TrimSpace(line[start:i])
			if before != "" && strings.HasSuffix(s, before) {
				return pos{ln, utf8.RuneCountInString(line[:i]) + 1}, true
			}
		}
	}
	return pos{}, false
}

// firstWord is text up to its first blank.
func firstWord(text string) string {
	if i := strings.IndexAny(text, " \t"); i >= 0 {
		return text[:i]
	}
	return text
}

// commentCutMessage is what an expression a comment cut short says
// instead of the compile error of what was left of it.
const commentCutMessage = `the expression is cut at " #": YAML starts a comment there; quote the value`
