package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"golang.org/x/term"

	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// View renders a run's events for the user.
type View interface {
	steps.Sink
	// Close is called once every run has ended, with their results.
	Close(results []*engine.RunResult)
}

// NewView picks the renderer: JSON lines when asked, the live view on a
// terminal, plain prefixed lines otherwise (logs, CI, pipes, and a
// terminal that reports no width, as a fresh `docker run -t` does, where
// the live view could draw nothing).
func NewView(w io.Writer, jsonLines bool) View {
	switch {
	case jsonLines:
		return &jsonView{w: w}
	case isTerminal(w) && terminalWidth(w) > 0:
		return newLiveView(w)
	}
	return &plainView{w: w}
}

// terminalWidth is the width of the terminal w writes to, 0 if unknown.
func terminalWidth(w io.Writer) int {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

// liveOutput is the mpb option that draws on w: a console writer that keeps
// w (so the stdout guard still sees every write) but knows the terminal
// behind it. mpb only draws live on an *os.File it can tell is a terminal;
// given the guard, it drew nothing until the end.
func liveOutput(w io.Writer) mpb.ContainerOption {
	cw := cupwriter.New(w, false)
	if f, ok := w.(interface{ Fd() uintptr }); ok {
		cw.SetTermFd(int(f.Fd()))
	}
	return mpb.WithConsoleWriter(cw)
}

func isTerminal(w io.Writer) bool {
	// stdout reaches the views through the outputGuard, which has the Fd.
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// jsonView prints each event as one JSON line (`--json`).
type jsonView struct {
	mu sync.Mutex
	w  io.Writer
}

func (v *jsonView) Emit(e steps.Event) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	v.mu.Lock()
	v.w.Write(append(b, '\n'))
	v.mu.Unlock()
}

func (v *jsonView) Close([]*engine.RunResult) {}

// plainView prints one line per step event, prefixed with the step id: the
// view for logs and CI, where a redrawn screen would be noise. What it
// prints passes through termtext.Sanitize: an agent's text must not drive
// the terminal (the JSON view and --output keep it exact).
type plainView struct {
	mu sync.Mutex
	w  io.Writer
	// each counts the elements of each for-each step, for `N/M done`.
	each forEachCounts
	// resume says how to take a run up again; nil: the summary does not.
	resume func(runID string) string
}

// questions is where a person is asked (termAsker): between the lines.
func (v *plainView) questions() io.Writer { return lockedWriter{&v.mu, v.w} }

func (v *plainView) Emit(e steps.Event) {
	v.mu.Lock()
	each := ""
	if c := v.each.count(e); c != nil {
		each = c.String()
	}
	v.mu.Unlock()
	line := plainLine(e)
	if line == "" {
		return
	}
	if each != "" {
		switch d := e.Data.(type) {
		case steps.ElementEnd:
			line = elementLine(d, each)
		case steps.StepEnd:
			line = stepEndLine(d, each)
		}
	}
	if e.Step != "" {
		line = "[" + e.Step + elementMark(e.Index) + "] " + line
	}
	// Errors may carry the agent's text over several lines (its stderr):
	// each line after the first is indented under its event, so that no
	// text can pass for a line of acpflow's own ("[deploy] succeeded").
	// Titles, ids and kinds are escaped onto their one line (plainLine).
	line = strings.ReplaceAll(strings.TrimRight(termtext.Sanitize(line), "\n"), "\n", "\n    ")
	v.mu.Lock()
	fmt.Fprintln(v.w, line)
	v.mu.Unlock()
}

// plainLine words one event, or returns "" for events too fine for it.
func plainLine(e steps.Event) string {
	switch d := e.Data.(type) {
	case steps.RunStart:
		return fmt.Sprintf("run %s: %s", e.RunID, d.Workflow)
	case steps.StepStart:
		if d.Attempt > 1 {
			return fmt.Sprintf("started (attempt %d)", d.Attempt)
		}
		return "started"
	case steps.Permission:
		return fmt.Sprintf("permission %s %s: %s -> %s (%s, rule %s%s)%s", termtext.Line(d.Kind, kindMax), termtext.Quote(d.Title, titleMax), d.Decision,
			termtext.Line(outcome(d.PermissionRecord), idMax), words.Policy(d.Layer, d.Policy), d.Rule, askSuffix(d.PermissionRecord), ReasonSuffix(d.Reason))
	case acpagent.Asking:
		return fmt.Sprintf("permission %s: %s", termtext.Quote(d.Title, titleMax), waitingText(d))
	case steps.Unasked:
		return fmt.Sprintf("unasked %s %s: ran without asking%s; the policy would %s (%s, rule %s)%s", termtext.Line(d.Kind, kindMax),
			termtext.Quote(unaskedWhat(d.PermissionRecord), commandMax), UnaskedEnd(d.Status), d.Would, words.Policy(d.Layer, d.Policy), d.Rule, ReasonSuffix(d.Reason))
	case acpagent.ModeRestored:
		return fmt.Sprintf("mode %s lets the agent decide alone: set back to %s", termtext.Quote(d.From, idMax), termtext.Quote(d.To, idMax))
	case steps.Warning:
		return "warning: " + d.Message
	case steps.Retry:
		return fmt.Sprintf("retrying in %d ms: %s", d.AfterMS, d.Error)
	case acpagent.CancelSent:
		return "cancelling: session/cancel sent"
	case acpagent.SchemaRetry:
		return fmt.Sprintf("the answer does not match output-schema; follow-up %d of %d: %s", d.Retry, d.Retries, strings.Join(d.Errors, "; "))
	case steps.ElementEnd:
		return elementLine(d, "")
	case steps.StepEnd:
		return stepEndLine(d, "")
	}
	return ""
}

// elementMark is " #INDEX" for a for-each element's event, else "": the
// element a line is of ("[review #2] started").
func elementMark(index *int) string {
	if index == nil {
		return ""
	}
	return fmt.Sprintf(" #%d", *index)
}

// stepEndLine words a step_end, with its for-each's count when each is
// not "" ("failed in 2s (error), 3/5 done, 1 failed: item 2: …").
func stepEndLine(d steps.StepEnd, each string) string {
	s := fmt.Sprintf("%s in %s", d.Status, words.Duration(d.DurationMS))
	if d.StopReason != "" {
		s += " (" + d.StopReason + ")"
	}
	if each != "" {
		s += ", " + each
	}
	if d.Usage != nil {
		s += ", " + words.Usage(d.Usage)
	}
	if d.Error != "" {
		s += ": " + d.Error
	}
	return s
}

// elementLine words an element_end, with its step's count so far.
func elementLine(d steps.ElementEnd, each string) string {
	s := fmt.Sprintf("%s in %s", d.Status, words.Duration(d.DurationMS))
	if d.StopReason != "" {
		s += " (" + d.StopReason + ")"
	}
	if each != "" {
		s += ", " + each
	}
	if d.Error != "" {
		s += ": " + d.Error
	}
	return s
}

func (v *plainView) Close(results []*engine.RunResult) {
	for _, res := range results {
		v.summary(res)
	}
}

// setResume makes the summary of a run that failed or was interrupted
// end with how to take it up (Executor.ResumeHint).
func (v *plainView) setResume(hint func(runID string) string) { v.resume = hint }

// summary prints how a run ended, its for-each steps' counts, its outputs
// (in the order the workflow writes them) and, when it did not succeed,
// how to resume it.
func (v *plainView) summary(res *engine.RunResult) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fmt.Fprintf(v.w, "run %s %s in %s", res.RunID, res.Status, words.Duration(res.DurationMS))
	if res.Usage != nil {
		fmt.Fprintf(v.w, ", %s", words.RunUsage(res.Usage))
	}
	if res.Error != "" {
		fmt.Fprintf(v.w, ": %s", IndentLines(strings.TrimRight(res.Error, "\n"), "    "))
	}
	fmt.Fprintln(v.w)
	for _, c := range v.each.of(res.RunID) {
		fmt.Fprintf(v.w, "  %s: %s\n", c.step, c)
	}
	if len(res.Outputs) > 0 {
		fmt.Fprintln(v.w, "outputs:")
		for _, k := range OutputNames(res.Outputs, res.OutputNames) {
			s := termtext.Sanitize(OutputText(res.Outputs[k]))
			if strings.Contains(s, "\n") {
				fmt.Fprintf(v.w, "  %s: |\n    %s\n", k, strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    "))
			} else {
				fmt.Fprintf(v.w, "  %s: %s\n", k, s)
			}
		}
	}
	if v.resume != nil && (res.Status == engine.StatusFailed || res.Status == engine.StatusCancelled) {
		fmt.Fprintf(v.w, "resume with: %s\n", v.resume(res.RunID))
	}
}

// OutputText is an output's value for a person: a string as it is, unless
// it holds a JSON object or list (what a template gives for a value with
// members), which is indented, members over several lines, as is any
// value that is no string.
func OutputText(v any) string {
	s, ok := v.(string)
	if !ok {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') || !json.Valid([]byte(t)) {
		return s
	}
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(t), "", "  ") != nil {
		return s
	}
	return buf.String()
}

