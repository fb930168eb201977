package trace

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/redact"
)

// RunInfo is what a run's trace knows before its first event.
type RunInfo struct {
	RunID, Workflow string
	BatchID         string // "" outside a batch
	BatchLine       int
	Resumed         bool
	// Secrets are values no attribute may hold (the ambient credentials):
	// the steps scrub their events already; this is the run's own net.
	Secrets []string
	// Paths are paths the trace names (the workspace): never scrubbed.
	Paths []string
}

// Run is the trace of one run as it happens: a steps.Sink for the run's
// events, ended by End with the run's result. Safe for concurrent use.
type Run struct {
	t       *Tracer
	scrub   *redact.Scrubber
	content bool

	mu    sync.Mutex
	root  oteltrace.Span
	ctx   context.Context
	steps map[string]*span
	units map[unitKey]*unit
	done  bool
}

// span is an open (or ended) span and the context its children start in.
type span struct {
	s   oteltrace.Span
	ctx context.Context
	end time.Time // when it ended; zero while open
}

// unitKey names one unit of work of a step: the step's own attempts
// (index -1) or one for-each element's.
type unitKey struct {
	step  string
	index int
}

// unit is what is open of one unit: its element, attempt, the agent's
// start and turn, and the tool calls of the turn.
type unit struct {
	element, attempt *span
	spawned          time.Time
	agent            string
	start, turn      *span
	tools            map[string]*span
	message          []byte // the agent's message of the turn, with Content
}

var _ steps.Sink = (*Run)(nil)

// Begin starts a run's trace: its root span, whose trace id is the run's
// (TraceID) from now on.
func (t *Tracer) Begin(info RunInfo) *Run {
	r := &Run{t: t, scrub: redact.New(info.Secrets, info.Paths...), content: t.cfg.Content,
		steps: map[string]*span{}, units: map[unitKey]*unit{}}
	attrs := []attribute.KeyValue{attribute.String("acpflow.workflow", info.Workflow)}
	if info.RunID != "" {
		attrs = append(attrs, attribute.String("acpflow.run.id", info.RunID))
	}
	if info.BatchID != "" {
		attrs = append(attrs, attribute.String("acpflow.batch.id", info.BatchID), attribute.Int("acpflow.batch.line", info.BatchLine))
	}
	if info.Resumed {
		attrs = append(attrs, attribute.Bool("acpflow.run.resumed", true))
	}
	root := r.start(context.Background(), "run "+info.Workflow, time.Now(), attrs, oteltrace.WithNewRoot())
	r.ctx, r.root = root.ctx, root.s
	return r
}

// TraceID is the run's trace id, 32 hex digits.
// "" for no trace (nil).
func (r *Run) TraceID() string {
	if r == nil {
		return ""
	}
	return r.root.SpanContext().TraceID().String()
}

// Emit implements steps.Sink: each event opens, ends or annotates spans.
func (r *Run) Emit(e steps.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	switch d := typed(e).(type) {
	case steps.RunStart:
		r.set(r.root, attribute.String("acpflow.run.id", e.RunID), attribute.StringSlice("acpflow.steps", d.Steps))
	case steps.StepStart:
		r.attemptStarted(e, d)
	case steps.Retry:
		r.attemptEnded(r.unit(e), e.Time, "failed", d.Error)
	case steps.ElementEnd:
		r.elementEnded(e, d)
	case steps.StepEnd:
		r.stepEnded(e, d)
	case steps.TurnEnd:
		r.turnEnded(r.unit(e), e.Time, string(d.StopReason))
	case steps.Permission:
		r.decided(e, "permission", d.PermissionRecord)
	case steps.Unasked:
		r.decided(e, "unasked", d.PermissionRecord)
	case steps.Warning:
		r.parent(e).s.AddEvent("warning", oteltrace.WithTimestamp(e.Time),
			oteltrace.WithAttributes(attribute.String("message", r.scrub.Text(d.Message))))
	case steps.Update:
		r.update(e, d.UpdateKind())
	}
}

// step is the step's span, started at t if it has none yet.
func (r *Run) step(id string, t time.Time) *span {
	if sp := r.steps[id]; sp != nil {
		return sp
	}
	sp := r.start(r.ctx, "step "+id, t, []attribute.KeyValue{attribute.String("acpflow.step.id", id)})
	r.steps[id] = sp
	return sp
}

// unit is the unit e belongs to, made when it is new.
func (r *Run) unit(e steps.Event) *unit {
	k := unitKey{step: e.Step, index: -1}
	if e.Index != nil {
		k.index = *e.Index
	}
	u := r.units[k]
	if u == nil {
		u = &unit{tools: map[string]*span{}}
		r.units[k] = u
	}
	return u
}

