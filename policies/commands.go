package policies

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Bounds on the work Commands does for one line, so that a hostile line
// costs bounded time and memory. A line past any of them fails closed, as
// one that does not parse: the caller sees an error, never a partial list.
const (
	// maxLineBytes is the longest line read. Agents send heredocs that
	// write whole files through a shell; 128 KiB covers those and parses
	// in a few milliseconds.
	maxLineBytes = 128 << 10
	// maxNesting bounds open parentheses and braces: the parser recurses on
	// them, and its time grows faster than linearly with their depth.
	maxNesting = 100
	// maxScriptDepth bounds scripts inside scripts (`sh -c`, `eval`,
	// `env -S`), each of which is parsed in turn.
	maxScriptDepth = 8
	// maxCommands and maxOutputBytes bound the result: substitutions
	// nested in arguments appear both in their command's text and as
	// commands of their own.
	maxCommands    = 4096
	maxOutputBytes = 1 << 20
)

// errCommandLimit is the cause of every bound exceeded, so tests can tell
// a limit from a syntax error.
var errCommandLimit = errors.New("command line too large or too deeply nested")

// Commands parses a shell command line (bash syntax) and returns every
// simple command it runs (the rule helper `commands`), each as its program's
// basename followed by its arguments, joined by single spaces:
// `make && FOO=1 sudo "/bin/rm" -rf 'build dir'` gives
// ["make", "rm -rf build dir"].
//
// Commands are found in lists, pipelines, subshells, `{ }` groups, the
// bodies of if, while, for and case, functions, and in command and process
// substitutions wherever they are (arguments, double quotes, assignments,
// redirections, here-documents); a substitution's commands follow the
// command that contains it. In each command:
//   - quotes and escapes are resolved (`\rm`, `"rm"`, `$'\x72m'` are all
//     rm); a word with an expansion keeps its source text (`$HOME/x`,
//     `$(date)`);
//   - leading assignments (`FOO=1`) are removed;
//   - the wrappers exec, time, nohup, sudo, doas, env, xargs, command,
//     builtin, nice, timeout, stdbuf and ionice are removed with their
//     options (`sudo -u root env -i FOO=1 nice -n 5 rm x` is rm), as many
//     as there are; a wrapper with no command left is kept;
//   - the program is its basename (`/usr/bin/rm` is rm) when it is written
//     without expansions;
//   - a command run by xargs ends with the argument `...`, for those xargs
//     reads (`xargs rm < list` gives "rm ..."), unless -I places them.
//
// The scripts a command runs are parsed in turn and their commands follow
// it: `sh`, `bash`, `zsh`, `dash`, `ksh`, `mksh` and `ash` with `-c` (in any
// flag cluster: `-lc`, `-euc`), `eval`'s arguments, and `env -S`.
//
// # Notes
//
// A line that does not parse, or that is past the bounds (128 KiB, 100
// nested parentheses or braces, 8 nested scripts, 4096 commands, 1 MiB of
// result), is an error: a rule that calls commands on it fails, and the
// policy rejects (fails closed) rather than judging a line it cannot read.
//
// The result may over-report (`command -v rm` gives rm; a function's body
// counts although it may never be called) but does not hide a command the
// line runs by itself. What it cannot see: aliases, the contents of
// script files (`bash x.sh`), commands built from expansions (`$CMD x` is
// reported as `$CMD x`), and programs that run their arguments other than
// the wrappers above (`find -exec`, `git -c alias.x=!rm`).
func Commands(line string) ([]string, error) {
	var w commandWalker
	if err := w.line(line, 0); err != nil {
		return nil, err
	}
	return w.commands, nil
}

// Programs is the program basename of each command of Commands (the rule
// helper `programs`): `make && sudo /bin/rm -rf x` gives ["make", "rm"].
func Programs(line string) ([]string, error) {
	var w commandWalker
	if err := w.line(line, 0); err != nil {
		return nil, err
	}
	return w.programs, nil
}

// commandWalker collects the commands of a line and of the scripts it
// runs, and counts the work done against the bounds.
type commandWalker struct {
	commands []string
	programs []string
	bytes    int
	err      error
}

// shellWord is one word of a command, resolved: literal is false when the
// word has an expansion, whose source text then stands in text.
type shellWord struct {
	text    string
	literal bool
}

