package workflows

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/acpflow/acpflow/engine"
	"github.com/expr-lang/expr/file"
)

// scope says where an expression is written, which decides what it may
// refer to (refs.go).
type scope struct {
	step        *stepInfo // in a step: its ancestors through needs
	forEachExpr bool      // the step's for-each itself: item is not defined yet
	agent       string    // in an agent's env or args: the ancestors of every step that uses it
	outputs     bool      // in outputs: any step
}

// exprUse is a compiled expression waiting for its references to be
// checked, which needs every step to be known.
type exprUse struct {
	e  *engine.Expr
	n  *node
	sc scope
	// bare is an if: or for-each:, whose values keep their type (an
	// unset env.NAME is nil there), not a ${{ }} in a string.
	bare bool
}

// template compiles a string with ${{ }} parts. On error it reports the
// error at the failing part and returns nil.
func (d *decoder) template(n *node, s string, sc scope) *engine.Template {
	t, err := d.compiled.template(s)
	if err != nil {
		if at, cut := d.commentCut(n); cut {
			d.at(at, "%s", commentCutMessage)
			return nil
		}
		d.at(d.templateErrorAt(n, err), "%s", templateMessage(err))
		return nil
	}
	for _, e := range t.Exprs() {
		d.exprs = append(d.exprs, exprUse{e: e, n: n, sc: sc})
	}
	return t
}

// expression compiles a bare expression (`if:`, `for-each:`). The form
// `${{ EXPR }}` is accepted too, because GitHub Actions users write it.
func (d *decoder) expression(n *node, what string, sc scope) *engine.Expr {
	var src string
	switch v := n.value.(type) {
	case string:
		src = unwrapExpr(v)
	case bool:
		src = strconv.FormatBool(v)
	default:
		d.wrong(n, "%s: want an expression, got %s", what, n.describe())
		return nil
	}
	if strings.TrimSpace(src) == "" {
		d.at(n.pos, "%s: the expression is empty", what)
		return nil
	}
	e, err := d.compiled.expr(src)
	if err != nil {
		if at, cut := d.commentCut(n); cut {
			d.at(at, "%s: %s", what, commentCutMessage)
			return nil
		}
		at := n.pos
		var fe *file.Error
		if errors.As(err, &fe) {
			at = d.find(n, src, fe.From)
		}
		d.at(at, "%s: expression does not compile: %s", what, exprMessage(err))
		return nil
	}
	d.exprs = append(d.exprs, exprUse{e: e, n: n, sc: sc, bare: true})
	return e
}

// unwrapExpr strips one ${{ }} around a whole expression.
func unwrapExpr(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "${{") && strings.HasSuffix(t, "}}") && strings.Count(t, "${{") == 1 {
		return strings.TrimSpace(t[3 : len(t)-2])
	}
	return s
}

var exprPosition = regexp.MustCompile(`\s*\(\d+:\d+\)$`)

// exprMessage is expr's message without its own position and snippet: the
// error's position in the file replaces them.
func exprMessage(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	msg = exprPosition.ReplaceAllString(msg, "")
	var fe *file.Error
	if errors.As(err, &fe) {
		if name, ok := strings.CutPrefix(fe.Message, "unknown name "); ok {
			if note, ok := foreignNames[name]; ok {
				msg += ": " + note
			} else {
				msg += didYouMean(name, engine.ScopeNames)
			}
		}
		if fe.Message == `unexpected token Operator("=")` {
			// A single = is how SQL, YAML-minded and shell users compare.
			msg = strings.Replace(msg, fe.Message, "use == to compare (= is not an operator)", 1)
		}
	}
	return msg
}

// foreignNames are the functions and contexts of GitHub Actions'
// expressions, with what acpflow has instead: a newcomer writes
// `if: ${{ failure() }}` first.
var foreignNames = map[string]string{
	"failure":   `acpflow has no failure(): a step runs after a failed one only when that one has continue-on-error: true; then test it with steps.ID.status == "failed"`,
	"success":   `acpflow has no success(): a step runs only when the steps it needs succeeded (or failed with continue-on-error: true); to test one: steps.ID.status == "succeeded"`,
	"always":    `acpflow has no always(): to run a step whatever the steps it needs did, give those continue-on-error: true and drop the if:`,
	"cancelled": `acpflow has no cancelled(): a cancelled run starts no more steps; steps.ID.status == "cancelled" tests one step`,
	"github":    `acpflow has no github context: run.id, run.workspace and workflow.name are what it has`,
	"secrets":   `acpflow has no secrets context: read a secret from acpflow's environment, env.NAME`,
	"vars":      `acpflow has no vars context: read acpflow's environment, env.NAME, or declare an input`,
	"matrix":    `acpflow has no matrix: a for-each: step's element is item, its position index`,
	"needs":     `acpflow reads what a step it needs gave as steps.ID.output (or .status, .json)`,
	"job":       `acpflow has no job context: steps.ID.status tells how a step ended`,
}

// templatePart matches engine.ParseTemplate's wrapping of an expression
// error, "in ${{ SRC }}: MESSAGE".
var templatePart = regexp.MustCompile(`^in \$\{\{ (.*?) \}\}: (.*)$`)

func templateMessage(err error) string {
	msg := exprMessage(err)
	if m := templatePart.FindStringSubmatch(msg); m != nil {
		return "${{ " + m[1] + " }} does not compile: " + m[2]
	}
	return msg
}

// templateErrorAt points at the part of a template that failed: the
// expression's own error position when expr gives one, else the ${{ that
// opens the failing or unclosed part.
func (d *decoder) templateErrorAt(n *node, err error) pos {
	first, _, _ := strings.Cut(err.Error(), "\n")
	var fe *file.Error
	if m := templatePart.FindStringSubmatch(first); m != nil && errors.As(err, &fe) {
		return d.find(n, m[1], fe.From)
	}
	s, _ := n.str()
	if i := strings.LastIndex(s, "${{"); i >= 0 && strings.HasPrefix(first, "unclosed") {
		return d.find(n, s[i:], 0)
	}
	return d.find(n, "${{", 0)
}

// find returns the position of needle (plus offset characters) in the
// source text of scalar n: on its own line from its column, then on the
// lines below that are indented deeper than its key (a block scalar, or a
// plain scalar folded over lines). When the text is not found there (it was
// written with escapes), it returns n's own position.
func (d *decoder) find(n *node, needle string, offset int) pos {
	if needle == "" || strings.Contains(needle, "\n") || n.pos.line < 1 || n.pos.line > len(d.lines) {
		return n.pos
	}
	base := indentOf(d.lines[n.pos.line-1])
	if n.keyCol > 0 {
		base = n.keyCol - 1
	}
	for ln := n.pos.line; ln <= len(d.lines); ln++ {
		line := d.lines[ln-1]
		start := 0 // in bytes
		if ln == n.pos.line {
			start = byteOffset(line, n.pos.col-1)
		} else if strings.TrimSpace(line) != "" && indentOf(line) <= base {
			break
		}
		if i := strings.Index(line[start:], needle); i >= 0 {
			col := utf8.RuneCountInString(line[:start+i]) + 1
			return pos{ln, col + min(offset, utf8.RuneCountInString(needle))}
		}
	}
	return n.pos
}

// byteOffset is the byte offset of the rune at index runes of s (len(s) if
// s is shorter).
func byteOffset(s string, runes int) int {
	for i := range s {
		if runes <= 0 {
			return i
		}
		runes--
	}
	return len(s)
}

func indentOf(line string) int {
	return len(line) - len(strings.TrimLeft(line, " "))
}
