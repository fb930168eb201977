package trace_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/gateway"
	"github.com/acpflow/acpflow/internal/otlpreceiver"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/trace"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

const canary = "sk-canary-7f3a9e1b2c4d"

// env is a getenv of the given variables only.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// runEvents plays one run's events into a trace: a step whose agent
// asks for one tool call and runs another unasked, calls its model
// through a gateway, and whose sandbox refused a connect; a for-each
// step of two elements, the second retried; a skipped step.
func runEvents(t *testing.T, tr *trace.Tracer) (traceID string) {
	t.Helper()
	run := tr.Begin(trace.RunInfo{RunID: "r1", Workflow: "wf", BatchID: "b1", BatchLine: 3, Secrets: []string{canary}})
	at := time.Now().Add(-time.Minute)
	emit := func(step string, idx *int, d steps.EventData) {
		at = at.Add(time.Second)
		run.Emit(steps.Event{RunID: "r1", Step: step, Index: idx, Time: at, Data: d})
	}
	name := "test-agent"
	emit("", nil, steps.RunStart{Workflow: "wf", Steps: []string{"a", "each", "skipped"}})
	emit("a", nil, steps.StepStart{Attempt: 1})
	emit("a", nil, acpagent.Spawned{PID: 1})
	emit("a", nil, acpagent.Initialized{AgentName: &name})
	emit("a", nil, acpagent.Session{SessionID: "s1"})
	emit("a", nil, acpagent.MessageChunk{Text: "the answer"})
	emit("a", nil, acpagent.AgentUpdate{Kind: "tool_call", Update: map[string]any{"toolCallId": "c1", "title": "echo hi", "kind": "execute", "status": "pending"}})
	emit("a", nil, steps.Permission{PermissionRecord: policies.PermissionRecord{ToolCallID: "c1", Kind: "execute", Title: "echo hi",
		Decision: policies.Allow, Layer: policies.LayerWorkflow, Policy: "workflow", Rule: "rules[0]", Outcome: "selected"}})
	emit("a", nil, acpagent.AgentUpdate{Kind: "tool_call_update", Update: map[string]any{"toolCallId": "c1", "status": "completed"}})
	emit("a", nil, acpagent.AgentUpdate{Kind: "tool_call", Update: map[string]any{"toolCallId": "c2", "title": "rm x", "kind": "delete", "status": "in_progress"}})
	emit("a", nil, steps.Unasked{PermissionRecord: policies.PermissionRecord{ToolCallID: "c2", Kind: "delete", Decision: policies.DecisionUnasked,
		Would: policies.Reject, Layer: policies.LayerWorkflow, Policy: "default", Rule: "default"}})
	emit("a", nil, acpagent.GatewayExchange{Path: "/v1/messages", Model: "claude-x", Status: 200, DurationMS: 500,
		Usage: &gateway.Usage{Input: 120, Output: 30}, Request: "prompt " + canary})
	emit("a", nil, steps.Warning{Message: "token " + canary + " seen"})
	emit("a", nil, steps.TurnEnd{StopReason: "end_turn"})
	emit("a", nil, steps.StepEnd{Status: "succeeded", StopReason: "end_turn", Attempts: 1})
	for i := range 2 {
		emit("each", &i, steps.StepStart{Attempt: 1, Index: &i, Elements: 2})
	}
	one := 1
	emit("each", &one, steps.Retry{AfterMS: 10, Error: "boom"})
	emit("each", &one, steps.StepStart{Attempt: 2, Index: &one, Elements: 2})
	for i := range 2 {
		emit("each", &i, steps.ElementEnd{Status: "succeeded", Attempts: i + 1})
	}
	emit("each", nil, steps.StepEnd{Status: "succeeded", Attempts: 2})
	emit("skipped", nil, steps.StepEnd{Status: "skipped", StopReason: "skipped", Error: "if: false"})
	res := &engine.RunResult{RunID: "r1", Status: engine.StatusSucceeded, StartedAt: at.Add(-time.Minute), DurationMS: 61000,
		Steps: map[string]*engine.StepResult{"a": {Status: engine.StatusSucceeded, Sandbox: &steps.SandboxRecord{
			Denied: []steps.Denial{{By: steps.DeniedByProxy, Op: "connect", Host: "evil.example:443", Count: 2}}}}}}
	run.End(res)
	return run.TraceID()
}

