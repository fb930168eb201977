package acpagent_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// The event stream is API (`--json`, the run store): each update of an
// acp-subagent step is written, byte for byte, as the stream had it when
// the updates were maps and lived in package steps.
func TestEachUpdateIsWrittenAsOneFlatObjectInNameOrder(t *testing.T) {
	at := time.Date(2026, 12, 1, 6, 3, 42, 144121556, time.FixedZone("CET", 3600))
	const R, S, T = `"run_id":"r1"`, `"step":"s"`, `"time":"2026-12-01T05:03:42.144121556Z"` // in UTC
	name, version := "demo", "1.0"
	cases := []struct {
		name string
		data steps.EventData
		want string
	}{
		{"the env policy decides", acpagent.Env{Policy: "workflow", Rule: "core", Names: 9},
			`{"kind":"env","names":9,"policy":"workflow","rule":"core",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"the env policy decides within an outer policy", acpagent.Env{Policy: "workflow", Rule: "core", Names: 9,
			Outer: []policies.OuterEnvRule{{Policy: "/etc/acpflow/policy.yaml", Rule: "rules(1)"}, {Policy: "/o.yaml", Rule: "e.wasm", Stderr: "w"}}},
			`{"kind":"env","names":9,"outer":[{"policy":"/etc/acpflow/policy.yaml","rule":"rules(1)"},{"policy":"/o.yaml","policy_stderr":"w","rule":"e.wasm"}],` +
				`"policy":"workflow","rule":"core",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"an agent is spawned", acpagent.Spawned{PID: 42, StartTicks: 7, Cwd: "/ws"},
			`{"cwd":"/ws","kind":"spawned","pid":42,` + R + `,"start_ticks":7,` + S + `,` + T + `,"type":"step_update"}`},
		{"an agent says who it is", acpagent.Initialized{ProtocolVersion: 1, AgentName: &name, AgentVersion: &version},
			`{"agent_name":"demo","agent_version":"1.0","kind":"initialized","protocol_version":1,` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"an agent says nothing of itself", acpagent.Initialized{ProtocolVersion: 1},
			`{"kind":"initialized","protocol_version":1,` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"a session is open", acpagent.Session{SessionID: "sid"},
			`{"kind":"session",` + R + `,"session_id":"sid",` + S + `,` + T + `,"type":"step_update"}`},
		{"a session is configured", acpagent.SessionConfigured{Mode: "plan", Config: map[string]string{"model": "m", "effort": "low"}},
			`{"config":{"effort":"low","model":"m"},"kind":"session_configured","mode":"plan",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"agent text", acpagent.MessageChunk{Text: "é\x01<&>\u2028\xff"},
			`{"kind":"agent_message_chunk",` + R + `,` + S + `,"text":"é\u0001\u003c\u0026\u003e\u2028\ufffd",` + T + `,"type":"step_update"}`},
		{"another update keeps the agent's member order", acpagent.AgentUpdate{Kind: "tool_call", Update: json.RawMessage(`{"toolCallId":"c","status":"pending","sessionUpdate":"tool_call"}`)},
			`{"kind":"tool_call",` + R + `,` + S + `,` + T + `,"type":"step_update","update":{"toolCallId":"c","status":"pending","sessionUpdate":"tool_call"}}`},
		{"an update with no body", acpagent.AgentUpdate{Kind: "unknown"},
			`{"kind":"unknown",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"a cancel is sent", acpagent.CancelSent{},
			`{"kind":"cancel_sent",` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"an answer that does not match the output schema is followed up", acpagent.SchemaRetry{Retry: 1, Retries: 2, Errors: []string{"at '/approved': got string, want boolean"}},
			`{"errors":["at '/approved': got string, want boolean"],"kind":"schema_retry","retries":2,"retry":1,` + R + `,` + S + `,` + T + `,"type":"step_update"}`},
		{"a descendant is seen", acpagent.Descendant{AgentPID: 42, PID: 43, PGID: 43, StartTicks: 9},
			`{"agent_pid":42,"kind":"descendant","pgid":43,"pid":43,` + R + `,"start_ticks":9,` + S + `,` + T + `,"type":"step_update"}`},
		{"an agent is torn down", acpagent.Teardown{PID: 42, Tier: "term", Exit: "signal: terminated", DurationMS: 3,
			EscapedKilled: 1, Descendants: 2, Error: "e", NonProtocolLines: 4, UnhandledNotifications: 5},
			`{"descendants":2,"duration_ms":3,"error":"e","escaped_killed":1,"exit":"signal: terminated","kind":"teardown","non_protocol_lines":4,"pid":42,` + R + `,` + S + `,"tier":"term",` + T + `,"type":"step_update","unhandled_notifications":5}`},
		{"an agent exits by itself", acpagent.Teardown{PID: 42, Tier: "eof", Exit: "exit status 0"},
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
			var all map[string]json.RawMessage
			if err := json.Unmarshal(got, &all); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"type", "run_id", "step", "time"} {
				delete(all, k)
			}
			if a, _ := json.Marshal(all); string(fields) != string(a) {
				t.Errorf("fields %s, want %s", fields, a)
			}
		})
	}
}

func BenchmarkEventJSON(b *testing.B) {
	e := steps.Event{RunID: "20261201T060342-f71915db", Step: "greet", Time: time.Now(), Data: acpagent.MessageChunk{Text: "Hello, world"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}
