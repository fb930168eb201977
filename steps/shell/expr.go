package shell

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/acpflow/acpflow/internal/bytesize"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/redact"
)

// An expression in a command line reaches the shell as data, never as
// shell code (docs/shell.md#expressions-in-run): its value goes in an
// environment variable of the command, ACPFLOW_EXPR_1 for the first, and
// the expression's place in the command becomes "${ACPFLOW_EXPR_1}" (bare
// ${ACPFLOW_EXPR_1} where it already is in double quotes or in a
// here-document's body). A shell expands a variable once and never reads
// what it holds as syntax, so no quote, $( ), ; or newline in the value
// can do more than stand for itself. Where the shell would not expand the
// variable (single quotes, a comment), or would read its value as code (an
// arithmetic expression, an array index), the command is refused, at the
// expression, with what to write instead.

// exprVar begins the names of the variables that carry the values.
const exprVar = "ACPFLOW_EXPR_"

// exprSite is one ${{ }} of a command line.
type exprSite struct {
	src        string // as written, ${{ … }}
	start, end int    // its bytes in the command line
	// quote says the place is unquoted: the variable is written in double
	// quotes, so that its value is one word, neither split nor globbed.
	quote bool
}

// varName is the variable of the i-th expression (from 0).
func varName(i int) string { return exprVar + strconv.Itoa(i+1) }

// ExprError is an expression of a command line the shell cannot be given
// as data. Line and Col are its place in the command line (from 1; Col in
// characters), Excerpt the command's line up to and including it.
type ExprError struct {
	Src       string
	Line, Col int
	Excerpt   string
	Msg       string
}

func (e *ExprError) Error() string { return e.Msg }

// findExprs lists the ${{ }} of a command line, as the engine's templates
// split them; an unclosed one ends the list (the loader reports it).
func findExprs(line string) []exprSite {
	var out []exprSite
	for at := 0; ; {
		i := strings.Index(line[at:], "${{")
		if i < 0 {
			return out
		}
		j := strings.Index(line[at+i:], "}}")
		if j < 0 {
			return out
		}
		start, end := at+i, at+i+j+2
		out = append(out, exprSite{src: line[start:end], start: start, end: end})
		at = end
	}
}

// langOf is the grammar a shell step's shell: reads a command line in, and
// false for a shell whose grammar acpflow does not parse (zsh, ksh,
// python, a custom command line with another program): their expressions
// cannot be placed, and are refused. "" is the default shell: bash, whose
// grammar is a superset of sh's as far as placing a value goes.
func langOf(shell string) (syntax.LangVariant, bool) {
	words := strings.Fields(shell)
	if len(words) == 0 {
		return syntax.LangBash, true
	}
	if len(words) > 1 && !strings.Contains(shell, scriptArg) {
		return 0, false
	}
	switch filepath.Base(words[0]) {
	case "bash":
		return syntax.LangBash, true
	case "sh", "dash":
		return syntax.LangPOSIX, true
	}
	return 0, false
}

// placeExprs finds each ${{ }} of line and how the shell reads its place,
// under the grammar lang. An expression the shell cannot be given as data
// is an *ExprError; a command line the grammar cannot parse is an error.
func placeExprs(line string, lang syntax.LangVariant) ([]exprSite, error) {
	sites := findExprs(line)
	if len(sites) == 0 {
		return nil, nil
	}
	if i := strings.Index(line, exprVar); i >= 0 {
		return nil, fmt.Errorf("the command line names %s…, which is acpflow's: the variables that carry the values of its ${{ }}; rename yours", exprVar)
	}
	// The probe is the command line with each expression as the variable
	// that will carry it: the parse says where the shell expands it.
	var probe strings.Builder
	offsets := make([]int, len(sites))
	last := 0
	for i, s := range sites {
		probe.WriteString(line[last:s.start])
		offsets[i] = probe.Len()
		probe.WriteString("${" + varName(i) + "}")
		last = s.end
	}
	probe.WriteString(line[last:])
	places, err := readPlaces(probe.String(), lang, offsets)
	var pe syntax.ParseError
	if errors.As(err, &pe) && strings.Contains(pe.Text, "heredoc word") {
		// The parser refuses an expansion in a delimiter outright.
		for _, site := range sites {
			if inDelimiter.MatchString(line[:site.start]) {
				return nil, exprError(line, site, strings.ReplaceAll(reasons["delimiter"], "{expr}", site.src))
			}
		}
	}
	if err != nil {
		return nil, commandError(err, lang)
	}
	for i, p := range places {
		if p.reason != "" {
			return nil, exprError(line, sites[i], strings.ReplaceAll(reasons[p.reason], "{expr}", sites[i].src))
		}
		sites[i].quote = !p.quoted
	}
	if err := checkPlaced(line, sites, lang); err != nil {
		return nil, err
	}
	return sites, nil
}