func TestATraceHoldsTheRunsWorkParentedAndWithoutSecrets(t *testing.T) {
	rcv, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	getenv := env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL})
	cfg, ok := trace.Configure(nil, getenv)
	if !ok {
		t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT set, yet no traces")
	}
	tr, err := trace.New(context.Background(), cfg, getenv)
	if err != nil {
		t.Fatal(err)
	}
	id := runEvents(t, tr)
	if msg := tr.Close(); msg != "" {
		t.Fatalf("a live collector, yet: %s", msg)
	}
	spans := rcv.Spans()
	checkTree(t, spans, id)
	if js := rcv.JSON(); bytes.Contains(js, []byte(canary)) {
		t.Errorf("the canary secret is in the trace:\n%s", js)
	}
	for _, s := range spans {
		if _, ok := s.Attrs["acpflow.tool.title"]; ok {
			t.Errorf("span %s has the tool's title without content: true", s.Name)
		}
		if _, ok := s.Attrs["gen_ai.output.messages"]; ok {
			t.Errorf("span %s has the agent's message without content: true", s.Name)
		}
	}
}

// tree finds spans by name and parent, failing the test on one missing.
type tree struct {
	t     *testing.T
	spans []otlpreceiver.Span
}

func (tr tree) one(name string) otlpreceiver.Span {
	tr.t.Helper()
	var found []otlpreceiver.Span
	for _, s := range tr.spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		tr.t.Fatalf("%d spans named %q, want 1; spans: %v", len(found), name, names(tr.spans))
	}
	return found[0]
}

// child is the span named name below parent.
func (tr tree) child(name string, parent otlpreceiver.Span) otlpreceiver.Span {
	tr.t.Helper()
	for _, s := range tr.spans {
		if s.Name == name && s.ParentID == parent.SpanID {
			return s
		}
	}
	tr.t.Fatalf("no span %q below %q; spans: %v", name, parent.Name, names(tr.spans))
	return otlpreceiver.Span{}
}

func (tr tree) parentIs(child, parent otlpreceiver.Span) {
	tr.t.Helper()
	if child.ParentID != parent.SpanID {
		tr.t.Errorf("span %q's parent is %s, want %q (%s)", child.Name, child.ParentID, parent.Name, parent.SpanID)
	}
}

