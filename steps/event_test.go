package steps_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// The event stream is API (`--json`, the run store): each payload's JSON,
// byte for byte, members in name order, as the stream had it when events
// were maps.
func TestEachEventIsWrittenAsOneFlatObjectInNameOrder(t *testing.T) {
	at := time.Date(2026, 12, 1, 6, 3, 42, 144121556, time.FixedZone("CET", 3600))
	const R, S, T = `"run_id":"r1"`, `"step":"s"`, `"time":"2026-12-01T05:03:42.144121556Z"` // in UTC
	two := 2
	name, version := "demo", "1.0"
	cases := []struct {
		name string
		data steps.EventData
		want string
	}{
		{"a run starts", steps.RunStart{Workflow: "w", Workspace: "/ws", Steps: []string{"a", "b"}},
			`{` + R + `,` + S + `,"steps":["a","b"],` + T + `,"type":"run_start","workflow":"w","workspace":"/ws"}`},
		{"a run ends", steps.RunEnd{Status: "failed", DurationMS: 12, Error: "boom"},
			`{"duration_ms":12,"error":"boom",` + R + `,"status":"failed",` + S + `,` + T + `,"type":"run_end"}`},
		{"a run ends with no error", steps.RunEnd{Status: "succeeded", DurationMS: 12},
			`{"duration_ms":12,` + R + `,"status":"succeeded",` + S + `,` + T + `,"type":"run_end"}`},
		{"a batch line never ran", steps.RunEnd{Status: "failed", Error: "in:2: bad", Invalid: true},
			`{"duration_ms":0,"error":"in:2: bad","invalid":true,` + R + `,"status":"failed",` + S + `,` + T + `,"type":"run_end"}`},
		{"a step starts", steps.StepStart{Attempt: 1},
			`{"attempt":1,` + R + `,` + S + `,` + T + `,"type":"step_start"}`},
		{"a for-each element starts", steps.StepStart{Attempt: 2, Index: &two},
			`{"attempt":2,"index":2,` + R + `,` + S + `,` + T + `,"type":"step_start"}`},
		{"a step ends", steps.StepEnd{Status: "failed", StopReason: "error", Attempts: 2, DurationMS: 7, Error: "x"},
			`{"attempts":2,"duration_ms":7,"error":"x",` + R + `,"status":"failed",` + S + `,"stop_reason":"error",` + T + `,"type":"step_end"}`},
		{"a step is skipped", steps.StepEnd{Status: "skipped"},
			`{"attempts":0,"duration_ms":0,` + R + `,"status":"skipped",` + S + `,"stop_reason":"",` + T + `,"type":"step_end"}`},
		{"an attempt is retried", steps.Retry{AfterMS: 1000, Error: "e"},
			`{"after_ms":1000,"error":"e","kind":"retry",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"a turn ends", steps.TurnEnd{StopReason: steps.Completed},
			`{` + R + `,` + S + `,"stop_reason":"completed",` + T + `,"type":"turn_end"}`},
		{"a permission is answered", steps.Permission{PermissionRecord: policies.PermissionRecord{
			ToolCallID: "c1", Kind: "edit", Title: "<t>", Command: "", Decision: policies.Allow, Outcome: "selected",
			OptionID: "o", Layer: policies.LayerWorkflow, Policy: policies.SourceStep, Rule: "r", Locations: []policies.ToolLocation{{Path: "/a", Line: 3, InWorkspace: true}},
		}}, `{"command":"","decision":"allow","kind":"edit","layer":"workflow","locations":[{"in_workspace":true,"line":3,"path":"/a"}],"option_id":"o",` +
			`"outcome":"selected","policy":"step","reason":"","rule":"r",` + R + `,` + S + `,` + T + `,"title":"\u003ct\u003e","tool_call_id":"c1","type":"permission"}`},
		{"a permission with no locations", steps.Permission{PermissionRecord: policies.PermissionRecord{Outcome: "cancelled", PolicyStderr: "w"}},
			`{"command":"","decision":"","kind":"","layer":"","locations":null,"option_id":"","outcome":"cancelled","policy":"","policy_stderr":"w",` +
				`"reason":"","rule":"",` + R + `,` + S + `,` + T + `,"title":"","tool_call_id":"","type":"permission"}`},
		{"the env policy decides", steps.Env{Policy: "workflow", Rule: "core", Names: 9},
			`{"kind":"env","names":9,"policy":"workflow","rule":"core",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"the env policy decides within an outer policy", steps.Env{Policy: "workflow", Rule: "core", Names: 9,
			Outer: []policies.OuterEnvRule{{Policy: "/etc/acpflow/policy.yaml", Rule: "rules(1)"}, {Policy: "/o.yaml", Rule: "e.wasm", Stderr: "w"}}},
			`{"kind":"env","names":9,"outer":[{"policy":"/etc/acpflow/policy.yaml","rule":"rules(1)"},{"policy":"/o.yaml","policy_stderr":"w","rule":"e.wasm"}],` +
				`"policy":"workflow","rule":"core",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"an agent is spawned", steps.Spawned{PID: 42, StartTicks: 7, Cwd: "/ws"},
			`{"cwd":"/ws","kind":"spawned","pid":42,` + R + `,"start_ticks":7,` + S + `,` + T + `,"type":"step_update"}`},
		{"an agent says who it is", steps.Initialized{ProtocolVersion: 1, AgentName: &name, AgentVersion: &version},
			`{"agent_name":"demo","agent_version":"1.0","kind":"initialized","protocol_version":1,` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"an agent says nothing of itself", steps.Initialized{ProtocolVersion: 1},
			`{"kind":"initialized","protocol_version":1,` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"a session is open", steps.Session{SessionID: "sid"},
			`{"kind":"session",` + R + `,"session_id":"sid",` + S + `,` + T + `,"type":"step_update"}`},
		{"a session is configured", steps.SessionConfigured{Mode: "plan", Config: map[string]string{"model": "m", "effort": "low"}},
			`{"config":{"effort":"low","model":"m"},"kind":"session_configured","mode":"plan",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"agent text", steps.MessageChunk{Text: "é\x01<&>\u2028\xff"},
			`{"kind":"agent_message_chunk",` + R + `,` + S + `,"text":"é\u0001\u003c\u0026\u003e\u2028\ufffd",` + T + `,"type":"step_update"}`},
		{"another update keeps the agent's member order", steps.AgentUpdate{Kind: "tool_call", Update: json.RawMessage(`{"toolCallId":"c","status":"pending","sessionUpdate":"tool_call"}`)},
			`{"kind":"tool_call",` + R + `,` + S + `,` + T + `,"type":"step_update","update":{"toolCallId":"c","status":"pending","sessionUpdate":"tool_call"}}`},
		{"an update with no body", steps.AgentUpdate{Kind: "unknown"},
			`{"kind":"unknown",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"a cancel is sent", steps.CancelSent{},
			`{"kind":"cancel_sent",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"an answer that does not match the output schema is followed up", steps.SchemaRetry{Retry: 1, Retries: 2, Errors: []string{"at '/approved': got string, want boolean"}},
			`{"errors":["at '/approved': got string, want boolean"],"kind":"schema_retry","retries":2,"retry":1,` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"a descendant is seen", steps.Descendant{AgentPID: 42, PID: 43, PGID: 43, StartTicks: 9},
			`{"agent_pid":42,"kind":"descendant","pgid":43,"pid":43,` + R + `,"start_ticks":9,` + S + `,` + T + `,"type":"step_update"}`},
		{"an agent is torn down", steps.Teardown{PID: 42, Tier: "term", Exit: "signal: terminated", DurationMS: 3,
			EscapedKilled: 1, Descendants: 2, Error: "e", NonProtocolLines: 4, UnhandledNotifications: 5},
			`{"descendants":2,"duration_ms":3,"error":"e","escaped_killed":1,"exit":"signal: terminated","kind":"teardown","non_protocol_lines":4,"pid":42,` + R + `,` + S + `,"tier":"term",` + T + `,"type":"step_update","unhandled_notifications":5}`},
		{"an agent exits by itself", steps.Teardown{PID: 42, Tier: "eof", Exit: "exit status 0"},
			`{"duration_ms":0,"exit":"exit status 0","kind":"teardown","pid":42,` + R + `,` + S + `,"tier":"eof",` + T + `,"type":"step_update"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := json.Marshal(steps.Event{RunID: "r1", Step: "s", Time: at, Data: c.data})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			// The run store keeps the same members, without the envelope.
			fields, err := steps.Event{RunID: "r1", Step: "s", Time: at, Data: c.data}.FieldsJSON()
			if err != nil {
				t.Fatal(err)
			}
			var all, kept map[string]json.RawMessage
			json.Unmarshal(got, &all)
			json.Unmarshal(fields, &kept)
			for _, k := range []string{"type", "run_id", "step", "time"} {
				delete(all, k)
			}
			a, _ := json.Marshal(all)
			if string(fields) != string(a) {
				t.Errorf("fields %s, want %s", fields, a)
			}
			if !strings.HasPrefix(string(fields), "{") || !json.Valid(fields) {
				t.Errorf("fields %s: not an object", fields)
			}
		})
	}
}

func TestARunEventHasAnEmptyStep(t *testing.T) {
	got, _ := json.Marshal(steps.Event{RunID: "r\"1", Time: time.Unix(0, 0), Data: steps.RunEnd{Status: "succeeded"}})
	const want = `{"duration_ms":0,"run_id":"r\"1","status":"succeeded","step":"","time":"1970-01-01T00:00:00Z","type":"run_end"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func BenchmarkEventJSON(b *testing.B) {
	e := steps.Event{RunID: "20261201T060342-f71915db", Step: "greet", Time: time.Now(), Data: steps.MessageChunk{Text: "Hello, world"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}
