package trace

import (
	"encoding/json"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// maxMessage bounds the agent's message a turn's span holds (Content).
const maxMessage = 16 << 10

// update handles a step update of kind: the agent's start and session,
// its tool calls and message, and model calls through its gateway.
func (r *Run) update(e steps.Event, kind string) {
	if e.Step == "" {
		return
	}
	u := r.unit(e)
	switch kind {
	case "spawned", "reused":
		u.spawned = e.Time
	case "initialized":
		r.agentStarting(u, e)
	case "session":
		r.turnStarted(u, e)
	case "tool_call", "tool_call_update":
		r.toolCall(u, e)
	case "agent_message_chunk":
		if r.content && len(u.message) < 2*maxMessage {
			var c struct{ Text string }
			if fields(e.Data, &c) {
				// Kept past maxMessage, then scrubbed, then cut: a cut
				// before the scrub could leave the start of a secret.
				u.message = append(u.message, c.Text[:min(len(c.Text), 2*maxMessage-len(u.message))]...)
			}
		}
	case "gateway_exchange":
		r.modelCall(e)
	}
}

// agentStarting opens the agent's start, from its spawn (or the pooled
// process taken) to its session.
func (r *Run) agentStarting(u *unit, e steps.Event) {
	var d struct {
		AgentName    string `json:"agent_name"`
		AgentVersion string `json:"agent_version"`
	}
	fields(e.Data, &d)
	u.agent = d.AgentName
	from := u.spawned
	if from.IsZero() {
		from = e.Time
	}
	parent := r.parent(e)
	u.start = r.start(parent.ctx, "agent.start", from, []attribute.KeyValue{
		attribute.String("gen_ai.agent.name", d.AgentName), attribute.String("acpflow.agent.version", d.AgentVersion)})
}

// turnStarted ends the agent's start and opens its turn in the session.
func (r *Run) turnStarted(u *unit, e steps.Event) {
	var d struct {
		SessionID string `json:"session_id"`
		Via       string `json:"via"`
		From      string `json:"from"`
	}
	fields(e.Data, &d)
	endSpan(u.start, e.Time)
	r.turnEnded(u, e.Time, "")
	name := "invoke_agent"
	if u.agent != "" {
		name += " " + u.agent
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.conversation.id", d.SessionID),
	}
	if u.agent != "" {
		attrs = append(attrs, attribute.String("gen_ai.agent.name", u.agent))
	}
	if d.Via != "" {
		attrs = append(attrs, attribute.String("acpflow.session.via", d.Via), attribute.String("acpflow.session.from", d.From))
	}
	u.turn = r.start(r.parent(e).ctx, name, e.Time, attrs)
	u.tools = map[string]*span{}
}

// turnEnded ends u's turn (and its tool calls still open) at t.
func (r *Run) turnEnded(u *unit, t time.Time, stopReason string) {
	if u.turn == nil || !u.turn.end.IsZero() {
		return
	}
	for _, tool := range u.tools {
		endSpan(tool, t)
	}
	if stopReason != "" {
		r.set(u.turn.s, attribute.String("acpflow.stop_reason", stopReason))
	}
	if len(u.message) > 0 {
		msg, _ := json.Marshal([]map[string]any{{"role": "assistant",
			"parts": []map[string]string{{"type": "text", "content": cutText(r.scrub.Text(string(u.message)), maxMessage)}}}})
		r.set(u.turn.s, attribute.String("gen_ai.output.messages", string(msg)))
		u.message = nil
	}
	endSpan(u.turn, t)
}

// toolCall opens a tool call's span (tool_call) or ends it when its
// update says it completed or failed.
func (r *Run) toolCall(u *unit, e steps.Event) {
	var d struct {
		Update struct {
			ID     string `json:"toolCallId"`
			Title  string `json:"title"`
			Kind   string `json:"kind"`
			Status string `json:"status"`
		} `json:"update"`
	}
	if !fields(e.Data, &d) || d.Update.ID == "" {
		return
	}
	c := d.Update
	sp := r.toolSpan(u, e, c.ID, c.Kind, c.Title)
	switch c.Status {
	case "completed":
		sp.s.SetStatus(codes.Ok, "")
	case "failed":
		sp.s.SetStatus(codes.Error, "the tool call failed")
	default:
		return
	}
	r.set(sp.s, attribute.String("acpflow.tool.status", c.Status))
	endSpan(sp, e.Time)
}

// toolSpan is the span of u's tool call id, opened at e when it has
// none: by the tool_call update, or by a permission request or unasked
// record that comes before it (the agent's notification and its request
// are not ordered).
func (r *Run) toolSpan(u *unit, e steps.Event, id, kind, title string) *span {
	if sp := u.tools[id]; sp != nil {
		return sp
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.call.id", id),
		attribute.String("gen_ai.tool.type", kind),
	}
	if r.content && title != "" {
		attrs = append(attrs, attribute.String("acpflow.tool.title", title))
	}
	sp := r.start(r.parent(e).ctx, strings.TrimSpace("execute_tool "+kind), e.Time, attrs)
	u.tools[id] = sp
	return sp
}

// permissionAttrs are a permission record's attributes: the decision and
// who made it always; what the call was (title, command, reason, which
// quote it) only with content.
func permissionAttrs(p policies.PermissionRecord, content bool) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("acpflow.permission.decision", string(p.Decision)),
		attribute.String("acpflow.permission.rule", p.Rule),
		attribute.String("acpflow.permission.layer", string(p.Layer)),
		attribute.String("acpflow.permission.policy", string(p.Policy)),
		attribute.String("gen_ai.tool.call.id", p.ToolCallID),
		attribute.String("gen_ai.tool.type", p.Kind),
	}
	if p.Outcome != "" {
		attrs = append(attrs, attribute.String("acpflow.permission.outcome", p.Outcome))
	}
	if p.Would != "" {
		attrs = append(attrs, attribute.String("acpflow.permission.would", string(p.Would)))
	}
	if p.Ask != "" {
		attrs = append(attrs, attribute.String("acpflow.permission.ask", p.Ask))
	}
	if content {
		attrs = append(attrs, attribute.String("acpflow.tool.title", p.Title), attribute.String("acpflow.tool.command", p.Command),
			attribute.String("acpflow.permission.reason", p.Reason))
	}
	return attrs
}