var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// line adds the commands of one script; depth counts the scripts around it.
func (w *commandWalker) line(src string, depth int) error {
	switch {
	case depth > maxScriptDepth:
		return fmt.Errorf("%w: scripts nested more than %d deep", errCommandLimit, maxScriptDepth)
	case len(src) > maxLineBytes:
		return fmt.Errorf("%w: %d bytes, the limit is %d", errCommandLimit, len(src), maxLineBytes)
	case nesting(src) > maxNesting:
		return fmt.Errorf("%w: more than %d nested parentheses or braces", errCommandLimit, maxNesting)
	}
	if argvs, ok := plainLine(src); ok {
		for _, argv := range argvs {
			if w.argv(argv, depth); w.err != nil {
				return w.err
			}
		}
		return nil
	}
	return w.parse(src, depth)
}

// parse adds the commands of one script, read by the parser.
func (w *commandWalker) parse(src string, depth int) error {
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	// The parser allocates fresh nodes on every Parse, so f outlives its
	// return to the pool.
	parsers.Put(p)
	if err != nil {
		return fmt.Errorf("cannot parse the command line: %w", err)
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if w.err != nil {
			return false
		}
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			argv := make([]shellWord, len(call.Args))
			for i, word := range call.Args {
				argv[i] = resolveWord(word, src)
			}
			w.argv(argv, depth)
		}
		return true
	})
	return w.err
}

// argv adds one simple command, its wrappers removed, and the commands of
// the script it runs, if any.
func (w *commandWalker) argv(argv []shellWord, depth int) {
	argv, split, isSplit := unwrap(argv)
	if isSplit {
		// env -S 'rm -rf' x: env splits the string into words and runs
		// them with the remaining arguments.
		var b strings.Builder
		b.WriteString(split)
		for _, a := range argv {
			b.WriteByte(' ')
			b.WriteString(quoteWord(a.text))
		}
		w.fail(w.line(b.String(), depth+1))
		return
	}
	prog := argv[0].text
	if argv[0].literal {
		prog = programName(prog)
	}
	n := len(prog)
	for _, a := range argv[1:] {
		n += 1 + len(a.text)
	}
	if len(w.commands) >= maxCommands || w.bytes+n > maxOutputBytes {
		w.fail(fmt.Errorf("%w: more than %d commands or %d bytes of them", errCommandLimit, maxCommands, maxOutputBytes))
		return
	}
	w.bytes += n
	var b strings.Builder
	b.Grow(n)
	b.WriteString(prog)
	for _, a := range argv[1:] {
		b.WriteByte(' ')
		b.WriteString(a.text)
	}
	w.commands = append(w.commands, b.String())
	w.programs = append(w.programs, prog)
	if !argv[0].literal {
		return
	}
	if script, ok := shellScript(argv); ok {
		w.fail(w.line(script.text, depth+1))
	} else if prog == "eval" && len(argv) > 1 {
		args := make([]string, len(argv)-1)
		for i, a := range argv[1:] {
			args[i] = a.text
		}
		w.fail(w.line(strings.Join(args, " "), depth+1))
	}
}

func (w *commandWalker) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// programName is the basename of a program as written: `/bin/rm` is rm.
func programName(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	return s
}

// nesting is the deepest run of open parentheses and braces in s, quotes
// ignored: an upper bound on what the parser will recurse into, found
// without parsing.
func nesting(s string) int {
	depth, most := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '{':
			if depth++; depth > most {
				most = depth
			}
		case ')', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return most
}