// attemptStarted opens an attempt (and its element, the first time),
// ending the attempt before it if its end was not told.
func (r *Run) attemptStarted(e steps.Event, d steps.StepStart) {
	st := r.step(e.Step, e.Time)
	u := r.unit(e)
	r.attemptEnded(u, e.Time, "", "")
	parent := st.ctx
	if e.Index != nil {
		if u.element == nil {
			u.element = r.start(st.ctx, "element "+strconv.Itoa(*e.Index), e.Time,
				[]attribute.KeyValue{attribute.Int("acpflow.element.index", *e.Index)})
			if d.Elements > 0 {
				r.set(st.s, attribute.Int("acpflow.step.elements", d.Elements))
			}
		}
		parent = u.element.ctx
	}
	u.attempt = r.start(parent, "attempt "+strconv.Itoa(d.Attempt), e.Time, []attribute.KeyValue{attribute.Int("acpflow.attempt", d.Attempt)})
}

// attemptEnded ends u's open attempt, and what is open inside it, at t;
// status "failed" marks it an error with msg.
func (r *Run) attemptEnded(u *unit, t time.Time, status, msg string) {
	r.turnEnded(u, t, "")
	endSpan(u.start, t)
	u.start = nil
	if u.attempt != nil && u.attempt.end.IsZero() {
		r.endWith(u.attempt, t, status, msg)
	}
}

// elementEnded ends a for-each element's last attempt and its span.
func (r *Run) elementEnded(e steps.Event, d steps.ElementEnd) {
	u := r.unit(e)
	r.attemptEnded(u, e.Time, d.Status, d.Error)
	if u.element != nil && u.element.end.IsZero() {
		r.set(u.element.s, attribute.Int("acpflow.attempts", d.Attempts), attribute.String("acpflow.stop_reason", d.StopReason))
		r.endWith(u.element, e.Time, d.Status, d.Error)
	}
}

// stepEnded ends a step's span and all that is open below it. A skipped
// step's step_end is its only event: its span starts and ends there.
func (r *Run) stepEnded(e steps.Event, d steps.StepEnd) {
	st := r.step(e.Step, e.Time)
	for k, u := range r.units {
		if k.step == e.Step {
			r.attemptEnded(u, e.Time, d.Status, d.Error)
			if u.element != nil && u.element.end.IsZero() {
				r.endWith(u.element, e.Time, d.Status, d.Error)
			}
			delete(r.units, k)
		}
	}
	r.set(st.s, attribute.String("acpflow.step.status", d.Status), attribute.String("acpflow.stop_reason", d.StopReason),
		attribute.Int("acpflow.attempts", d.Attempts))
	if d.Usage != nil {
		r.set(st.s, usageAttrs(d.Usage)...)
	}
	r.endWith(st, e.Time, d.Status, d.Error)
}

// endWith ends sp at t with the run's status words: failed is an error
// (with msg, scrubbed), succeeded is ok, anything else unset.
func (r *Run) endWith(sp *span, t time.Time, status, msg string) {
	switch status {
	case string(engine.StatusFailed):
		sp.s.SetStatus(codes.Error, r.scrub.Text(msg))
	case string(engine.StatusSucceeded):
		sp.s.SetStatus(codes.Ok, "")
	case "":
	default:
		if msg != "" {
			r.set(sp.s, attribute.String("acpflow.reason", msg))
		}
	}
	sp.s.End(oteltrace.WithTimestamp(t))
	sp.end = t
}

// endSpan ends sp at t unless it is nil or ended.
func endSpan(sp *span, t time.Time) {
	if sp != nil && sp.end.IsZero() {
		sp.s.End(oteltrace.WithTimestamp(t))
		sp.end = t
	}
}

// parent is where something of e's happens: the turn of its unit, else
// its attempt, its step, or the run (a permission of no step).
func (r *Run) parent(e steps.Event) *span {
	if e.Step == "" {
		return &span{s: r.root, ctx: r.ctx}
	}
	u := r.unit(e)
	for _, sp := range []*span{u.turn, u.attempt} {
		if sp != nil && sp.end.IsZero() {
			return sp
		}
	}
	return r.step(e.Step, e.Time)
}

// decided records a permission decision or an unasked call: a span below
// its tool call's (a permission of no step: below the run's).
func (r *Run) decided(e steps.Event, name string, p policies.PermissionRecord) {
	parent := r.parent(e)
	if e.Step != "" && p.ToolCallID != "" {
		parent = r.toolSpan(r.unit(e), e, p.ToolCallID, p.Kind, p.Title)
	}
	attrs := permissionAttrs(p, r.content)
	endSpan(r.start(parent.ctx, name, e.Time, attrs), e.Time)
}

