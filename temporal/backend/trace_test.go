package backend

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/otlpreceiver"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/trace"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// A run on Temporal exports the trace a local run does (docs/traces.md):
// its events, as the lines a worker wrote and the backend hands on (with
// --json, untyped), make the same tree of spans.
func TestARunOnTemporalExportsItsTrace(t *testing.T) {
	rcv, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	getenv := func(k string) string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}[k] }
	cfg, _ := trace.Configure(nil, getenv)
	tr, err := trace.New(context.Background(), cfg, getenv)
	if err != nil {
		t.Fatal(err)
	}
	run := tr.Begin(trace.RunInfo{Workflow: "w"})
	at := time.Now()
	name := "agent-x"
	events := []steps.EventData{
		steps.RunStart{Workflow: "w", Steps: []string{"a"}},
		steps.StepStart{Attempt: 1},
		acpagent.Spawned{PID: 7},
		acpagent.Initialized{AgentName: &name},
		acpagent.Session{SessionID: "s"},
		acpagent.AgentUpdate{Kind: "tool_call", Update: map[string]any{"toolCallId": "c1", "kind": "execute", "status": "pending"}},
		steps.Permission{PermissionRecord: policies.PermissionRecord{ToolCallID: "c1", Kind: "execute", Decision: policies.Reject, Layer: policies.LayerOuter}},
		steps.TurnEnd{StopReason: "end_turn"},
		steps.StepEnd{Status: "succeeded", StopReason: "end_turn", Attempts: 1},
	}
	hook := (&temporalBackend{json: true}).events("r", runs.Request{Options: engine.Options{Events: run}})
	for i, d := range events {
		step := "a"
		if i == 0 {
			step = ""
		}
		line, err := json.Marshal(steps.Event{RunID: "r", Step: step, Time: at.Add(time.Duration(i) * time.Second), Data: d})
		if err != nil {
			t.Fatal(err)
		}
		hook(line)
	}
	run.End(&engine.RunResult{RunID: "r", Status: engine.StatusSucceeded, StartedAt: at, DurationMS: int64(len(events)) * 1000})
	if msg := tr.Close(); msg != "" {
		t.Fatal(msg)
	}
	byID, byName := map[string]otlpreceiver.Span{}, map[string]otlpreceiver.Span{}
	for _, s := range rcv.Spans() {
		byID[s.SpanID], byName[s.Name] = s, s
	}
	want := []string{"permission", "execute_tool execute", "invoke_agent agent-x", "attempt 1", "step a", "run w"}
	sp, ok := byName[want[0]]
	if !ok {
		t.Fatalf("no permission span: %v", byName)
	}
	for _, parent := range want[1:] {
		if sp = byID[sp.ParentID]; sp.Name != parent {
			t.Fatalf("the permission's ancestors are not %v: met %q", want, sp.Name)
		}
	}
	if p := byName["permission"]; p.Attrs["acpflow.permission.layer"] != "outer" || byName["run w"].Attrs["acpflow.run.id"] != "r" {
		t.Errorf("permission %v, run %v", p.Attrs, byName["run w"].Attrs)
	}
}