// modelCall is a model request through the step's gateway: a client span
// with the GenAI conventions, from the request to its answer's end.
func (r *Run) modelCall(e steps.Event) {
	var d struct {
		Path       string `json:"path"`
		Model      string `json:"model"`
		Status     int    `json:"status"`
		ErrorKind  string `json:"error_kind"`
		DurationMS int64  `json:"duration_ms"`
		Usage      *struct {
			Input  int64 `json:"input_tokens"`
			Output int64 `json:"output_tokens"`
		} `json:"usage"`
		Request  string `json:"request"`
		Response string `json:"response"`
	}
	if !fields(e.Data, &d) {
		return
	}
	provider := providerOf(d.Path)
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.system", provider),
		attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.request.model", d.Model),
		attribute.Int("http.response.status_code", d.Status),
	}
	if d.Usage != nil {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.input_tokens", d.Usage.Input), attribute.Int64("gen_ai.usage.output_tokens", d.Usage.Output))
	}
	if d.ErrorKind != "" {
		attrs = append(attrs, attribute.String("error.type", d.ErrorKind))
	}
	if r.content && d.Request != "" {
		attrs = append(attrs, attribute.String("acpflow.gateway.request", d.Request), attribute.String("acpflow.gateway.response", d.Response))
	}
	start := e.Time.Add(-time.Duration(d.DurationMS) * time.Millisecond)
	sp := r.start(r.parent(e).ctx, strings.TrimSpace("chat "+d.Model), start, attrs, oteltrace.WithSpanKind(oteltrace.SpanKindClient))
	if d.ErrorKind != "" || d.Status >= 400 {
		sp.s.SetStatus(codes.Error, d.ErrorKind)
	}
	endSpan(sp, e.Time)
}

// providerOf names the provider whose API a gateway path is
// (gen_ai.system's values).
func providerOf(path string) string {
	switch {
	case strings.Contains(path, "/messages"):
		return "anthropic"
	case strings.Contains(path, "generateContent"):
		return "gcp.gemini"
	case strings.Contains(path, "/chat/completions"), strings.Contains(path, "/responses"):
		return "openai"
	}
	return "unknown"
}

// sandboxDenials adds what each step's sandbox refused (the result's
// sandbox.denied) below the step, one span per kind of refusal, at the
// step's end.
func (r *Run) sandboxDenials(res *engine.RunResult, fallback time.Time) {
	for id, sr := range res.Steps {
		if sr == nil || sr.Sandbox == nil || (len(sr.Sandbox.Denied) == 0 && sr.Sandbox.DeniedMore == 0) {
			continue
		}
		st := r.step(id, fallback)
		at := st.end
		if at.IsZero() {
			at = fallback
		}
		denied := sr.Sandbox.Denied
		if sr.Sandbox.DeniedMore > 0 { // the kinds beyond MaxDenied, counted together
			denied = append(denied[:len(denied):len(denied)], steps.Denial{Op: "more", Count: sr.Sandbox.DeniedMore})
		}
		for _, d := range denied {
			endSpan(r.start(st.ctx, "sandbox.denied", at, []attribute.KeyValue{
				attribute.String("acpflow.sandbox.by", d.By),
				attribute.String("acpflow.sandbox.op", d.Op),
				attribute.String("acpflow.sandbox.target", d.Target()),
				attribute.Int("acpflow.sandbox.count", d.Count),
			}), at)
		}
	}
}

// usageAttrs are what a step or run spent, as the GenAI conventions name
// token counts.
func usageAttrs(u *steps.Usage) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if u.InputTokens != nil {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.input_tokens", *u.InputTokens))
	}
	if u.OutputTokens != nil {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.output_tokens", *u.OutputTokens))
	}
	if u.Cost != nil {
		attrs = append(attrs, attribute.Float64("acpflow.usage.cost", u.Cost.Amount), attribute.String("acpflow.usage.currency", u.Cost.Currency))
	}
	return attrs
}

// cutText is s's first n bytes at most, whole characters only.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
