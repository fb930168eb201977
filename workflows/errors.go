package workflows

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Error is one problem in a workflow file, at the node that causes it.
type Error struct {
	File string
	Line int // 1-based; 0 when the problem has no position
	Col  int // 1-based, in characters
	Msg  string

	// source is the text of line Line, kept so the error renders the
	// offending line without the file at hand.
	source string
}

// Error renders the error as `FILE:LINE:COL: message`, then the source line
// with a caret under the column, the form compilers use, so that a user
// sees the node without opening the file.
func (e *Error) Error() string {
	if e.Line <= 0 {
		return e.File + ": " + e.Msg
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	num := strconv.Itoa(e.Line)
	gutter := strings.Repeat(" ", len(num))
	line, col := clip(e.source, e.Col)
	fmt.Fprintf(&b, "\n %s | %s\n %s | %s^", num, line, gutter, caretIndent(line, col))
	return b.String()
}

// clipWidth is the most of a source line an error shows: a minified or
// generated line is cut to the part around the column.
const clipWidth = 120

// clip cuts a long line to clipWidth characters around col, marking each
// cut with "...", and returns the column in the cut line.
func clip(line string, col int) (string, int) {
	r := []rune(line)
	if len(r) <= clipWidth {
		return line, col
	}
	start := max(0, min(col-1-clipWidth/2, len(r)-clipWidth))
	end := min(len(r), start+clipWidth)
	out := string(r[start:end])
	if start > 0 {
		out = "..." + out
		col = col - start + 3
	}
	if end < len(r) {
		out += "..."
	}
	return out, col
}

// caretIndent is the run of blanks that puts a caret under column col of
// line: tabs are kept as tabs so the caret lines up in any tab width.
func caretIndent(line string, col int) string {
	var b strings.Builder
	i := 1
	for _, r := range line {
		if i >= col {
			break
		}
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		i++
	}
	for ; i < col; i++ {
		b.WriteByte(' ')
	}
	return b.String()
}

// Errors is every problem found in one workflow file, in the order of their
// positions. Load and Parse return it (use errors.As) so that a user fixes
// all of them in one round instead of one per run of `validate`.
type Errors []*Error

// Error joins the rendered errors, one after the other.
func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// sortByPosition orders errors by line and column, keeping the order in
// which they were found for errors at the same place.
func (es Errors) sortByPosition() {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Line != es[j].Line {
			return es[i].Line < es[j].Line
		}
		return es[i].Col < es[j].Col
	})
}

// pos is a position in the file.
type pos struct{ line, col int }

// errorList collects the errors of one file.
type errorList struct {
	file  string
	lines []string // the file's lines, for the source line of each error
	errs  Errors
}

func newErrorList(file string, src []byte) *errorList {
	return &errorList{file: file, lines: splitLines(string(src))}
}

// lineBreaks are YAML's line breaks: a file from an old Mac counts its
// lines as the parser does.
var lineBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n")

func splitLines(src string) []string {
	return strings.Split(lineBreaks.Replace(src), "\n")
}

func (l *errorList) at(p pos, format string, args ...any) {
	l.errs = append(l.errs, l.make(p, fmt.Sprintf(format, args...)))
}

func (l *errorList) make(p pos, msg string) *Error {
	e := &Error{File: l.file, Line: p.line, Col: p.col, Msg: msg}
	if p.line >= 1 && p.line <= len(l.lines) {
		e.source = l.lines[p.line-1]
	}
	if e.Line > 0 && e.Col < 1 {
		e.Col = 1
	}
	return e
}

// result is nil when nothing was found, so that a caller's `err != nil`
// works (a nil Errors in an error interface is not nil).
func (l *errorList) result() error {
	if len(l.errs) == 0 {
		return nil
	}
	l.errs.sortByPosition()
	// One mistake can be found twice (the same reference in two ${{ }} of
	// a string); say it once.
	type key struct {
		line, col int
		msg       string
	}
	seen := map[key]bool{}
	out := l.errs[:0]
	for _, e := range l.errs {
		if k := (key{e.Line, e.Col, e.Msg}); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	l.errs = out
	return out
}
