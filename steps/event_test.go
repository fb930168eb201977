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

// An element's events carry its index beside the envelope, in the stream
// and in what the run store keeps, whatever the payload: a chunk, an
// element's end, a step_start that has it in its payload too (once).
func TestAnElementsEventsCarryItsIndex(t *testing.T) {
	three := 3
	at := time.Unix(0, 0)
	cases := []struct {
		data       steps.EventData
		want, kept string
	}{
		{steps.Warning{Message: "m"},
			`{"index":3,"kind":"warning","message":"m","run_id":"r","step":"s","time":"1970-01-01T00:00:00Z","type":"step_update"}`,
			`{"index":3,"kind":"warning","message":"m"}`},
		{steps.ElementEnd{Status: "failed", StopReason: "error", Attempts: 2, DurationMS: 5, Error: "x"},
			`{"attempts":2,"duration_ms":5,"error":"x","index":3,"kind":"element_end","run_id":"r","status":"failed","step":"s","stop_reason":"error","time":"1970-01-01T00:00:00Z","type":"step_update"}`,
			`{"attempts":2,"duration_ms":5,"error":"x","index":3,"kind":"element_end","status":"failed","stop_reason":"error"}`},
		{steps.StepStart{Attempt: 1, Index: &three},
			`{"attempt":1,"index":3,"run_id":"r","step":"s","time":"1970-01-01T00:00:00Z","type":"step_start"}`,
			`{"attempt":1,"index":3}`},
	}
	for _, c := range cases {
		e := steps.Event{RunID: "r", Step: "s", Index: &three, Time: at, Data: c.data}
		got, _ := json.Marshal(e)
		if string(got) != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
		kept, _ := e.FieldsJSON()
		if string(kept) != c.kept {
			t.Errorf("kept %s\nwant %s", kept, c.kept)
		}
	}
}
