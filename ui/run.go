package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/trace"
	"github.com/acpflow/acpflow/ui/dag"
	"github.com/acpflow/acpflow/workflows"
)

// workflowCache keeps what the graph needs of each workflow file (its
// steps in file order, their needs), by file and hash: the store keeps no
// workflow, and the file is read once, not on every live update.
type workflowCache struct {
	mu sync.Mutex
	m  map[string]*shape
}

// shape is a workflow's steps and needs; nil when the file is gone or
// changed since the run (its hash differs).
type shape struct {
	steps []string
	needs map[string][]string
}

func newWorkflowCache() *workflowCache { return &workflowCache{m: map[string]*shape{}} }

func (c *workflowCache) get(file, hash string) *shape {
	if file == "" || hash == "" {
		return nil
	}
	key := file + "\x00" + hash
	c.mu.Lock()
	sh, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return sh
	}
	if wf, err := workflows.Load(file); err == nil && wf.Hash == hash {
		sh = &shape{needs: map[string][]string{}}
		for _, st := range wf.Steps {
			sh.steps = append(sh.steps, st.ID)
			sh.needs[st.ID] = st.Needs
		}
	}
	c.mu.Lock()
	c.m[key] = sh
	c.mu.Unlock()
	return sh
}

// stepView is one step of a run as the run page shows it: its state, the
// counts of its for-each elements and attempts, its time and usage.
type stepView struct {
	ID, Status, Detail, Href string
	Attempts                 int
	Elements                 string // "3/5 done · 1 failed"; "" for a step without for-each
	Duration, Usage          string
	Error                    string
	Started                  time.Time
	Recorded                 bool // the store has a row for it (it started, or was skipped)
	// Since is a running step's start, for the page's ticking clock.
	Since string
	// Marks are the decisions its node is marked with (decisionMarks).
	Marks []string
}

// runView is what the run page shows.
type runView struct {
	Title      string
	Run        runs.Run
	Running    bool
	Duration   string
	Usage      string
	Steps      []stepView
	Graph      template.HTML
	GraphNote  string
	Timeline   *timeline
	Commands   []string
	NoWorkflow bool
	// TraceURL is where the run's trace is seen (Config.TraceURL), "" for
	// no link.
	TraceURL string
	// Approvals are the run's asks waiting for an answer.
	Approvals []approvalView
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	v, code, err := s.runView(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, code, err)
		return
	}
	s.render(w, "run.html", v)
}