// resolveWord gives a word's value with quotes and escapes resolved, or,
// where it has expansions, their source text in place of their value.
func resolveWord(word *syntax.Word, src string) shellWord {
	if len(word.Parts) == 1 {
		if l, ok := word.Parts[0].(*syntax.Lit); ok && !strings.Contains(l.Value, `\`) {
			return shellWord{text: l.Value, literal: true}
		}
	}
	var b strings.Builder
	literal := true
	for _, part := range word.Parts {
		literal = writeWordPart(&b, part, src, false) && literal
	}
	return shellWord{text: b.String(), literal: literal}
}

// writeWordPart writes one part of a word as resolveWord does, and reports
// whether it was literal. inDouble says the part is inside double quotes,
// where a backslash escapes fewer characters.
func writeWordPart(b *strings.Builder, part syntax.WordPart, src string, inDouble bool) bool {
	switch p := part.(type) {
	case *syntax.Lit:
		unescape(b, p.Value, inDouble)
		return true
	case *syntax.SglQuoted:
		if !p.Dollar {
			b.WriteString(p.Value)
			return true
		}
		// $'…': ANSI-C escapes (with nil arguments, Format leaves % be);
		// the value ends at a NUL as bash's does.
		s, _, err := expand.Format(nil, p.Value, nil)
		if err != nil {
			s = p.Value
		}
		s, _, _ = strings.Cut(s, "\x00")
		b.WriteString(s)
		return true
	case *syntax.DblQuoted:
		literal := true
		for _, q := range p.Parts {
			literal = writeWordPart(b, q, src, true) && literal
		}
		return literal
	}
	start, end := part.Pos().Offset(), part.End().Offset()
	if start <= end && end <= uint(len(src)) {
		b.WriteString(src[start:end])
	}
	return false
}

// unescape writes a literal's value with its backslashes resolved: outside
// double quotes each escapes the next character; inside, only $ ` " \ and
// a newline.
func unescape(b *strings.Builder, s string, inDouble bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		switch {
		case next == '\n':
			i++ // a line continuation is nothing
		case !inDouble || next == '$' || next == '`' || next == '"' || next == '\\':
			b.WriteByte(next)
			i++
		default:
			b.WriteByte(c)
		}
	}
}

// wrapper describes a program that runs its arguments as a command after
// options of its own, such as sudo or timeout.
type wrapper struct {
	argOpts     string   // short options that take a value: the rest of their word, or the next word
	longArgOpts []string // long options that take the next word as value when written without "="
	assigns     bool     // NAME=VALUE words may come before the command (env, sudo)
	operands    int      // words before the command that are not options (timeout's duration)
	splitOpt    byte     // env's -S: the value is a command line of its own
	splitLong   string
	readsArgs   bool // xargs: the command gets more arguments from stdin
}

// xargsMarker is the last argument of a command xargs runs, standing for
// those it reads, unless -I says where they go.
var xargsMarker = shellWord{text: "..."}

// replaces reports whether an xargs option puts the input in place of a
// placeholder (-I, -i, --replace) rather than after the arguments.
func replaces(w shellWord) bool {
	a := w.text
	if strings.HasPrefix(a, "--replace") {
		return true
	}
	if len(a) < 2 || a[0] != '-' || a[1] == '-' {
		return false
	}
	for j := 1; j < len(a); j++ {
		switch a[j] {
		case 'I', 'i':
			return true
		case 'a', 'd', 'E', 'L', 'n', 'P', 's':
			return false // the rest is the option's value
		}
	}
	return false
}

// wrappers are the programs Commands removes from the front of a command.
var wrappers = map[string]wrapper{
	"builtin": {},
	"command": {},
	"doas":    {argOpts: "Cu"},
	"env":     {argOpts: "uCSP", longArgOpts: []string{"unset", "chdir", "split-string"}, assigns: true, splitOpt: 'S', splitLong: "split-string"},
	"exec":    {argOpts: "a"},
	"ionice":  {argOpts: "cnpPu", longArgOpts: []string{"class", "classdata", "pid", "pgid", "uid"}},
	"nice":    {argOpts: "n", longArgOpts: []string{"adjustment"}},
	"nohup":   {},
	"stdbuf":  {argOpts: "ioe", longArgOpts: []string{"input", "output", "error"}},
	"sudo": {argOpts: "CDgpRrTtUu", assigns: true, longArgOpts: []string{
		"chdir", "chroot", "close-from", "command-timeout", "group", "host", "other-user", "prompt", "role", "type", "user"}},
	"time":    {argOpts: "fo", longArgOpts: []string{"format", "output"}},
	"timeout": {argOpts: "ks", longArgOpts: []string{"kill-after", "signal"}, operands: 1},
	"xargs": {argOpts: "adEILnPs", readsArgs: true, longArgOpts: []string{
		"arg-file", "delimiter", "max-args", "max-chars", "max-lines", "max-procs", "process-slot-var"}},
}

// unwrap removes the wrappers from the front of argv. When one of them is
// env with -S, it stops there and returns the split string and the words
// after it instead. A wrapper with nothing after it is the command itself.
func unwrap(argv []shellWord) (cmd []shellWord, split string, isSplit bool) {
	for argv[0].literal {
		wr, ok := wrappers[programName(argv[0].text)]
		if !ok {
			break
		}
		rest, split, isSplit := wr.command(argv[1:])
		if isSplit {
			return rest, split, true
		}
		if len(rest) == 0 {
			break
		}
		if wr.readsArgs && !slices.ContainsFunc(argv[1:len(argv)-len(rest)], replaces) {
			// xargs rm < list runs rm with the words of list.
			rest = append(slices.Clip(rest), xargsMarker)
		}
		argv = rest
	}
	return argv, "", false
}

// command skips the wrapper's options, assignments and operands in args
// and returns the command they leave.
func (wr wrapper) command(args []shellWord) (cmd []shellWord, split string, isSplit bool) {
	i := 0
options:
	for i < len(args) {
		a := args[i].text
		switch {
		case a == "--":
			i++
			break options
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a[2:], "=")
			takes := contains(wr.longArgOpts, name)
			if takes && !hasValue && i+1 < len(args) {
				i++
				value = args[i].text
			}
			if takes && name == wr.splitLong && wr.splitLong != "" {
				return args[i+1:], value, true
			}
			i++
		case len(a) > 1 && a[0] == '-':
			i++
			for j := 1; j < len(a); j++ {
				if strings.IndexByte(wr.argOpts, a[j]) < 0 {
					continue
				}
				value := a[j+1:]
				if value == "" && i < len(args) {
					value = args[i].text
					i++
				}
				if a[j] == wr.splitOpt && wr.splitOpt != 0 {
					return args[i:], value, true
				}
				break
			}
		case wr.assigns && isAssignment(a):
			i++
		default:
			break options
		}
	}
	i = min(i+wr.operands, len(args))
	return args[i:], "", false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// isAssignment reports whether a word is NAME=VALUE (or NAME+=VALUE).
func isAssignment(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		case c == '=' && i > 0:
			return true
		case c == '+' && i > 0 && i+1 < len(s) && s[i+1] == '=':
			return true
		default:
			return false
		}
	}
	return false
}