func names(spans []otlpreceiver.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func checkTree(t *testing.T, spans []otlpreceiver.Span, traceID string) {
	t.Helper()
	tr := tree{t, spans}
	for _, s := range spans {
		if s.TraceID != traceID {
			t.Errorf("span %q is in trace %s, want the run's %s", s.Name, s.TraceID, traceID)
		}
	}
	run := tr.one("run wf")
	if run.ParentID != "" || run.Attrs["acpflow.batch.id"] != "b1" || run.Attrs["acpflow.run.id"] != "r1" || run.Attrs["acpflow.run.status"] != "succeeded" {
		t.Errorf("run span: parent %q, attrs %v", run.ParentID, run.Attrs)
	}
	stepA := tr.one("step a")
	tr.parentIs(stepA, run)
	attempt := tr.child("attempt 1", stepA)
	start := tr.one("agent.start")
	tr.parentIs(start, attempt)
	turn := tr.one("invoke_agent test-agent")
	tr.parentIs(turn, attempt)
	tool := tr.one("execute_tool execute")
	tr.parentIs(tool, turn)
	perm := tr.one("permission")
	tr.parentIs(perm, tool)
	for k, v := range map[string]any{"acpflow.permission.decision": "allow", "acpflow.permission.rule": "rules[0]",
		"acpflow.permission.layer": "workflow", "acpflow.permission.policy": "workflow"} {
		if perm.Attrs[k] != v {
			t.Errorf("permission span: %s = %v, want %v", k, perm.Attrs[k], v)
		}
	}
	unasked := tr.one("unasked")
	tr.parentIs(unasked, tr.one("execute_tool delete"))
	if unasked.Attrs["acpflow.permission.would"] != "reject" {
		t.Errorf("unasked span: %v", unasked.Attrs)
	}
	model := tr.one("chat claude-x")
	tr.parentIs(model, turn)
	if model.Attrs["gen_ai.system"] != "anthropic" || model.Attrs["gen_ai.request.model"] != "claude-x" ||
		model.Attrs["gen_ai.usage.input_tokens"] != int64(120) || model.Attrs["gen_ai.usage.output_tokens"] != int64(30) {
		t.Errorf("model span: %v", model.Attrs)
	}
	denied := tr.one("sandbox.denied")
	tr.parentIs(denied, stepA)
	if denied.Attrs["acpflow.sandbox.target"] != "evil.example:443" || denied.Attrs["acpflow.sandbox.count"] != int64(2) {
		t.Errorf("sandbox.denied span: %v", denied.Attrs)
	}
	each := tr.one("step each")
	tr.child("attempt 1", tr.child("element 0", each))
	second := tr.child("element 1", each)
	tr.child("attempt 1", second)
	if failed := tr.child("attempt 1", second); failed.StatusCode != tracepb.Status_STATUS_CODE_ERROR || failed.StatusMessage != "boom" {
		t.Errorf("the retried attempt: status %v %q, want an error, boom", failed.StatusCode, failed.StatusMessage)
	}
	tr.child("attempt 2", second)
	skipped := tr.one("step skipped")
	tr.parentIs(skipped, run)
	if !strings.Contains(skipped.Attrs["acpflow.reason"].(string), "if: false") {
		t.Errorf("skipped step: %v", skipped.Attrs)
	}
}

// newTracer is a tracer to url as telemetry: in an outer policy says.
func newTracer(t *testing.T, tel *policies.Telemetry) *trace.Tracer {
	t.Helper()
	cfg, ok := trace.Configure(tel, env(nil))
	if !ok {
		t.Fatal("telemetry: set, yet no traces")
	}
	tr, err := trace.New(context.Background(), cfg, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// With content: true the agent's message, the tool's title and the
// model exchange are in the trace, the policy's headers reach the
// collector over gRPC, and still no secret does.
func TestContentOverGRPCWithThePolicysHeaders(t *testing.T) {
	rcv, err := otlpreceiver.StartGRPC()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	tr := newTracer(t, &policies.Telemetry{File: "/etc/acpflow/policy.yaml", Endpoint: rcv.URL, Protocol: "grpc",
		Headers: map[string]string{"x-team-token": "hdr-secret-123"}, Content: true})
	id := runEvents(t, tr)
	if msg := tr.Close(); msg != "" {
		t.Fatalf("a live collector, yet: %s", msg)
	}
	spans := rcv.Spans()
	checkTree(t, spans, id)
	if got := rcv.Headers["x-team-token"]; len(got) != 1 || got[0] != "hdr-secret-123" {
		t.Errorf("the collector got x-team-token %q, want the policy's", got)
	}
	js := rcv.JSON()
	for _, want := range []string{"the answer", "echo hi", "prompt [redacted]"} {
		if !bytes.Contains(js, []byte(want)) {
			t.Errorf("content: true, yet %q is not in the trace", want)
		}
	}
	if bytes.Contains(js, []byte(canary)) {
		t.Errorf("the canary secret is in the trace")
	}
}

// A collector that is down or never answers costs the command at most
// ShutdownTimeout at its end, and the loss is said once, with the count
// and without the headers' values.
func TestADeadCollectorCostsAtMostTheShutdownTimeout(t *testing.T) {
	silent, err := otlpreceiver.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	closed, err := otlpreceiver.ClosedURL()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, url, protocol string }{
		{"closed port, http", closed, "http/protobuf"},
		{"closed port, grpc", closed, "grpc"},
		{"silent collector, http", silent.URL, "http/protobuf"},
		{"silent collector, grpc", silent.URL, "grpc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := newTracer(t, &policies.Telemetry{Endpoint: c.url, Protocol: c.protocol, Headers: map[string]string{"authorization": "Bearer hdr-secret-456"}})
			began := time.Now()
			runEvents(t, tr)
			msg := tr.Close()
			took := time.Since(began)
			t.Logf("%s: the run's events and Close took %s: %s", c.name, took, msg)
			if took > trace.ShutdownTimeout+500*time.Millisecond {
				t.Errorf("took %s, more than the shutdown timeout %s", took, trace.ShutdownTimeout)
			}
			if !strings.Contains(msg, "spans were not exported to "+c.url) {
				t.Errorf("the warning does not count the spans lost at %s: %q", c.url, msg)
			}
			if strings.Contains(msg, "hdr-secret-456") {
				t.Errorf("the warning holds a header's value: %q", msg)
			}
		})
	}
}

// Configure follows the OTEL_* variables and lets an outer policy's
// telemetry: decide what it says.
func TestConfigureReadsTheStandardVariables(t *testing.T) {
	if _, ok := trace.Configure(nil, env(nil)); ok {
		t.Error("traces with neither a policy nor OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if _, ok := trace.Configure(&policies.Telemetry{}, env(map[string]string{"OTEL_SDK_DISABLED": "true"})); ok {
		t.Error("traces with OTEL_SDK_DISABLED=true")
	}
	cfg, _ := trace.Configure(nil, env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=x%20y", trace.TraceURLEnv: "http://j/trace/{trace_id}",
	}))
	if cfg.Endpoint != "http://c:4317" || cfg.Protocol != "grpc" || cfg.Headers["b"] != "x y" || cfg.Content {
		t.Errorf("from the environment: %+v", cfg)
	}
	cfg, _ = trace.Configure(&policies.Telemetry{File: "p.yaml", Endpoint: "https://org:4318", Headers: map[string]string{"a": "2"}, Content: true},
		env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_HEADERS": "a=1"}))
	if cfg.Endpoint != "https://org:4318" || cfg.Protocol != "http/protobuf" || cfg.Headers["a"] != "2" || !cfg.Content {
		t.Errorf("the policy over the environment: %+v", cfg)
	}
	cfg, _ = trace.Configure(nil, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_EXPORTER_OTLP_INSECURE": "true"}))
	if cfg.Endpoint != "http://collector:4317" {
		t.Errorf("host:port with OTEL_EXPORTER_OTLP_INSECURE: endpoint %q", cfg.Endpoint)
	}
	if got := trace.Link("http://j/trace/{trace_id}", "abc"); got != "http://j/trace/abc" {
		t.Errorf("Link = %q", got)
	}
}

// A model exchange of a megabyte reaches the collector cut to
// MaxAttributeValue: one span must not outgrow what a collector takes.
func TestAnOverlongAttributeIsCut(t *testing.T) {
	rcv, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	tr := newTracer(t, &policies.Telemetry{File: "p.yaml", Endpoint: rcv.URL, Content: true})
	run := tr.Begin(trace.RunInfo{RunID: "r1", Workflow: "wf"})
	at := time.Now()
	run.Emit(steps.Event{RunID: "r1", Step: "a", Time: at, Data: steps.StepStart{Attempt: 1}})
	run.Emit(steps.Event{RunID: "r1", Step: "a", Time: at, Data: acpagent.GatewayExchange{Path: "/v1/messages", Model: "m", Status: 200,
		Request: strings.Repeat("x", 1<<20)}})
	run.End(&engine.RunResult{RunID: "r1", Status: engine.StatusSucceeded})
	if msg := tr.Close(); msg != "" {
		t.Fatalf("a live collector, yet: %s", msg)
	}
	for _, s := range rcv.Spans() {
		if req, ok := s.Attrs["acpflow.gateway.request"].(string); ok {
			if !strings.HasPrefix(req, "xxx") || len(req) > trace.MaxAttributeValue {
				t.Errorf("the request attribute is %d bytes, want at most %d", len(req), trace.MaxAttributeValue)
			}
			return
		}
	}
	t.Error("no model call span with its request")
}

// The agent's message in a turn's span is its first 16 KiB, scrubbed
// before it is cut: a secret across the cut leaves no start of itself.
func TestATurnsMessageIsCutAfterItIsScrubbed(t *testing.T) {
	rcv, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	tr := newTracer(t, &policies.Telemetry{File: "p.yaml", Endpoint: rcv.URL, Content: true})
	run := tr.Begin(trace.RunInfo{RunID: "r1", Workflow: "wf", Secrets: []string{canary}})
	at := time.Now()
	emit := func(d steps.EventData) { run.Emit(steps.Event{RunID: "r1", Step: "a", Time: at, Data: d}) }
	emit(steps.StepStart{Attempt: 1})
	emit(acpagent.Session{SessionID: "s1"})
	emit(acpagent.MessageChunk{Text: strings.Repeat("x", 16<<10-5) + canary + strings.Repeat("y", 1<<20)})
	emit(steps.TurnEnd{StopReason: "end_turn"})
	run.End(&engine.RunResult{RunID: "r1", Status: engine.StatusSucceeded})
	if msg := tr.Close(); msg != "" {
		t.Fatalf("a live collector, yet: %s", msg)
	}
	if js := rcv.JSON(); bytes.Contains(js, []byte(canary[:5])) || bytes.Contains(js, []byte("yyy")) {
		t.Errorf("the message holds the start of the secret, or more than its first 16 KiB")
	}
	for _, s := range rcv.Spans() {
		if m, ok := s.Attrs["gen_ai.output.messages"].(string); ok {
			if !strings.Contains(m, "xxx") || len(m) > 17<<10 {
				t.Errorf("the message attribute is %d bytes, want about 16 KiB of it", len(m))
			}
			return
		}
	}
	t.Error("no turn span with the agent's message")
}