// placedLine is line with each expression as the variable that carries
// its value.
func placedLine(line string, sites []exprSite) string {
	var b strings.Builder
	last := 0
	for i, s := range sites {
		b.WriteString(line[last:s.start])
		if s.quote {
			b.WriteString(`"${` + varName(i) + `}"`)
		} else {
			b.WriteString("${" + varName(i) + "}")
		}
		last = s.end
	}
	b.WriteString(line[last:])
	return b.String()
}

// checkPlaced parses the command line as it will run and proves what
// placeExprs decided: each variable is expanded once, in double quotes or
// a here-document's body, nowhere that reads it as code.
func checkPlaced(line string, sites []exprSite, lang syntax.LangVariant) error {
	placed := placedLine(line, sites)
	offsets := make([]int, len(sites))
	shift := 0
	for i, s := range sites {
		offsets[i] = s.start + shift
		if s.quote {
			offsets[i]++
		}
		shift += len(varName(i)) + 3 - (s.end - s.start)
		if s.quote {
			shift += 2
		}
	}
	places, err := readPlaces(placed, lang, offsets)
	if err != nil {
		return commandError(err, lang)
	}
	for i, p := range places {
		if !p.found || !p.quoted || p.reason != "" {
			return exprError(line, sites[i], "cannot be placed in this command line as data")
		}
	}
	return nil
}

// exprError is site refused for reason.
func exprError(line string, site exprSite, reason string) *ExprError {
	lineStart := strings.LastIndex(line[:site.start], "\n") + 1
	return &ExprError{
		Src:     site.src,
		Line:    strings.Count(line[:site.start], "\n") + 1,
		Col:     len([]rune(line[lineStart:site.start])) + 1,
		Excerpt: line[lineStart:site.end],
		Msg:     "run: " + site.src + " " + reason,
	}
}

// inDelimiter matches the text before an expression that is (part of) a
// here-document's delimiter.
var inDelimiter = regexp.MustCompile(`<<-?[ \t]*[^\s;&|<>()]*$`)

// parseCommand parses a command line under lang, keeping its comments.
func parseCommand(text string, lang syntax.LangVariant) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(lang), syntax.KeepComments(true)).Parse(strings.NewReader(text), "")
}

// commandError words a command line the grammar cannot parse.
func commandError(err error, lang syntax.LangVariant) error {
	what := err.Error()
	var pe syntax.ParseError
	var le syntax.LangError
	switch {
	case errors.As(err, &pe):
		what = fmt.Sprintf("line %d: %s", pe.Pos.Line(), pe.Text)
	case errors.As(err, &le):
		what = fmt.Sprintf("line %d: %s is not in %s", le.Pos.Line(), le.Feature, lang)
	}
	return fmt.Errorf("acpflow parses a command line with ${{ }} to pass each value as data, and cannot parse this one (%s); write it so that %s parses it, or set the value in env: and read it as $NAME", what, lang)
}

// place is how the shell reads the variable of one expression.
type place struct {
	found  bool   // the shell expands it, as ${NAME}
	quoted bool   // in double quotes or a here-document's body: one word as it is
	reason string // why the value would not be data there (a key of reasons)
}

