package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// liveView redraws one line per step on a terminal: its state, its elapsed
// time and the last line of the agent's text, so a long run shows what each
// agent is doing without scrolling a log. Above the lines it prints the
// run's id; a for-each step's line counts its elements (`2/5 done, 2
// running`), its time running from its first element's start. Below them,
// once the run ended, each failed step's whole error (its line has only
// the first line of it, cut to the width) and the summary.
type liveView struct {
	w      io.Writer
	color  bool
	p      *mpb.Progress
	resume func(runID string) string

	mu    sync.Mutex
	steps map[string]*liveStep
	order []*liveStep // file order
	each  forEachCounts
}

type liveStep struct {
	mu      sync.Mutex // guards the fields below; mpb's render goroutine reads them
	id      string
	state   string
	started time.Time
	ended   time.Time
	last    string // last line of agent text, sanitised
	usage   string // what the agent reported so far ("" before anything)
	err     string // the step's whole error, once it ended with one
	each    string // a for-each's count, "2/5 done, 2 running"; "" for another step
	bar     *mpb.Bar
}

func newLiveView(w io.Writer) *liveView {
	_, noColor := os.LookupEnv("NO_COLOR")
	return &liveView{
		w:     w,
		color: !noColor,
		p:     mpb.New(liveOutput(w), mpb.WithRefreshRate(120*time.Millisecond), mpb.WithWidth(120)),
		steps: map[string]*liveStep{},
	}
}

func (v *liveView) Emit(e steps.Event) {
	if d, ok := e.Data.(steps.RunStart); ok {
		// The run's id above its lines, so that it can be shown or resumed
		// while it runs; then one line per step, in file order, before any
		// of them starts.
		fmt.Fprintf(v.p, "run %s: %s\n", e.RunID, termtext.Line(d.Workflow, titleMax))
		for _, id := range d.Steps {
			v.step(id, e.Time)
		}
	}
	if e.Step == "" {
		return
	}
	s := v.step(e.Step, e.Time)
	v.mu.Lock()
	each := ""
	if c := v.each.count(e); c != nil {
		each = c.String()
		if n := len(c.running); n > 0 && !c.ended {
			each += fmt.Sprintf(", %d running", n)
		}
	}
	v.mu.Unlock()
	s.mu.Lock()
	if each != "" {
		s.each = each
	}
	done := s.apply(e)
	s.mu.Unlock()
	if done {
		s.bar.SetTotal(-1, true)
	}
}

// apply changes the step's line as event e says: its state, its last
// words, its usage. It reports whether the step has ended. s.mu is held.
func (s *liveStep) apply(e steps.Event) bool {
	switch d := e.Data.(type) {
	case steps.StepStart:
		// The time runs from the step's first start: a for-each's next
		// element or a retry does not set it back.
		if s.state == "waiting" {
			s.started = e.Time
		}
		s.state = "running"
		if d.Attempt > 1 {
			s.state = fmt.Sprintf("running (attempt %d)", d.Attempt)
		}
	case acpagent.MessageChunk:
		// s.last is already sanitised; a sequence split across chunks
		// leaves only inert pieces behind. An element's text says whose.
		if e.Index != nil {
			mark := fmt.Sprintf("#%d ", *e.Index)
			s.last = mark + lastLine(termtext.Sanitize(strings.TrimPrefix(s.last, mark)+d.Text))
			break
		}
		s.last = lastLine(termtext.Sanitize(s.last + d.Text))
	case acpagent.Session:
		s.state = "prompting"
	case acpagent.CancelSent:
		s.state = "cancelling"
	case acpagent.Asking:
		s.state = "asking you"
		if !atTerminal(d) {
			s.state = "waiting"
		}
		s.last = waitingText(d) + ": " + termtext.Quote(d.Title, titleMax)
	case steps.UsageReport:
		s.usage = words.Usage(&d.Usage)
	case acpagent.SchemaRetry:
		s.state = fmt.Sprintf("follow-up %d/%d", d.Retry, d.Retries)
		s.last = firstLine(termtext.Sanitize("output-schema: " + strings.Join(d.Errors, "; ")))
	case steps.Permission:
		// The agent's kind and title, escaped onto the step's one line.
		s.last = fmt.Sprintf("permission %s %s: %s%s", termtext.Line(d.Kind, kindMax), termtext.Quote(d.Title, titleMax), d.Decision, askSuffix(d.PermissionRecord))
		if s.state == "asking you" || s.state == "waiting" {
			s.state = "prompting"
		}
	case steps.Unasked:
		s.last = fmt.Sprintf("unasked %s %s: would %s", termtext.Line(d.Kind, kindMax), termtext.Quote(unaskedWhat(d.PermissionRecord), titleMax), d.Would)
	case steps.Warning:
		s.last = firstLine(termtext.Sanitize("warning: " + d.Message))
	case steps.ElementEnd:
		if d.Error != "" {
			s.last = firstLine(termtext.Sanitize(fmt.Sprintf("#%d %s: %s", derefIndex(e.Index), d.Status, d.Error)))
		}
	case steps.StepEnd:
		s.state, s.ended = d.Status, e.Time
		if d.Attempts > 0 {
			s.usage = words.Usage(d.Usage)
		}
		if d.Error != "" {
			s.last = firstLine(termtext.Sanitize(d.Error))
			s.err = d.Error
		}
		return true
	}
	return false
}