// shells are the programs whose -c script Commands parses in turn.
var shells = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "ash": true}

// shellScript returns the script of a shell run with -c (`bash -lc
// 'make && rm x'` runs `make && rm x`), read as the shells read their
// options: flag clusters starting with - or +, with -o/-O taking a value,
// up to the first operand, which is the script when a cluster had c.
func shellScript(argv []shellWord) (shellWord, bool) {
	if !argv[0].literal || !shells[programName(argv[0].text)] {
		return shellWord{}, false
	}
	withC := false
	for i := 1; i < len(argv); i++ {
		a := argv[i].text
		switch {
		case a == "--" || a == "-":
			if withC && i+1 < len(argv) {
				return argv[i+1], true
			}
			return shellWord{}, false
		case a == "--rcfile" || a == "--init-file":
			i++
		case strings.HasPrefix(a, "--"):
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'c':
					withC = withC || a[0] == '-'
				case 'o', 'O':
					i++
				}
			}
		default:
			return argv[i], withC
		}
	}
	return shellWord{}, false
}

// quoteWord quotes s for bash so that it parses back to the one word s
// (a NUL, which no argument can hold, is dropped).
func quoteWord(s string) string {
	q, err := syntax.Quote(strings.ReplaceAll(s, "\x00", ""), syntax.LangBash)
	if err != nil {
		// Unreachable without a NUL; quote plainly rather than lose the word.
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return q
}

// plainLine splits a line that needs no parser: words of plain characters
// (letters, digits and _ . / : , + @ % = -), single-quoted strings and
// double-quoted strings without $ ` or \, separated by blanks; commands
// separated by && || | |& ; &; and redirections (> >> < >& <&, after an
// optional fd number) to such a word, which are not part of the command.
// Most command lines agents send are of this kind, and splitting them costs
// a tenth of parsing. ok is false for anything else, including a line
// whose structure is wrong (an empty command, a redirection without a
// target) or that has a reserved word where a command starts; the parser
// then reads it and gives the error, if any. Leading assignments are
// removed here as the parser does; a word with a quote where an assignment
// could be is left to the parser.
//
// # Notes
//
// FuzzCommands checks that every line this accepts gives the parser's
// result.
func plainLine(s string) (argvs [][]shellWord, ok bool) {
	// One array holds every word; each command is a slice of it.
	all := make([]shellWord, 0, 8)
	start := 0
	end := func() bool {
		words := all[start:]
		i := 0
		for i < len(words) && isAssignment(words[i].text) {
			i++
		}
		if len(words) == 0 || i < len(words) && reserved[words[i].text] {
			return false
		}
		if i < len(words) {
			argvs = append(argvs, words[i:len(words):len(words)])
		}
		start = len(all)
		return true
	}
	trailing := false // the last separator was ; or &, which may end the line
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '&' && i+1 < len(s) && s[i+1] == '>':
			return nil, false // &> is a redirection, not a separator
		case c == ';' || c == '&' || c == '|':
			op := 1
			if i+1 < len(s) && (s[i+1] == c && c != ';' || c == '|' && s[i+1] == '&') {
				op = 2
			}
			if !end() {
				return nil, false
			}
			trailing = op == 1 && c != '|'
			i += op
		case c == '<' || c == '>':
			j, ok := redirection(s, i)
			if !ok {
				return nil, false
			}
			trailing = false
			i = j
		case isPlain(c) || c == '\'' || c == '"':
			text, quoted, j, ok := plainWord(s, i)
			if !ok {
				return nil, false
			}
			if j < len(s) && (s[j] == '<' || s[j] == '>') && !quoted && allDigits(text) {
				// 2>&1: the number is the redirection's fd, not a word.
				i = j
				continue
			}
			if quoted && isAssignment(text) {
				return nil, false
			}
			all = append(all, shellWord{text: text, literal: true})
			trailing = false
			i = j
		default:
			return nil, false
		}
	}
	if len(all) > start {
		return argvs, end()
	}
	return argvs, trailing && len(argvs) > 0 || len(s) == 0
}

