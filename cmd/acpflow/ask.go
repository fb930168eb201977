package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
)

// termAsker puts the permission requests a policy decided to ask about to
// the person at the terminal (docs/policies.md#ask): one question at a
// time, in the order they came, while the other steps run on. The answer
// is the number of an option, read as a line from the terminal.
type termAsker struct {
	out io.Writer // where questions are written: above the live view, or the plain lines

	turn  chan struct{} // held by the question being asked
	lines chan string   // the terminal's lines, read by one goroutine; closed at EOF
}

// newTermAsker returns an asker reading in, or nil when in is not a
// terminal (a pipe, /dev/null, CI): nobody is there to answer, and the
// policies' ask-fallback decides.
func newTermAsker(in *os.File, out io.Writer) *termAsker {
	if in == nil || !term.IsTerminal(int(in.Fd())) {
		return nil
	}
	a := &termAsker{out: out, turn: make(chan struct{}, 1), lines: make(chan string)}
	go a.read(in)
	return a
}

// read hands the terminal's lines to the question being asked. It is the
// only reader, so a question given up (its turn cancelled) leaves no read
// behind to swallow the next answer.
func (a *termAsker) read(in io.Reader) {
	defer close(a.lines)
	r := bufio.NewReader(in)
	for {
		line, err := readAnswer(r)
		if err != nil && line == "" {
			return
		}
		a.lines <- line
		if err != nil {
			return
		}
	}
}

// maxAnswer bounds what is kept of a line typed at the terminal: an answer
// is a number, and a longer line (a paste gone wrong) is no answer, not
// the end of the terminal.
const maxAnswer = 1 << 10

// readAnswer reads one line, to its end however long, and returns at most
// maxAnswer bytes of it, without its newline.
func readAnswer(r *bufio.Reader) (string, error) {
	line, err := runs.ReadLineHead(r, maxAnswer)
	return strings.TrimRight(string(line), "\r\n"), err
}

// Ask implements policies.Asker.
func (a *termAsker) Ask(ctx context.Context, q *policies.Question) (policies.Reply, error) {
	if q.Pending != nil {
		q.Pending("", []string{policies.ByTerminal})
	}
	id, err := a.pick(ctx, q)
	return policies.Reply{OptionID: id, By: policies.ByTerminal, At: time.Now()}, err
}

// pick puts q on the terminal, once it is q's turn, and returns the id of
// the option typed.
func (a *termAsker) pick(ctx context.Context, q *policies.Question) (string, error) {
	select {
	case a.turn <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-a.turn }()
	// A line typed before the question is no answer to it.
	for drained := false; !drained; {
		select {
		case _, ok := <-a.lines:
			if !ok {
				return "", policies.ErrNoOneToAsk
			}
		default:
			drained = true
		}
	}
	opts := q.Request.Options
	if len(opts) == 0 {
		return "", fmt.Errorf("the agent offered no option to pick")
	}
	io.WriteString(a.out, question(q))
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(a.out, "acpflow: step %s: no longer waiting for an answer (%s)\n", q.Request.Step, termtext.Line(context.Cause(ctx).Error(), askReasonMax))
			return "", ctx.Err()
		case line, ok := <-a.lines:
			if !ok {
				fmt.Fprintf(a.out, "acpflow: the terminal closed: the step's ask-fallback decides\n")
				return "", policies.ErrNoOneToAsk
			}
			n, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil || n < 1 || n > pickable(opts) {
				fmt.Fprintf(a.out, "acpflow: answer with a number from 1 to %d, then Enter\n", pickable(opts))
				continue
			}
			return opts[n-1].ID, nil
		}
	}
}

// Bounds of what a question shows of the agent's words, in bytes (each
// cut says so): enough for any real title, command, path or option name,
// and no agent can push the options off the screen with one.
const (
	askTitleMax   = 300
	askCommandMax = 2000
	askPathMax    = 500
	askNameMax    = 100
	askKindMax    = 40
	askReasonMax  = 500
	askFilesShown = 20
	askOptionsMax = 50 // the options a person can pick; an agent offering more is shown the first
)

// question words a request for the person who answers it: which step and
// agent ask, the tool, its command and files, the rule that asked, and
// the agent's options, numbered; the numbers a person may type are
// acpflow's alone. Everything that came from the agent is shown on the
// one line acpflow gives it, escaped and bounded (termtext.Line, Quote):
// an agent's line break, carriage return or cursor move cannot add a line
// that looks like an option.
func question(q *policies.Question) string {
	r, t := q.Request, q.Request.Tool
	var b strings.Builder
	fmt.Fprintf(&b, "\nacpflow: step %s (agent %s) asks permission: %s %s\n", r.Step, termtext.Line(r.Agent, askNameMax),
		termtext.Line(t.Kind, askKindMax), termtext.Quote(t.Title, askTitleMax))
	if t.Command != "" && t.Command != t.Title {
		fmt.Fprintf(&b, "  command: %s\n", termtext.Quote(t.Command, askCommandMax))
	}
	for i, l := range t.Locations {
		if i == askFilesShown {
			fmt.Fprintf(&b, "  … and %d more file(s)\n", len(t.Locations)-i)
			break
		}
		where := "outside the workspace"
		if l.InWorkspace {
			where = "in the workspace"
		}
		fmt.Fprintf(&b, "  file: %s (%s)\n", termtext.Quote(l.Path, askPathMax), where)
	}
	fmt.Fprintf(&b, "  asked by rule %s", termtext.Line(q.Rule, askNameMax))
	if q.Reason != "" {
		fmt.Fprintf(&b, ": %s", termtext.Line(q.Reason, askReasonMax))
	}
	b.WriteString("\n")
	n := pickable(r.Options)
	for i, o := range r.Options[:n] {
		fmt.Fprintf(&b, "  %d) %s (%s)\n", i+1, termtext.Quote(o.Name, askNameMax), optionKind(o.Kind))
	}
	if more := len(r.Options) - n; more > 0 {
		fmt.Fprintf(&b, "  … and %d more option(s), which cannot be picked here\n", more)
	}
	fmt.Fprintf(&b, "answer with 1-%d and Enter:\n", n)
	return termtext.Sanitize(b.String())
}

// pickable is how many of the agent's options a person is offered: the
// first askOptionsMax.
func pickable(opts []policies.Option) int {
	return min(len(opts), askOptionsMax)
}

// optionKind words an option's kind: an ACP kind as it is, any other as
// the agent wrote it, quoted and marked, since it grants nothing acpflow
// knows of.
func optionKind(kind string) string {
	if _, ok := policies.DecisionOf(kind); ok {
		return kind
	}
	return "unknown kind " + termtext.Quote(kind, askKindMax)
}