// start opens a span named name below parent at t. Every span is opened
// here and every attribute set through set, so that no string reaches
// the trace without the run's scrubbing.
func (r *Run) start(parent context.Context, name string, t time.Time, attrs []attribute.KeyValue, opts ...oteltrace.SpanStartOption) *span {
	opts = append(opts, oteltrace.WithTimestamp(t), oteltrace.WithAttributes(r.scrubbed(attrs)...))
	ctx, s := r.t.tracer.Start(parent, r.scrub.Text(name), opts...)
	return &span{s: s, ctx: ctx}
}

// set sets attributes of s, scrubbed.
func (r *Run) set(s oteltrace.Span, attrs ...attribute.KeyValue) {
	s.SetAttributes(r.scrubbed(attrs)...)
}

// scrubbed is attrs with every string scrubbed of the run's secrets.
func (r *Run) scrubbed(attrs []attribute.KeyValue) []attribute.KeyValue {
	for i, a := range attrs {
		switch a.Value.Type() {
		case attribute.STRING:
			attrs[i] = attribute.String(string(a.Key), r.scrub.Text(a.Value.AsString()))
		case attribute.STRINGSLICE:
			list := a.Value.AsStringSlice()
			for j := range list {
				list[j] = r.scrub.Text(list[j])
			}
			attrs[i] = attribute.StringSlice(string(a.Key), list)
		}
	}
	return attrs
}

// typed is e's payload as the engine's own type, whatever form it came
// in: acpflow-temporal hands on, with --json, every event as the line a
// worker wrote.
func typed(e steps.Event) steps.EventData {
	switch e.Data.(type) {
	case steps.RunStart, steps.StepStart, steps.StepEnd, steps.TurnEnd, steps.Permission, steps.Unasked,
		steps.Retry, steps.ElementEnd, steps.Warning:
		return e.Data
	}
	// Only a step_update has a kind: a permission's "kind" member is its
	// tool's, which a line's reader may take for one.
	what := e.Type()
	if what == "step_update" {
		what += "/" + e.Kind()
	}
	var into steps.EventData
	switch what {
	case "run_start":
		into = decode[steps.RunStart](e.Data)
	case "step_start":
		into = decode[steps.StepStart](e.Data)
	case "step_end":
		into = decode[steps.StepEnd](e.Data)
	case "turn_end":
		into = decode[steps.TurnEnd](e.Data)
	case "permission":
		into = decode[steps.Permission](e.Data)
	case "unasked":
		into = decode[steps.Unasked](e.Data)
	case "step_update/retry":
		into = decode[steps.Retry](e.Data)
	case "step_update/element_end":
		into = decode[steps.ElementEnd](e.Data)
	case "step_update/warning":
		into = decode[steps.Warning](e.Data)
	}
	if into == nil {
		return e.Data
	}
	return into
}

// decode is d's payload as a T, nil when it is not one.
func decode[T steps.EventData](d steps.EventData) steps.EventData {
	var v T
	if !fields(d, &v) {
		return nil
	}
	return v
}

// fields decodes an update's payload into v (its JSON as the stream
// writes it); false when it does not decode.
func fields(d steps.EventData, v any) bool {
	b, err := json.Marshal(d)
	return err == nil && json.Unmarshal(b, v) == nil
}

// End ends the run's trace with its result: the sandbox's refusals below
// their steps, whatever is still open, then the run's span. Further
// events are ignored. A nil Run does nothing.
func (r *Run) End(res *engine.RunResult) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	now := time.Now()
	if res != nil && res.StartedAt.Add(time.Duration(res.DurationMS)*time.Millisecond).Before(now) && res.DurationMS > 0 {
		now = res.StartedAt.Add(time.Duration(res.DurationMS) * time.Millisecond)
	}
	for _, u := range r.units {
		r.attemptEnded(u, now, "", "")
		endSpan(u.element, now)
	}
	if res != nil {
		r.sandboxDenials(res, now)
		r.set(r.root, attribute.String("acpflow.run.status", string(res.Status)))
		if res.Usage != nil {
			r.set(r.root, usageAttrs(&res.Usage.Usage)...)
		}
	}
	for _, st := range r.steps {
		endSpan(st, now)
	}
	root := &span{s: r.root, ctx: r.ctx}
	if res == nil {
		endSpan(root, now)
		return
	}
	r.endWith(root, now, string(res.Status), res.Error)
}