// plainWord reads the word at s[i:]: plain characters and quoted strings,
// with the quotes removed. ok is false for a quote that does not close or
// a double-quoted string that needs the parser ($, `, \).
func plainWord(s string, i int) (text string, quoted bool, j int, ok bool) {
	j = i
	for j < len(s) && isPlain(s[j]) {
		j++
	}
	if j == len(s) || s[j] != '\'' && s[j] != '"' {
		return s[i:j], false, j, true // the common case: no quote, no copy
	}
	var b strings.Builder
	b.WriteString(s[i:j])
	for j < len(s) {
		switch c := s[j]; {
		case isPlain(c):
			k := j
			for k < len(s) && isPlain(s[k]) {
				k++
			}
			b.WriteString(s[j:k])
			j = k
		case c == '\'' || c == '"':
			k := strings.IndexByte(s[j+1:], c)
			if k < 0 {
				return "", false, 0, false
			}
			body := s[j+1 : j+1+k]
			if c == '"' && strings.ContainsAny(body, "$`\\") || !utf8.ValidString(body) || strings.IndexByte(body, 0) >= 0 {
				return "", false, 0, false // the parser's to judge
			}
			b.WriteString(body)
			j += k + 2
		default:
			return b.String(), true, j, true
		}
	}
	return b.String(), true, j, true
}

// redirection reads the redirection operator at s[i:] and its target word,
// returning where it ends. Here-documents, process substitutions and the
// rarer operators are left to the parser.
func redirection(s string, i int) (j int, ok bool) {
	j = i + 1
	if j < len(s) {
		switch {
		case s[i] == '>' && (s[j] == '>' || s[j] == '&'), s[i] == '<' && s[j] == '&':
			j++
		case s[j] == '<' || s[j] == '>' || s[j] == '(' || s[j] == '|':
			return 0, false // <<, <>, >(, <(, >|
		}
	}
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	if j == len(s) || !isPlain(s[j]) && s[j] != '\'' && s[j] != '"' {
		return 0, false
	}
	_, _, j, ok = plainWord(s, j)
	return j, ok
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isPlain(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("_./:,+@%=-", c) >= 0
}

// reserved are the words that start a compound command where a command
// starts, and the words the parser reads as declarations rather than
// commands; plainLine leaves lines with them to the parser.
var reserved = map[string]bool{
	"case": true, "coproc": true, "do": true, "done": true, "elif": true, "else": true, "esac": true,
	"fi": true, "for": true, "function": true, "if": true, "in": true, "select": true, "then": true,
	"time": true, "until": true, "while": true,
	"declare": true, "export": true, "local": true, "readonly": true, "typeset": true, "nameref": true, "let": true,
}