// step returns the line of a step, adding it on its first event.
func (v *liveView) step(id string, at time.Time) *liveStep {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.steps[id]
	if s == nil {
		s = &liveStep{id: id, state: "waiting", started: at}
		v.steps[id] = s
		v.order = append(v.order, s)
		s.bar = v.p.New(1, mpb.NopStyle(),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return s.describe(v.color) })),
		)
	}
	return s
}

// describe renders one step's line; called by mpb's render goroutine.
func (s *liveStep) describe(color bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := time.Now()
	if !s.ended.IsZero() {
		end = s.ended
	}
	mark := map[string]string{"succeeded": "✓", "failed": "✗", "skipped": "-", "cancelled": "⊘"}[s.state]
	if mark == "" {
		mark = "•"
	}
	if color {
		switch s.state {
		case "succeeded":
			mark = "\x1b[32m" + mark + "\x1b[0m"
		case "failed", "cancelled":
			mark = "\x1b[31m" + mark + "\x1b[0m"
		}
	}
	elapsed := ""
	if s.state != "waiting" {
		elapsed = end.Sub(s.started).Round(100 * time.Millisecond).String()
	}
	usage := ""
	if s.usage != "" {
		usage = "[" + s.usage + "]  "
	}
	each := ""
	if s.each != "" {
		each = s.each + "  "
	}
	line := fmt.Sprintf("%s %-16s %-12s %6s  %s%s%s", mark, s.id, s.state, elapsed, each, usage, s.last)
	return truncate(line, 160)
}

// questions is where a person is asked (termAsker): above the steps'
// lines, which mpb keeps drawing below.
func (v *liveView) questions() io.Writer { return v.p }

// setResume: see plainView.setResume.
func (v *liveView) setResume(hint func(runID string) string) { v.resume = hint }

// Close draws the last frame, then prints below it each failed step's
// whole error and the plain view's summary.
func (v *liveView) Close(results []*engine.RunResult) {
	v.mu.Lock()
	bars := make([]*mpb.Bar, 0, len(v.steps))
	for _, s := range v.steps {
		bars = append(bars, s.bar)
	}
	order := v.order
	v.mu.Unlock()
	for _, b := range bars {
		b.SetTotal(-1, true)
	}
	v.p.Wait()
	for _, s := range order {
		s.mu.Lock()
		if s.state == string(engine.StatusFailed) && s.err != "" {
			fmt.Fprintf(v.w, "step %s failed: %s\n", s.id, IndentLines(strings.TrimRight(s.err, "\n"), "    "))
		}
		s.mu.Unlock()
	}
	v.mu.Lock()
	each := v.each
	v.mu.Unlock()
	(&plainView{w: v.w, each: each, resume: v.resume}).Close(results)
}

func derefIndex(i *int) int {
	if i == nil {
		return -1
	}
	return *i
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[len(s)-200:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:] // do not start inside a character
		}
	}
	return s
}

// truncate cuts s to at most n bytes, ending with "..." when cut, and never
// inside a character (half a character is invalid UTF-8 on the terminal).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return termtext.Cut(s, n-3) + "..."
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
