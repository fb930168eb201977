package main

import (
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/temporal/flow"
)

// Covers: the run ids the Temporal backend submits under, now that the run
// service's pool calls it: --id names a lone run and ID-LINE a batch's;
// without it the id is derived, the same for the same file, workspace,
// line and inputs (a resubmission takes the run up) and another for
// another line or other inputs.
func TestTheTemporalBackendNamesRunsAsBefore(t *testing.T) {
	wf := &engine.Workflow{Name: "w", Hash: "h"}
	req := func(line int, x string) runs.Request {
		r := runs.Request{Line: line}
		r.Inputs = map[string]any{"x": x}
		return r
	}
	named := &temporalBackend{id: "nightly", base: flow.Request{Workspace: "/ws"}}
	if got := named.runID(wf, req(0, "a")); got != "nightly" {
		t.Errorf("a lone run with --id: %q", got)
	}
	if got := named.runID(wf, req(7, "a")); got != "nightly-7" {
		t.Errorf("line 7 with --id: %q", got)
	}
	derived := &temporalBackend{base: flow.Request{Workspace: "/ws"}}
	one := derived.runID(wf, req(1, "a"))
	if again := derived.runID(wf, req(1, "a")); again != one || one == "" {
		t.Errorf("the same run twice: %q, %q", one, again)
	}
	for _, other := range []runs.Request{req(2, "a"), req(1, "b"), req(0, "a")} {
		if id := derived.runID(wf, other); id == one {
			t.Errorf("line %d inputs %v: the same id %q as line 1's", other.Line, other.Inputs, id)
		}
	}
}