// Why an expression's place is refused: the message, with {expr} for the
// expression as written.
var reasons = map[string]string{
	"single quotes": `is inside single quotes, where the shell expands nothing: its value could only be pasted in as shell code; use double quotes: "{expr}" (to keep the rest in single quotes, close them around it: 'text '"{expr}"' text')`,
	"dollar quotes": `is inside $'…' quotes, where the shell expands nothing: its value could only be pasted in as shell code; use double quotes: "{expr}"`,
	"comment":       `is in a comment, which the shell never reads; remove it`,
	"delimiter":     `is a here-document's delimiter, which the shell never expands; write a literal delimiter (<<EOF) and put the value in the body`,
	"quoted body":   `is in the body of a here-document whose delimiter is quoted (<<'EOF'), which expands nothing; unquote the delimiter (<<EOF), whose body expands it as data, or write it with printf '%s\n' "{expr}"`,
	"arithmetic":    `is in an arithmetic expression, where bash evaluates a value as code (a[$(cmd)] runs cmd); set it in env: (env: {N: {expr}}), check that "$N" is a number (case "$N" in (''|*[!0-9]*) exit 1;; esac), then use $N`,
	"index":         `is an array index, which bash evaluates as arithmetic, running code in the value (a[$(cmd)] runs cmd); set it in env: (env: {N: {expr}}), check that "$N" is a number, then use $N`,
	"test":          `is an operand of an arithmetic comparison (-eq, -lt, …) in [[ ]], which bash evaluates as code; compare with [ "{expr}" -eq N ] instead, which reads a number or fails`,
	"test name":     `is the variable name that -v or -R tests in [[ ]], which bash evaluates (an index in it runs code); test a name you write yourself`,
	"nested":        `is inside another parameter expansion (${…}), where the shell reads it as a pattern, an index or arithmetic; set it in env: (env: {V: {expr}}) and write $V there`,
	"backquotes":    "is inside backquotes (`…`), whose quoting acpflow does not place values in; write $( ) instead",
	"unread":        `is where the shell expands no variable (after a backslash or a $, or in a word it reads literally); write it bare or in double quotes: "{expr}"`,
}

// readPlaces parses text under lang and says how the shell reads each
// ${ACPFLOW_EXPR_n} that begins at offsets[n-1].
func readPlaces(text string, lang syntax.LangVariant, offsets []int) ([]place, error) {
	f, err := parseCommand(text, lang)
	if err != nil {
		return nil, err
	}
	at := make(map[int]int, len(offsets))
	for i, o := range offsets {
		at[o] = i
	}
	places := make([]place, len(offsets))
	var stack []syntax.Node
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		if pe, ok := n.(*syntax.ParamExp); ok && pe.Param != nil {
			start := int(pe.Pos().Offset())
			if i, ours := at[start]; ours && pe.Param.Value == varName(i) && int(pe.End().Offset()) == start+len(varName(i))+3 {
				places[i] = readPlace(stack, pe)
			}
		}
		stack = append(stack, n)
		return true
	})
	for i, o := range offsets {
		if !places[i].found {
			places[i].reason = unreadAt(f, o)
		}
	}
	return places, nil
}

// readPlace reads where a variable is expanded from its ancestors,
// innermost first: any that reads its value as code refuses it; the
// innermost of double quotes, a here-document's body and a command says
// whether it is already one word.
func readPlace(ancestors []syntax.Node, pe *syntax.ParamExp) place {
	p := place{found: true}
	decided := false
	quoted := func() {
		if !decided {
			p.quoted, decided = true, true
		}
	}
	for i := len(ancestors) - 1; i >= 0 && p.reason == ""; i-- {
		switch n := ancestors[i].(type) {
		case *syntax.ParamExp:
			p.reason = "nested"
		case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause, *syntax.CStyleLoop,
			*syntax.BinaryArithm, *syntax.UnaryArithm, *syntax.ParenArithm:
			p.reason = "arithmetic"
		case *syntax.Assign:
			if n.Index != nil && within(pe, n.Index) {
				p.reason = "index"
			}
		case *syntax.ArrayElem:
			if n.Index != nil && within(pe, n.Index) {
				p.reason = "index"
			}
		case *syntax.BinaryTest:
			if n.Op >= syntax.TsEql && n.Op <= syntax.TsGtr {
				p.reason = "test"
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				p.reason = "test name"
			}
		case *syntax.CmdSubst:
			if n.Backquotes {
				p.reason = "backquotes"
			}
		case *syntax.DblQuoted:
			quoted()
		case *syntax.Redirect:
			switch {
			case n.Hdoc != nil && within(pe, n.Hdoc):
				quoted()
			case (n.Op == syntax.Hdoc || n.Op == syntax.DashHdoc) && within(pe, n.Word):
				p.reason = "delimiter"
			}
		case *syntax.Stmt:
			decided = true
		}
	}
	return p
}