// graphFragment is the run's graph alone (GET /runs/RUN_ID/graph).
func (s *Server) graphFragment(w http.ResponseWriter, r *http.Request) {
	v, code, err := s.runView(r.Context(), r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	fmt.Fprint(w, v.Graph)
}

func (s *Server) runView(ctx context.Context, ref string) (*runView, int, error) {
	st := s.cfg.Store
	id, kind, err := st.ResolveID(ctx, ref)
	if err != nil {
		return nil, storeCode(err), err
	}
	if kind == runs.KindBatch {
		return nil, http.StatusNotFound, fmt.Errorf("%s is a batch, not a run: its runs are listed at /?batch=%s", id, url.QueryEscape(id))
	}
	d, err := st.GetRun(ctx, id)
	if err != nil {
		return nil, storeCode(err), err
	}
	evs, err := st.TimelineEvents(ctx, id)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	els, err := st.Elements(ctx, id)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	run := d.Run
	v := &runView{Title: "run " + run.ID, Run: run, Running: run.Status.Live(), Duration: "-", Usage: "-",
		TraceURL: trace.Link(s.cfg.TraceURL, run.TraceID)}
	if !run.EndedAt.IsZero() {
		v.Duration, v.Usage = words.Duration(run.DurationMS), words.RunUsage(run.Usage)
	}
	v.Commands = runCommands(run)
	v.Approvals = approvalViews(d.Approvals)

	// The steps, in the workflow's order: the file's when it is unchanged,
	// else run_start's list, else the store's rows.
	order, needs, note := s.stepOrder(run, evs)
	v.GraphNote = note
	rows := map[string]int{}
	for i, s := range d.Steps {
		rows[s.StepID] = i
		if !containsString(order, s.StepID) {
			order = append(order, s.StepID)
		}
	}
	attempt, total := stepStarts(evs)
	pending := pendingByStep(d.Approvals)
	for _, sid := range order {
		sv := stepView{ID: sid, Status: string(dag.Pending), Href: "/runs/" + url.PathEscape(run.ID) + "/steps/" + url.PathEscape(sid), Duration: "-", Usage: "-"}
		if i, ok := rows[sid]; ok {
			sv.recorded(&d.Steps[i], pending[sid])
			if n, ok := d.Steps[i].Output.([]any); ok && total[sid] == 0 {
				total[sid] = len(n)
			}
		}
		if sv.Status == string(engine.StatusRunning) && !v.Running {
			sv.Status = string(dag.Cancelled) // its acpflow ended the run without ending it
		}
		if sv.Status == string(engine.StatusRunning) {
			sv.Since, sv.Duration = since(sv.Started), elapsed(sv.Started, time.Now())
		}
		sv.Attempts = max(sv.Attempts, attempt[sid])
		sv.Elements = elementsText(els[sid], total[sid])
		sv.Detail = stepDetail(sv.Elements, sv.Attempts)
		if !sv.Recorded {
			sv.Href = ""
			if !v.Running && run.Status != engine.StatusSucceeded {
				sv.Status = string(dag.Pending) // never started
			}
		}
		v.Steps = append(v.Steps, sv)
	}
	svg, err := dag.SVG(ctx, runGraph(v.Steps, needs))
	if err != nil {
		v.GraphNote = "The graph could not be drawn: " + err.Error()
	}
	v.Graph = svg
	v.Timeline = buildTimeline(run, evs, time.Now())
	return v, 0, nil
}

// recorded fills in what the store's row of the step says: its state,
// attempts, error, time, usage, and the marks of its decisions (with
// pending requests waiting on a person).
func (sv *stepView) recorded(rec *runs.Step, pending int) {
	sv.Recorded, sv.Status, sv.Attempts, sv.Error, sv.Started = true, string(rec.Status), rec.Attempts, rec.Error, rec.StartedAt
	if !rec.EndedAt.IsZero() {
		sv.Duration = words.Duration(rec.DurationMS)
	}
	if rec.Usage != nil {
		sv.Usage = words.Usage(rec.Usage)
	}
	sv.Marks = decisionMarks(rec.Permissions, pending)
}

// runCommands are the commands the run's page offers to copy: show,
// its transcript, export; and resume first for a run that can be resumed.
func runCommands(run runs.Run) []string {
	cmds := []string{"acpflow show " + run.ID, "acpflow show " + run.ID + " --transcript", "acpflow export " + run.ID + " > " + run.ID + ".transcript.json"}
	if run.Status != engine.StatusSucceeded && !run.Status.Live() {
		cmds = append([]string{"acpflow resume " + run.ID}, cmds...)
	}
	return cmds
}

// stepOrder is the run's steps in the workflow's order, with their needs:
// the file's when it is unchanged; else run_start's list, without needs,
// and a note for the graph saying so.
func (s *Server) stepOrder(run runs.Run, evs []runs.Event) (order []string, needs map[string][]string, note string) {
	if sh := s.wf.get(run.WorkflowFile, run.WorkflowHash); sh != nil {
		return sh.steps, sh.needs, ""
	}
	for _, e := range evs {
		if e.Type == "run_start" {
			if list, ok := e.Fields["steps"].([]any); ok {
				for _, x := range list {
					if s, ok := x.(string); ok {
						order = append(order, s)
					}
				}
			}
		}
	}
	return order, nil, "The workflow file is gone or changed since this run: the graph shows its steps without their needs."
}

// stepStarts reads from the events each step's last attempt and its
// element count, which a running step has not recorded yet.
func stepStarts(evs []runs.Event) (attempt, total map[string]int) {
	attempt, total = map[string]int{}, map[string]int{}
	for _, e := range evs {
		if e.Type == "step_start" {
			attempt[e.StepID] = max(attempt[e.StepID], num(e.Fields["attempt"]))
			total[e.StepID] = max(total[e.StepID], num(e.Fields["elements"]))
		}
	}
	return attempt, total
}

// stepDetail is the line under a step's name in the graph: its elements
// and, after a retry, its attempt.
func stepDetail(elements string, attempts int) string {
	detail := elements
	if attempts > 1 {
		if detail != "" {
			detail += " · "
		}
		detail += fmt.Sprintf("attempt %d", attempts)
	}
	return detail
}

// runGraph is the graph of the run's steps, each a box in its state,
// joined by their needs.
func runGraph(steps []stepView, needs map[string][]string) dag.Graph {
	g := dag.Graph{}
	for _, sv := range steps {
		g.Nodes = append(g.Nodes, dag.Node{ID: sv.ID, Label: sv.ID, State: dag.State(sv.Status), Detail: sv.Detail, Href: sv.Href, Marks: sv.Marks})
		for _, n := range needs[sv.ID] {
			g.Edges = append(g.Edges, dag.Edge{From: n, To: sv.ID})
		}
	}
	return g
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// num is a JSON number as an int (0 when it is not one).
func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// elementsText counts a for-each step's elements done: "3/5 done", with
// the failed and cancelled ones; "" for a step without elements.
func elementsText(done []runs.Element, total int) string {
	if total == 0 && len(done) == 0 {
		return ""
	}
	seen := map[int]string{}
	for _, e := range done {
		seen[e.Index] = e.Status
	}
	var ok, failed, other int
	for _, st := range seen {
		switch engine.Status(st) {
		case engine.StatusSucceeded:
			ok++
		case engine.StatusFailed:
			failed++
		default:
			other++
		}
	}
	s := fmt.Sprintf("%d/%d done", ok, max(total, len(seen)))
	if failed > 0 {
		s += fmt.Sprintf(" · %d failed", failed)
	}
	if other > 0 {
		s += fmt.Sprintf(" · %d cancelled", other)
	}
	return s
}

// timeline is the run's step attempts on one time axis, drawn as SVG:
// each attempt's turn (from its start to its turn_end) and its teardown
// (from there to its end).
type timeline struct {
	Width, Height, Axis int
	Rows                []timelineRow
	Span                string
	// Ticks are the time axis's marks above the bars, from the run's start.
	Ticks         []timelineTick
	AxisY, BarsX1 int
}

// timelineTick is one mark of the time axis: its x and the time it says.
type timelineTick struct {
	X     int
	Label string
}

type timelineRow struct {
	Label, Status          string
	Y, TextY               int
	X, TurnW, DownX, DownW int // pixels
	Turn, Teardown         string
	Open                   bool
}

type attemptSpan struct {
	label               string
	start, turnEnd, end time.Time
	status              string
	step                string
	index               int
	hasIndex            bool
}

const (
	tlLabel = 220 // the label column, in pixels
	tlBars  = 640
	tlRow   = 20
	tlAxis  = 20 // the time axis's band above the rows
)

// attemptSpans reads from the events each step attempt's span, in the
// order the attempts started: an attempt still under way has no end yet,
// and a step that ended without starting (skipped) is a span of no length.
func attemptSpans(evs []runs.Event) []*attemptSpan {
	var spans []*attemptSpan
	open := map[string]*attemptSpan{} // by step and index: the attempt under way
	key := func(e runs.Event) (string, int, bool) {
		if f, ok := e.Fields["index"].(float64); ok {
			return fmt.Sprintf("%s[%d]", e.StepID, int(f)), int(f), true
		}
		return e.StepID, 0, false
	}
	for _, e := range evs {
		k, idx, has := key(e)
		switch {
		case e.Type == "step_start":
			a := &attemptSpan{label: fmt.Sprintf("%s #%d", k, max(1, num(e.Fields["attempt"]))), start: e.Time, step: e.StepID, index: idx, hasIndex: has, status: "running"}
			spans = append(spans, a)
			open[k] = a
		case e.Type == "turn_end":
			if a := open[k]; a != nil && a.turnEnd.IsZero() {
				a.turnEnd = e.Time
			}
		case e.Type == "step_update" && e.Fields["kind"] == "retry":
			if a := open[k]; a != nil {
				a.end, a.status = e.Time, "failed"
				delete(open, k)
			}
		case e.Type == "step_update" && e.Fields["kind"] == "element_end":
			if a := open[k]; a != nil {
				a.end, a.status = e.Time, fmt.Sprint(e.Fields["status"])
				delete(open, k)
			}
		case e.Type == "step_end":
			status := fmt.Sprint(e.Fields["status"])
			found := false
			for ok, a := range open {
				if a.step == e.StepID {
					a.end, a.status = e.Time, status
					delete(open, ok)
					found = true
				}
			}
			if !found && !slicesHasStep(spans, e.StepID) {
				spans = append(spans, &attemptSpan{label: e.StepID, start: e.Time, end: e.Time, status: status, step: e.StepID})
			}
		}
	}
	return spans
}

func buildTimeline(run runs.Run, evs []runs.Event, now time.Time) *timeline {
	spans := attemptSpans(evs)
	if len(spans) == 0 {
		return nil
	}
	start := run.StartedAt
	end := run.EndedAt
	if end.IsZero() {
		end = now
	}
	for _, a := range spans {
		if a.end.IsZero() {
			if run.EndedAt.IsZero() {
				a.end = now
			} else {
				a.end, a.status = run.EndedAt, "cancelled"
			}
		}
		end = later(end, a.end)
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	total := end.Sub(start)
	if total <= 0 {
		total = time.Millisecond
	}
	px := func(t time.Time) int {
		x := int(float64(t.Sub(start)) / float64(total) * tlBars)
		return min(max(x, 0), tlBars)
	}
	tl := &timeline{Width: tlLabel + tlBars + 10, Span: words.Duration(total.Milliseconds())}
	for i, a := range spans {
		turnEnd := a.turnEnd
		if turnEnd.IsZero() {
			turnEnd = a.end
		}
		x, tx, ex := px(a.start), px(turnEnd), px(a.end)
		y := tlAxis + 4 + i*tlRow
		row := timelineRow{Label: a.label, Status: a.status, Y: y, TextY: y + 13,
			X: tlLabel + x, TurnW: max(tx-x, 2), DownX: tlLabel + tx, DownW: ex - tx,
			Turn: words.Duration(turnEnd.Sub(a.start).Milliseconds()), Teardown: words.Duration(a.end.Sub(turnEnd).Milliseconds()),
			Open: a.status == "running"}
		tl.Rows = append(tl.Rows, row)
	}
	tl.Height = tlAxis + 8 + len(spans)*tlRow
	tl.Axis = tl.Height - 2
	tl.AxisY, tl.BarsX1 = tlAxis, tlLabel+tlBars
	tl.Ticks = timeTicks(total, tlLabel, tlBars)
	return tl
}

func slicesHasStep(spans []*attemptSpan, step string) bool {
	for _, a := range spans {
		if a.step == step {
			return true
		}
	}
	return false
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// tickSteps are the times between the axis's marks it chooses from.
var tickSteps = []time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// timeTicks marks the axis of a span of total drawn width px from x0: at
// most 6 marks, a round time apart, the first at the start.
func timeTicks(total time.Duration, x0, width int) []timelineTick {
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if total/s <= 5 {
			step = s
			break
		}
	}
	var ticks []timelineTick
	for t := time.Duration(0); t <= total && len(ticks) < 12; t += step {
		ticks = append(ticks, timelineTick{X: x0 + int(float64(t)/float64(total)*float64(width)), Label: tickText(t, step)})
	}
	return ticks
}

// tickText words an axis mark: 0, 500ms, 15s, 2m, 1m30s, 1h, 1h30m.
func tickText(t, step time.Duration) string {
	switch {
	case t == 0:
		return "0"
	case step < time.Second:
		return t.String()
	case t < time.Minute:
		return fmt.Sprintf("%ds", int(t.Seconds()))
	case t < time.Hour && t%time.Minute == 0:
		return fmt.Sprintf("%dm", int(t.Minutes()))
	case t < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(t.Minutes()), int(t.Seconds())%60)
	case t%time.Hour == 0:
		return fmt.Sprintf("%dh", int(t.Hours()))
	}
	return fmt.Sprintf("%dh%02dm", int(t.Hours()), int(t.Minutes())%60)
}
