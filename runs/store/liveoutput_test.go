package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A streaming step's chunks are joined as they are written, within each
// 50 ms batch, into one row per stream: the text, its order, and the
// events between (another step's, the step's own turn_end) are unchanged.
func TestAStepsOutputChunksAreJoinedAsTheyAreWritten(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.CreateRun(ctx, Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	ev := func(step, typ, fields string) {
		s.AppendEvent(Event{RunID: "r", StepID: step, Type: typ, FieldsJSON: []byte(fields)})
	}
	chunk := func(step, text string) {
		ev(step, "step_update", fmt.Sprintf(`{"kind":"agent_message_chunk","text":%q}`, text))
	}
	ev("a", "step_start", `{"attempt":1}`)
	for _, w := range strings.Fields("one two three") {
		chunk("a", w+" ")
		ev("b", "step_update", fmt.Sprintf(`{"kind":"stdout","text":%q}`, w+"\n")) // another step, between: joined apart
	}
	ev("a", "step_update", `{"kind":"tool_call","toolCallId":"c1"}`) // the step's own event ends the stretch
	chunk("a", "four")
	ev("e", "step_update", `{"index":0,"kind":"stdout","text":"e0 "}`)
	ev("e", "step_update", `{"index":1,"kind":"stdout","text":"e1 "}`)
	ev("e", "step_update", `{"index":0,"kind":"stdout","text":"e0 again"}`)
	ev("a", "turn_end", `{"stop_reason":"end_turn"}`)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Events(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, e := range got {
		rows = append(rows, fmt.Sprintf("%s %s %v %v", e.StepID, e.Type, e.Fields["index"], e.Fields["text"]))
	}
	want := []string{
		"a step_start <nil> <nil>",
		"a step_update <nil> one two three ",
		"b step_update <nil> one\ntwo\nthree\n",
		"a step_update <nil> <nil>",
		"a step_update <nil> four",
		"e step_update 0 e0 e0 again",
		"e step_update 1 e1 ",
		"a turn_end <nil> <nil>",
	}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// What a running step wrote so far is its latest attempt's text, each
// element's apart, in index order; past the bound only the newest.
func TestStepLiveOutputIsTheLatestAttemptsNewestText(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.CreateRun(ctx, Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	ev := func(fields string, typ ...string) {
		ty := "step_update"
		if len(typ) > 0 {
			ty = typ[0]
		}
		s.AppendEvent(Event{RunID: "r", StepID: "s", Type: ty, FieldsJSON: []byte(fields)})
		s.Flush(ctx) // each its own batch: rows as a slow writer leaves them
	}
	ev(`{"attempt":1,"index":1}`, "step_start")
	ev(`{"index":1,"kind":"stdout","text":"old "}`)
	ev(`{"attempt":1,"index":0}`, "step_start")
	ev(`{"index":0,"kind":"stdout","text":"zero"}`)
	ev(`{"attempt":2,"index":1}`, "step_start")
	ev(`{"index":1,"kind":"stdout","text":"new "}`)
	ev(`{"index":1,"kind":"stdout","text":"text"}`)
	outs, err := s.StepLiveOutput(ctx, "r", "s", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || *outs[0].Index != 0 || outs[0].Text != "zero" || *outs[1].Index != 1 || outs[1].Text != "new text" ||
		outs[1].Attempt != 2 || outs[1].Cut || outs[1].Started.IsZero() {
		t.Fatalf("outputs %+v", outs)
	}
	outs, _ = s.StepLiveOutput(ctx, "r", "s", 4)
	if len(outs) != 1 || outs[0].Text != "text" || !outs[0].Cut {
		t.Errorf("bounded to 4 bytes: %+v, want the newest row, marked cut", outs)
	}
}

// Once every element's latest step_start is read (the step's, without
// for-each), the text is whole: the same, read however far back the log
// goes.
func TestStepLiveOutputStopsAtTheLatestAttempts(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.CreateRun(ctx, Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	ev := func(step, typ, fields string) {
		s.AppendEvent(Event{RunID: "r", StepID: step, Type: typ, FieldsJSON: []byte(fields)})
	}
	ev("s", "step_start", `{"attempt":1}`)
	ev("s", "step_update", `{"kind":"stdout","text":"old"}`)
	ev("e", "step_start", `{"attempt":1,"index":0,"elements":2}`)
	ev("e", "step_start", `{"attempt":1,"index":1,"elements":2}`)
	ev("s", "step_start", `{"attempt":2}`)
	ev("e", "step_update", `{"index":1,"kind":"stdout","text":"one"}`)
	ev("s", "step_update", `{"kind":"stdout","text":"new"}`)
	ev("e", "step_update", `{"index":0,"kind":"stdout","text":"zero"}`)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if outs, err := s.StepLiveOutput(ctx, "r", "s", 1<<20); err != nil || len(outs) != 1 || outs[0].Text != "new" || outs[0].Attempt != 2 || outs[0].Cut {
		t.Errorf("step s: %+v %v; want attempt 2's new", outs, err)
	}
	outs, err := s.StepLiveOutput(ctx, "r", "e", 1<<20)
	if err != nil || len(outs) != 2 || outs[0].Text != "zero" || outs[1].Text != "one" || outs[0].Cut || outs[1].Cut {
		t.Errorf("step e: %+v %v; want zero and one, whole", outs, err)
	}
}
