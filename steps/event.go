package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
)

// Event is one entry of a run's event stream (`--json`, docs/results.md). Its
// payload is typed (Data): one Go type per event type, and one per kind of
// step_update.
//
// # Notes
//
// The JSON is one flat object: type, run_id, step, time, a step update's
// kind, and the payload's members, all in name order. That is the order
// the stream had when events were maps, and readers may compare lines
// byte for byte.
type Event struct {
	RunID string
	Step  string // "" for run_start and run_end
	// Index is the for-each element's index, on every event of an element
	// (its attempts' events, its retries, its element_end), so that a
	// reader can tell apart the elements that run at once; nil for any
	// other event (a for-each step's step_end is the whole step's).
	Index *int
	Time  time.Time
	Data  EventData
}

// EventData is an event's payload; its JSON members are the event's own.
type EventData interface {
	// EventType is the event's "type": run_start, step_start, step_update,
	// permission, turn_end, step_end or run_end.
	EventType() string
}

// Update is the payload of a step_update: one thing a step did or saw.
type Update interface {
	EventData
	// UpdateKind is the update's "kind": spawned, initialized, session,
	// agent_message_chunk, teardown, and so on.
	UpdateKind() string
}

// Type is the event's "type".
func (e Event) Type() string {
	if e.Data == nil {
		return ""
	}
	return e.Data.EventType()
}

// Kind is a step_update's "kind", else "".
func (e Event) Kind() string {
	if u, ok := e.Data.(Update); ok {
		return u.UpdateKind()
	}
	return ""
}

// Sink receives events. Implementations must be safe for concurrent use and
// must not block for long: a step calls Emit on its protocol path.
type Sink interface {
	Emit(Event)
}

// Discard is a Sink that drops every event.
type Discard struct{}

// Emit implements Sink.
func (Discard) Emit(Event) {}

// MarshalJSON writes the event as one flat object, members in name order.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.encode(true)
}

// FieldsJSON is the payload alone as a JSON object, with a step update's
// kind, members in name order: what the run store keeps of an event.
func (e Event) FieldsJSON() ([]byte, error) {
	return e.encode(false)
}

// member is one member of a JSON object: its key as written between the
// quotes, and its value as encoded.
type member struct{ key, value []byte }

var (
	keyType  = []byte("type")
	keyRunID = []byte("run_id")
	keyStep  = []byte("step")
	keyTime  = []byte("time")
	keyKind  = []byte("kind")
	keyIndex = []byte("index")
)

// encode writes the payload's members, and the envelope's when asked, as
// one object in name order. The payload is encoded by encoding/json and
// its members are then sorted: cheaper than the map the stream was once
// written from, and with the same bytes.
func (e Event) encode(envelope bool) ([]byte, error) {
	payload := []byte("{}")
	if e.Data != nil {
		var err error
		if payload, err = json.Marshal(e.Data); err != nil {
			return nil, fmt.Errorf("steps: %s event: %w", e.Type(), err)
		}
	}
	var buf [24]member
	ms := buf[:0]
	// The envelope comes first, so that a payload member of the same name
	// is the one dropped, as a map would have overwritten it.
	env := make([]byte, 0, 96)
	var spans [6]struct {
		key      []byte
		from, to int
	}
	n := 0
	add := func(key []byte, from int) {
		spans[n].key, spans[n].from, spans[n].to = key, from, len(env)
		n++
	}
	if envelope {
		from := len(env)
		env = appendString(env, e.Type())
		add(keyType, from)
		from = len(env)
		env = appendString(env, e.RunID)
		add(keyRunID, from)
		from = len(env)
		env = appendString(env, e.Step)
		add(keyStep, from)
		from = len(env)
		env = append(env, '"')
		env = e.Time.UTC().AppendFormat(env, time.RFC3339Nano)
		env = append(env, '"')
		add(keyTime, from)
	}
	if k := e.Kind(); k != "" {
		from := len(env)
		env = appendString(env, k)
		add(keyKind, from)
	}
	// The index is kept with the payload (the run store's too): it is
	// what tells an element's events from its siblings'.
	if e.Index != nil {
		from := len(env)
		env = strconv.AppendInt(env, int64(*e.Index), 10)
		add(keyIndex, from)
	}
	for _, s := range spans[:n] {
		ms = append(ms, member{s.key, env[s.from:s.to]})
	}
	ms, err := splitObject(payload, ms)
	if err != nil {
		return nil, fmt.Errorf("steps: %s event: %w", e.Type(), err)
	}
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })

	out := make([]byte, 0, len(payload)+len(env)+8*len(ms))
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 && bytes.Equal(m.key, ms[i-1].key) {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, m.key...)
		out = append(out, '"', ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// splitObject appends the members of obj to ms. obj is a JSON object as
// encoding/json writes it: valid and compact.
func splitObject(obj []byte, ms []member) ([]member, error) {
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("payload is not a JSON object: %.40s", obj)
	}
	for i := 1; i < len(obj)-1; {
		end := stringEnd(obj, i) // obj[i] is the key's opening quote
		key := obj[i+1 : end-1]
		i = end + 1 // past the colon
		vend := valueEnd(obj, i)
		ms = append(ms, member{key, obj[i:vend]})
		i = vend
		if obj[i] == ',' {
			i++
		}
	}
	return ms, nil
}

// stringEnd is the index just past the JSON string that starts at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd is the index just past the JSON value that starts at b[i], in
// an object or array whose closing bracket ends b.
func valueEnd(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			j = stringEnd(b, j) - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j
			}
			if depth--; depth == 0 {
				return j + 1
			}
		case ',':
			if depth == 0 {
				return j
			}
		}
	}
	return len(b)
}