// OutputNames is the names of outputs in the order written: those of
// order first (the workflow's order, as the run recorded it), then any
// other in name order (a run recorded before the order was kept).
func OutputNames(outputs map[string]any, order []string) []string {
	names := make([]string, 0, len(outputs))
	seen := make(map[string]bool, len(order))
	for _, k := range order {
		if _, ok := outputs[k]; ok && !seen[k] {
			names, seen[k] = append(names, k), true
		}
	}
	var rest []string
	for k := range outputs {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// forEachCounts follows the elements of the for-each steps of runs, from
// their events: how many there are (step_start's elements) and how each
// ended (element_end). Its users hold their own lock.
type forEachCounts struct {
	steps map[[2]string]*forEachCount // by run id and step id
	order []*forEachCount             // as first seen
}

// forEachCount is one for-each step's elements.
type forEachCount struct {
	run, step                    string
	total                        int
	succeeded, failed, cancelled int
	ended                        bool // the step's step_end came
	running                      map[int]bool
}

// count takes e into the counts; it returns the count of e's step when
// the step is a for-each one, else nil.
func (fc *forEachCounts) count(e steps.Event) *forEachCount {
	key := [2]string{e.RunID, e.Step}
	c := fc.steps[key]
	if c == nil {
		d, ok := e.Data.(steps.StepStart)
		if !ok || e.Index == nil {
			return nil
		}
		if fc.steps == nil {
			fc.steps = map[[2]string]*forEachCount{}
		}
		c = &forEachCount{run: e.RunID, step: e.Step, total: d.Elements, running: map[int]bool{}}
		fc.steps[key] = c
		fc.order = append(fc.order, c)
	}
	switch d := e.Data.(type) {
	case steps.StepStart:
		if e.Index != nil {
			c.running[*e.Index] = true
		}
	case steps.ElementEnd:
		if e.Index != nil {
			delete(c.running, *e.Index)
		}
		switch engine.Status(d.Status) {
		case engine.StatusSucceeded:
			c.succeeded++
		case engine.StatusFailed:
			c.failed++
		default:
			c.cancelled++
		}
	case steps.StepEnd:
		c.ended = true
	}
	return c
}

// of is the counts of the for-each steps of run id, in the order they
// started.
func (fc *forEachCounts) of(id string) []*forEachCount {
	var out []*forEachCount
	for _, c := range fc.order {
		if c.run == id {
			out = append(out, c)
		}
	}
	return out
}

// String is "3/5 done", with ", 1 failed", ", 1 cancelled" and, once the
// step ended, ", 2 not started" when there are any.
func (c *forEachCount) String() string {
	s := fmt.Sprintf("%d/%d done", c.succeeded, c.total)
	if c.failed > 0 {
		s += fmt.Sprintf(", %d failed", c.failed)
	}
	if c.cancelled > 0 {
		s += fmt.Sprintf(", %d cancelled", c.cancelled)
	}
	if n := c.total - c.succeeded - c.failed - c.cancelled; c.ended && n > 0 {
		s += fmt.Sprintf(", %d not started", n)
	}
	return s
}

func outcome(r policies.PermissionRecord) string {
	if r.Outcome == "selected" {
		return r.OptionID
	}
	return "cancelled"
}

// askSuffix says who answered a request its policy asked about when a
// person did (the reason says it when the fallback did).
func askSuffix(r policies.PermissionRecord) string {
	switch {
	case r.Ask == "person" && (r.AnsweredBy == "" || r.AnsweredBy == policies.ByTerminal):
		return ", you answered"
	case r.Ask == "person":
		return ", answered by " + termtext.Line(r.AnsweredBy, idMax) + " (" + r.Approval + ")"
	case r.Ask == "grant":
		return ", granted for the run by " + termtext.Line(r.AnsweredBy, idMax) + " (" + r.Approval + ")"
	}
	return ""
}

// atTerminal says whether the request is put to the person at this
// terminal.
func atTerminal(d acpagent.Asking) bool {
	return d.Approval == "" || slices.Contains(d.Approvers, policies.ByTerminal)
}

// waitingText says what a step waiting for a person waits for: the
// terminal, or an approval others answer (docs/policies.md#approvals).
func waitingText(d acpagent.Asking) string {
	if atTerminal(d) {
		return "waiting for your answer"
	}
	return "waiting for an answer: acpflow approve " + d.Approval + " allow|reject, or acpflow ui"
}

// ReasonSuffix is ": reason", cut to a line, or "" without one.
func ReasonSuffix(r string) string {
	if r != "" {
		return ": " + termtext.Line(r, reasonMax)
	}
	return ""
}

// lockedWriter writes to w holding mu, so that a question is not cut by a
// line of the view.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// unaskedWhat is what an unasked call ran: its command, else its title.
func unaskedWhat(r policies.PermissionRecord) string {
	if r.Command != "" {
		return r.Command
	}
	return r.Title
}

// UnaskedEnd is how an unasked call's line says it ended: " and failed"
// for a call that started and failed (recorded, and failing no step); ""
// for one that completed, or whose end the record does not say.
func UnaskedEnd(status string) string {
	if status == "failed" {
		return " and failed"
	}
	return ""
}
