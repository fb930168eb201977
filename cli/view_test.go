package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
)

// The plain view names the element of each line and counts a for-each's
// elements from its events, elements of several runs apart; a stopped
// step counts the elements it never started.
func TestThePlainViewCountsAForEachsElements(t *testing.T) {
	var buf bytes.Buffer
	v := &plainView{w: &buf, resume: func(id string) string { return "acpflow resume " + id }}
	ix := func(i int) *int { return &i }
	emit := func(run string, index *int, d steps.EventData) {
		v.Emit(steps.Event{RunID: run, Step: "each", Index: index, Data: d})
	}
	for i := range 2 {
		emit("r1", ix(i), steps.StepStart{Attempt: 1, Index: ix(i), Elements: 4})
	}
	emit("r2", ix(0), steps.StepStart{Attempt: 1, Index: ix(0), Elements: 1})
	emit("r1", ix(1), steps.ElementEnd{Status: "succeeded", StopReason: "completed", Attempts: 1, DurationMS: 5})
	emit("r1", ix(0), steps.ElementEnd{Status: "failed", StopReason: "error", Attempts: 2, DurationMS: 7, Error: "boom"})
	emit("r1", nil, steps.StepEnd{Status: "failed", StopReason: "error", Attempts: 2, DurationMS: 9, Error: "item 0: boom"})
	v.Close([]*engine.RunResult{{RunID: "r1", Status: engine.StatusFailed}})
	want := `[each #0] started
[each #1] started
[each #0] started
[each #1] succeeded in 5ms (completed), 1/4 done
[each #0] failed in 7ms (error), 1/4 done, 1 failed: boom
[each] failed in 9ms (error), 1/4 done, 1 failed, 2 not started: item 0: boom
run r1 failed in 0s
  each: 1/4 done, 1 failed, 2 not started
resume with: acpflow resume r1
`
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// Outputs print in the order given (the workflow's), any other after them
// in name order; a JSON list or object, in a string or not, is indented.
func TestOutputsInTheirOrderAndJSONIndented(t *testing.T) {
	outputs := map[string]any{"zeta": 1, "alpha": 2, "late": 3, "extra": 4}
	if got := strings.Join(OutputNames(outputs, []string{"zeta", "alpha", "gone", "zeta"}), " "); got != "zeta alpha extra late" {
		t.Errorf("order %s", got)
	}
	for in, want := range map[any]string{
		`["a","b"]`:     "[\n  \"a\",\n  \"b\"\n]",
		` {"k": 1} `:    "{\n  \"k\": 1\n}",
		"[not json":     "[not json",
		"plain\ntext":   "plain\ntext",
		"":              "",
		3.5:             "3.5",
		`{"b":1,"a":2}`: "{\n  \"b\": 1,\n  \"a\": 2\n}", // the order written
	} {
		if got := OutputText(in); got != want {
			t.Errorf("OutputText(%q) = %q, want %q", in, got, want)
		}
	}
}