// within reports whether pe begins inside n.
func within(pe *syntax.ParamExp, n syntax.Node) bool {
	o := pe.Pos().Offset()
	return o >= n.Pos().Offset() && o < n.End().Offset()
}

// unreadAt says why the shell does not expand what begins at offset: the
// quotes, comment or here-document it is in.
func unreadAt(f *syntax.File, offset int) string {
	o := uint(offset)
	in := func(n syntax.Node) bool { return o >= n.Pos().Offset() && o < n.End().Offset() }
	reason := "unread"
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Redirect:
			switch {
			case n.Hdoc != nil && in(n.Hdoc):
				if quotedWord(n.Word) {
					reason = "quoted body"
				}
				return false
			case (n.Op == syntax.Hdoc || n.Op == syntax.DashHdoc) && in(n.Word):
				reason = "delimiter"
				return false
			}
		case *syntax.SglQuoted:
			if in(n) {
				reason = "single quotes"
				if n.Dollar {
					reason = "dollar quotes"
				}
			}
		case *syntax.Comment:
			if in(n) {
				reason = "comment"
			}
		}
		return true
	})
	return reason
}

// quotedWord reports whether a here-document's delimiter is quoted, in
// part or whole, which keeps its body from being expanded.
func quotedWord(w *syntax.Word) bool {
	for _, part := range w.Parts {
		switch x := part.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		case *syntax.Lit:
			if strings.Contains(x.Value, `\`) {
				return true
			}
		}
	}
	return false
}

// maxVariable is the most one NAME=value string of a command's
// environment may hold, on Linux (MAX_ARG_STRLEN): past it the spawn
// fails with a bare "argument list too long".
const maxVariable = 128 << 10

// readsEnv matches an expression that reads acpflow's environment (env.X,
// env['X'], the whole env): what it produces is a secret, as it is in an
// env: value. It may match more than it must (a string that says env.);
// that only scrubs more.
var readsEnv = regexp.MustCompile(`(^|[^.\w])env\b`)

// commandLine is the command line to run and the variables that carry the
// values of its expressions: each ${{ }} rendered alone, in the step's
// scope, and placed as data under the grammar of the shell that runs it.
// A value of an expression that reads env is a secret (added to scrub).
// Without a Render (a step run alone), the rendered with.run is the line.
func (s *step) commandLine(inv *steps.Invocation, shell string, scrub *redact.Scrubber) (string, map[string]string, error) {
	if inv.Render == nil || !strings.Contains(s.run, "${{") {
		line, _ := inv.With["run"].(string)
		if strings.TrimSpace(line) == "" {
			return "", nil, errors.New("run: the command line is empty (as rendered); nothing was started")
		}
		return line, nil, nil
	}
	if shell == "" {
		shell = defaultShell()
	}
	lang, ok := langOf(shell)
	if !ok {
		return "", nil, fmt.Errorf("run: a ${{ }} can reach the shell as data only in a bash or sh command line, and this one runs under shell: %s; set the value in env: and read it from the environment", shell)
	}
	sites, err := placeExprs(s.run, lang)
	if err != nil {
		return "", nil, err
	}
	values := make(map[string]string, len(sites))
	for i, site := range sites {
		v, err := inv.Render(site.src)
		if err != nil {
			return "", nil, fmt.Errorf("run: %s: %w", site.src, err)
		}
		if strings.ContainsRune(v, 0) {
			return "", nil, fmt.Errorf("run: %s: the value holds a NUL byte, which no shell variable can; nothing was started", site.src)
		}
		if size := len(varName(i)) + 1 + len(v) + 1; size > maxVariable {
			return "", nil, fmt.Errorf("run: %s: the value is %s, more than the %s one variable of a command may hold; nothing was started: have the step that makes it write a file, and read the file",
				site.src, bytesize.Format(int64(size)), bytesize.Format(maxVariable))
		}
		if readsEnv.MatchString(site.src[3 : len(site.src)-2]) {
			scrub.Add([]string{v})
		}
		values[varName(i)] = v
	}
	return placedLine(s.run, sites), values, nil
}