// The engine's events.

// RunStart begins a run: its workflow, workspace and steps in file order.
type RunStart struct {
	Workflow  string   `json:"workflow"`
	Workspace string   `json:"workspace"`
	Steps     []string `json:"steps"`
}

// RunEnd ends a run, after every teardown. Invalid marks a batch line that
// never ran (its inputs were not valid, or another process runs it).
type RunEnd struct {
	Status     string `json:"status"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	Invalid    bool   `json:"invalid,omitempty"`
	// Usage sums what the run's steps reported; nil when none did.
	Usage *Usage `json:"usage,omitempty"`
	// Worktree is the run's git worktree as the result has it
	// (*engine.Worktree: isolation: worktree); nil without one.
	Worktree any `json:"worktree,omitempty"`
}

// StepStart begins an attempt of a step; Index is the for-each element's,
// and Elements how many elements the step has (what `N/M done` counts
// to; 0 for a step without for-each). Item is the element's item as JSON,
// so that a view can say which element is which while it runs; one longer
// than MaxItemJSON is that much of its JSON text, cut, as a string.
type StepStart struct {
	Attempt  int             `json:"attempt"`
	Index    *int            `json:"index,omitempty"`
	Elements int             `json:"elements,omitempty"`
	Item     json.RawMessage `json:"item,omitempty"`
}

// MaxItemJSON bounds the item a step_start carries: an element's item may
// be a large value, and it is written at each attempt of each element.
const MaxItemJSON = 1024

// ItemJSON is a for-each item as step_start carries it: its JSON, or when
// that is longer than MaxItemJSON (or not encodable), its first bytes cut
// at a character's end and marked with "…", as a JSON string.
func ItemJSON(item any) json.RawMessage {
	b, err := json.Marshal(item)
	if err == nil && len(b) <= MaxItemJSON {
		return b
	}
	if err != nil {
		b = []byte(fmt.Sprint(item))
	}
	s, _ := json.Marshal(termtext.Cut(string(b), MaxItemJSON) + "…")
	return s
}

// StepEnd says a step settled; it is a skipped step's only event.
type StepEnd struct {
	Status     string `json:"status"`
	StopReason string `json:"stop_reason"`
	Attempts   int    `json:"attempts"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	// Usage is what the step's agent reported; nil when it reported nothing.
	Usage *Usage `json:"usage,omitempty"`
}

// ElementEnd says one element of a for-each step is done, after its last
// attempt (its Event's Index says which): what the line and live views
// count as `N/M done`, and `show` lists per element. The step's own
// step_end comes when every element is done.
type ElementEnd struct {
	Status     string `json:"status"`
	StopReason string `json:"stop_reason"`
	Attempts   int    `json:"attempts"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
}

// Retry says a failed attempt is tried again after AfterMS.
type Retry struct {
	AfterMS int64  `json:"after_ms"`
	Error   string `json:"error"`
}

// A step kind's events.

// TurnEnd is a step's turn ending: the step settles with it, before its
// agent's teardown.
type TurnEnd struct {
	StopReason StopReason `json:"stop_reason"`
}

// Permission is a permission request answered, as recorded.
type Permission struct {
	policies.PermissionRecord
}

// MarshalJSON writes the record with each location's members in name
// order, as the stream always had them.
func (p Permission) MarshalJSON() ([]byte, error) {
	type record policies.PermissionRecord // without this method
	type location struct {
		InWorkspace bool   `json:"in_workspace"`
		Line        int    `json:"line"`
		Path        string `json:"path"`
	}
	v := struct {
		record
		Locations []location `json:"locations"`
	}{record: record(p.PermissionRecord)}
	if p.Locations != nil {
		v.Locations = make([]location, len(p.Locations))
		for i, l := range p.Locations {
			v.Locations[i] = location{InWorkspace: l.InWorkspace, Line: l.Line, Path: l.Path}
		}
	}
	return json.Marshal(v)
}

// Unasked is a tool call that ran without a permission request, judged
// by the policy as if it had asked (docs/results.md#unasked): its record
// has Decision "unasked" and Would.
type Unasked struct {
	policies.PermissionRecord
}

// MarshalJSON writes the record as Permission does.
func (u Unasked) MarshalJSON() ([]byte, error) { return Permission(u).MarshalJSON() }

// Warning is something the step did that the user should know of although
// it did not fail: an old auth id mapped to today's, a preset setting the
// agent ignores.
type Warning struct {
	Message string `json:"message"`
}

func (RunStart) EventType() string   { return "run_start" }
func (RunEnd) EventType() string     { return "run_end" }
func (StepStart) EventType() string  { return "step_start" }
func (StepEnd) EventType() string    { return "step_end" }
func (TurnEnd) EventType() string    { return "turn_end" }
func (Permission) EventType() string { return "permission" }
func (Unasked) EventType() string    { return "unasked" }
func (Warning) EventType() string    { return "step_update" }
func (Retry) EventType() string      { return "step_update" }
func (ElementEnd) EventType() string { return "step_update" }

func (Retry) UpdateKind() string      { return "retry" }
func (ElementEnd) UpdateKind() string { return "element_end" }
func (Warning) UpdateKind() string    { return "warning" }

// Emit sends one of the step's events, stamped with the invocation's run
// and step and the time.
func (inv *Invocation) Emit(d EventData) {
	if inv.Events == nil {
		return
	}
	inv.Events.Emit(Event{RunID: inv.RunID, Step: inv.StepID, Time: time.Now(), Data: d})
}
