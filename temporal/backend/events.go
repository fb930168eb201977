package backend

import (
	"encoding/json"
	"time"

	"github.com/acpflow/acpflow/steps"
)

// rawEvent is an event's payload as a worker wrote it (a line of
// flow.EventsQuery): steps.Event encodes it back to the same line, so
// that --json prints what acpflow run --json prints.
type rawEvent struct {
	typ, kind string
	line      json.RawMessage
}

func (r rawEvent) EventType() string            { return r.typ }
func (r rawEvent) UpdateKind() string           { return r.kind }
func (r rawEvent) MarshalJSON() ([]byte, error) { return r.line, nil }

// decodeEvent reads an event line of a run on Temporal: the event with
// the payload the views read (the engine's events, typed) and the payload
// as written. A line that is no event object is not ok.
func decodeEvent(line []byte) (e steps.Event, raw rawEvent, ok bool) {
	var env struct {
		Type  string    `json:"type"`
		RunID string    `json:"run_id"`
		Step  string    `json:"step"`
		Time  time.Time `json:"time"`
		Kind  string    `json:"kind"`
		Index *int      `json:"index"`
	}
	if json.Unmarshal(line, &env) != nil || env.Type == "" {
		return steps.Event{}, rawEvent{}, false
	}
	raw = rawEvent{typ: env.Type, kind: env.Kind, line: line}
	e = steps.Event{RunID: env.RunID, Step: env.Step, Index: env.Index, Time: env.Time, Data: raw}
	var typed steps.EventData
	switch {
	case env.Type == "run_start":
		typed = decodeAs[steps.RunStart](line)
	case env.Type == "run_end":
		typed = decodeAs[steps.RunEnd](line)
	case env.Type == "step_start":
		typed = decodeAs[steps.StepStart](line)
	case env.Type == "step_end":
		typed = decodeAs[steps.StepEnd](line)
	case env.Type == "turn_end":
		typed = decodeAs[steps.TurnEnd](line)
	case env.Type == "permission":
		typed = decodeAs[steps.Permission](line)
	case env.Type == "unasked":
		typed = decodeAs[steps.Unasked](line)
	case env.Type == "step_update" && env.Kind == "retry":
		typed = decodeAs[steps.Retry](line)
	case env.Type == "step_update" && env.Kind == "element_end":
		typed = decodeAs[steps.ElementEnd](line)
	case env.Type == "step_update" && env.Kind == "warning":
		typed = decodeAs[steps.Warning](line)
	}
	if typed != nil {
		e.Data = typed
	}
	return e, raw, true
}

// decodeAs is line's payload as a T, nil if it is not one.
func decodeAs[T steps.EventData](line []byte) steps.EventData {
	var v T
	if json.Unmarshal(line, &v) != nil {
		return nil
	}
	return v
}

// usageOf is what a step_end says its step spent, nil for any other
// event (a run_end's sum is the run's result's).
func usageOf(e steps.Event) *steps.Usage {
	if end, ok := e.Data.(steps.StepEnd); ok {
		return end.Usage
	}
	return nil
}
