package runcmd

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

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// liveView redraws one line per step on a terminal: its state, its elapsed
// time and the last line of the agent's text, so a long run shows what each
// agent is doing without scrolling a log.
type liveView struct {
	w     io.Writer
	color bool
	p     *mpb.Progress

	mu    sync.Mutex
	steps map[string]*liveStep
}

type liveStep struct {
	mu      sync.Mutex // guards the fields below; mpb's render goroutine reads them
	id      string
	state   string
	started time.Time
	ended   time.Time
	last    string // last line of agent text, sanitised
	usage   string // what the agent reported so far ("" before anything)
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
		// One line per step, in file order, before any of them starts.
		for _, id := range d.Steps {
			v.step(id, e.Time)
		}
	}
	if e.Step == "" {
		return
	}
	s := v.step(e.Step, e.Time)
	s.mu.Lock()
	done := false
	switch d := e.Data.(type) {
	case steps.StepStart:
		s.state, s.started = "running", e.Time
		if d.Attempt > 1 {
			s.state = fmt.Sprintf("running (attempt %d)", d.Attempt)
		}
	case acpagent.MessageChunk:
		// s.last is already sanitised; a sequence split across chunks
		// leaves only inert pieces behind.
		s.last = lastLine(termtext.Sanitize(s.last + d.Text))
	case acpagent.Session:
		s.state = "prompting"
	case acpagent.CancelSent:
		s.state = "cancelling"
	case acpagent.Asking:
		s.state = "asking you"
		s.last = "waiting for your answer: " + termtext.Quote(d.Title, titleMax)
	case steps.UsageReport:
		s.usage = UsageText(&d.Usage)
	case acpagent.SchemaRetry:
		s.state = fmt.Sprintf("follow-up %d/%d", d.Retry, d.Retries)
		s.last = firstLine(termtext.Sanitize("output-schema: " + strings.Join(d.Errors, "; ")))
	case steps.Permission:
		// The agent's kind and title, escaped onto the step's one line.
		s.last = fmt.Sprintf("permission %s %s: %s%s", termtext.Line(d.Kind, kindMax), termtext.Quote(d.Title, titleMax), d.Decision, askSuffix(d.Ask))
		if s.state == "asking you" {
			s.state = "prompting"
		}
	case steps.Unasked:
		s.last = fmt.Sprintf("unasked %s %s: would %s", termtext.Line(d.Kind, kindMax), termtext.Quote(unaskedWhat(d.PermissionRecord), titleMax), d.Would)
	case steps.Warning:
		s.last = firstLine(termtext.Sanitize("warning: " + d.Message))
	case steps.StepEnd:
		s.state, s.ended = d.Status, e.Time
		if d.Attempts > 0 {
			s.usage = UsageText(d.Usage)
		}
		if d.Error != "" {
			s.last = firstLine(termtext.Sanitize(d.Error))
		}
		done = true
	}
	s.mu.Unlock()
	if done {
		s.bar.SetTotal(-1, true)
	}
}

// step returns the line of a step, adding it on its first event.
func (v *liveView) step(id string, at time.Time) *liveStep {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.steps[id]
	if s == nil {
		s = &liveStep{id: id, state: "waiting", started: at}
		v.steps[id] = s
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
	line := fmt.Sprintf("%s %-16s %-12s %6s  %s%s", mark, s.id, s.state, elapsed, usage, s.last)
	return truncate(line, 160)
}

// questions is where a person is asked (termAsker): above the steps'
// lines, which mpb keeps drawing below.
func (v *liveView) questions() io.Writer { return v.p }

func (v *liveView) Close(results []*engine.RunResult) {
	v.mu.Lock()
	bars := make([]*mpb.Bar, 0, len(v.steps))
	for _, s := range v.steps {
		bars = append(bars, s.bar)
	}
	v.mu.Unlock()
	for _, b := range bars {
		b.SetTotal(-1, true)
	}
	v.p.Wait()
	(&plainView{w: v.w}).Close(results)
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
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
