package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/api/serviceerror"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/temporal/client"
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

// Covers: the run command acpflow-temporal offers is acpflow's (cli):
// every flag of acpflow run, with its shorthand, help and default (but
// --concurrency's, which bounds submissions here), plus Temporal's own
// --heartbeat and --id. cmd/acpflow checks its run is cli's too.
func TestRunHasTheFlagsOfAcpflowRun(t *testing.T) {
	acpflowRun := cli.New(cli.Config{Concurrency: 64}).Flags()
	temporalRun := NewRunCmd(&Conn{}).Flags()
	acpflowRun.VisitAll(func(want *pflag.Flag) {
		got := temporalRun.Lookup(want.Name)
		switch {
		case got == nil:
			t.Errorf("--%s: acpflow run has it, acpflow-temporal run does not", want.Name)
		case got.Shorthand != want.Shorthand || got.Usage != want.Usage || got.DefValue != want.DefValue || got.Value.Type() != want.Value.Type():
			t.Errorf("--%s: acpflow-temporal run has -%s %q (%s, default %q), acpflow run -%s %q (%s, default %q)", want.Name,
				got.Shorthand, got.Usage, got.Value.Type(), got.DefValue, want.Shorthand, want.Usage, want.Value.Type(), want.DefValue)
		}
	})
	var extra []string
	temporalRun.VisitAll(func(f *pflag.Flag) {
		if acpflowRun.Lookup(f.Name) == nil {
			extra = append(extra, f.Name)
		}
	})
	if strings.Join(extra, " ") != "heartbeat id" {
		t.Errorf("acpflow-temporal run's own flags: %v, want [heartbeat id]", extra)
	}
}

// Covers: the events of a run on Temporal (the lines workers write, as
// flow.EventsQuery returns them) reach the command's view as acpflow
// run's do: with --json each line exactly as written, whatever its type
// (the engine's, a step kind's own, one this client does not know);
// without it the engine's events typed, as the live and plain views read
// them, and a step kind's own passed on as they are.
func TestTheEventsOfARunOnTemporalReachTheView(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	idx, tokens := 2, int64(40)
	events := []steps.Event{
		{RunID: "r", Time: at, Data: steps.RunStart{Workflow: "w", Workspace: "/ws", Steps: []string{"a", "b"}}},
		{RunID: "r", Step: "a", Index: &idx, Time: at, Data: steps.StepStart{Attempt: 2, Index: &idx, Elements: 3}},
		{RunID: "r", Step: "a", Index: &idx, Time: at, Data: steps.Retry{AfterMS: 1500, Error: "exit 3"}},
		{RunID: "r", Step: "a", Index: &idx, Time: at, Data: steps.ElementEnd{Status: "failed", StopReason: "error", Attempts: 2, DurationMS: 7, Error: "x"}},
		{RunID: "r", Step: "a", Time: at, Data: steps.Warning{Message: "slow \x1b[31m"}},
		{RunID: "r", Step: "a", Time: at, Data: acpagent.MessageChunk{Text: "hi <b> & 🎉"}},
		{RunID: "r", Step: "a", Time: at, Data: steps.Permission{PermissionRecord: policies.PermissionRecord{Kind: "execute", Title: "rm x", Decision: policies.Allow}}},
		{RunID: "r", Step: "a", Time: at, Data: steps.StepEnd{Status: "succeeded", StopReason: "end_turn", Attempts: 2, DurationMS: 9, Usage: &steps.Usage{InputTokens: &tokens}}},
		{RunID: "r", Time: at, Data: steps.RunEnd{Status: "failed", DurationMS: 12, Error: "b failed"}},
	}
	for _, e := range events {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, raw, ok := decodeEvent(line)
		if !ok {
			t.Fatalf("%s: not decoded", line)
		}
		if again, _ := json.Marshal(steps.Event{RunID: got.RunID, Step: got.Step, Time: got.Time, Data: raw}); string(again) != string(line) {
			t.Errorf("--json: %s\nwas written %s", again, line)
		}
		if got.RunID != e.RunID || got.Step != e.Step || !got.Time.Equal(e.Time) || got.Type() != e.Type() || got.Kind() != e.Kind() ||
			fmt.Sprint(got.Index != nil) != fmt.Sprint(e.Index != nil) || got.Index != nil && *got.Index != *e.Index {
			t.Errorf("%s: read as %+v", line, got)
		}
		if _, kinds := e.Data.(acpagent.MessageChunk); kinds {
			continue // a step kind's own: passed on as written
		}
		if again, _ := json.Marshal(got); string(again) != string(line) {
			t.Errorf("typed: %s\nwas written %s", again, line)
		}
		if _, isRaw := got.Data.(rawEvent); isRaw {
			t.Errorf("%s: the view gets it untyped", line)
		}
	}
	for _, bad := range []string{"", "null", "[1]", `{"run_id":"r"}`, `{"type":7}`, "{"} {
		if _, _, ok := decodeEvent([]byte(bad)); ok {
			t.Errorf("%q read as an event", bad)
		}
	}
}

// sink records the events it is given.
type sink struct {
	mu sync.Mutex
	es []steps.Event
}

func (s *sink) Emit(e steps.Event) { s.mu.Lock(); s.es = append(s.es, e); s.mu.Unlock() }

// Covers: --budget on Temporal: what the run's steps report as they end
// (step_end's usage, summed) goes to the batch's meter as the run's total
// so far, with --json or without, and whatever the view.
func TestTheBackendTellsTheMeterWhatARunSpends(t *testing.T) {
	ten, five := int64(10), int64(5)
	lines := [][]byte{}
	for _, e := range []steps.Event{
		{RunID: "r", Step: "a", Data: steps.StepEnd{Status: "succeeded", Usage: &steps.Usage{TotalTokens: &ten}}},
		{RunID: "r", Step: "b", Data: steps.StepEnd{Status: "failed"}},
		{RunID: "r", Step: "c", Data: steps.StepEnd{Status: "succeeded", Usage: &steps.Usage{TotalTokens: &five}}},
		{RunID: "r", Data: steps.RunEnd{Status: "failed", Usage: &steps.Usage{TotalTokens: &ten}}},
	} {
		l, _ := json.Marshal(e)
		lines = append(lines, l)
	}
	for _, jsonOut := range []bool{false, true} {
		var totals []int64
		view := &sink{}
		req := runs.Request{}
		req.Events = view
		req.OnUsage = func(runID string, u *steps.Usage) {
			n, _ := u.Tokens()
			if runID != "tx" {
				t.Errorf("usage of %q", runID)
			}
			totals = append(totals, n)
		}
		hear := (&temporalBackend{json: jsonOut}).events("tx", req)
		for _, l := range lines {
			hear(l)
		}
		hear([]byte("not json"))
		if fmt.Sprint(totals) != "[10 15]" {
			t.Errorf("json %v: the meter heard %v, want [10 15] (the run_end's sum is the result's)", jsonOut, totals)
		}
		if len(view.es) != len(lines) {
			t.Errorf("json %v: the view got %d events, want %d", jsonOut, len(view.es), len(lines))
		}
	}
}

// Covers: what stops a run on Temporal. An interrupt leaves its workflow
// execution running (the same command takes it up); a batch stopped
// otherwise (its budget exceeded) cancels it, an execution that is
// already gone is no error, and a cancel that fails is said. A run that
// failed with nothing stopped cancels nothing.
func TestARunStoppedByTheBudgetIsCancelledOnTemporal(t *testing.T) {
	over := errors.New("batch budget exceeded: tokens 15 > 10")
	for _, c := range []struct {
		name       string
		cause      error // nil: not stopped
		cancelErr  error
		wantCancel bool
		wantErr    string
	}{
		{"not stopped", nil, nil, false, "run t1: boom"},
		{"interrupted", engine.ErrInterrupted, nil, false, "run t1: boom"},
		{"over budget", over, nil, true, "its workflow execution is cancelled (batch budget exceeded"},
		{"over budget, already gone", over, serviceerror.NewNotFound("gone"), true, "its workflow execution is cancelled"},
		{"over budget, cancel fails", over, errors.New("unavailable"), true, "cancelling its workflow execution: unavailable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cancelled []string
			b := &temporalBackend{cancel: func(_ context.Context, id string) error {
				cancelled = append(cancelled, id)
				return c.cancelErr
			}}
			ctx, cancel := context.WithCancelCause(context.Background())
			if c.cause != nil {
				cancel(c.cause)
			}
			defer cancel(nil)
			err := b.stopped(ctx, "t1", errors.New("boom"))
			if got := len(cancelled) > 0; got != c.wantCancel || got && cancelled[0] != client.WorkflowID("t1") {
				t.Errorf("cancelled %v, want a cancel: %v", cancelled, c.wantCancel)
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error %q, want %q", err, c.wantErr)
			}
		})
	}
}

// awaitedOnTemporal is the Temporal backend's Run without a server: its
// run reports a step that spent tokens, then is waited for until the batch
// stops, as a run in flight on Temporal is.
type awaitedOnTemporal struct {
	b     *temporalBackend
	spent int64
}

func (a awaitedOnTemporal) Run(ctx context.Context, wf *engine.Workflow, req runs.Request) (*engine.RunResult, error) {
	id := fmt.Sprintf("t%d", req.Line)
	line, _ := json.Marshal(steps.Event{RunID: id, Step: "s", Data: steps.StepEnd{Status: "succeeded", Usage: &steps.Usage{TotalTokens: &a.spent}}})
	a.b.events(id, req)(line)
	<-ctx.Done()
	return nil, a.b.stopped(ctx, id, ctx.Err())
}

// Covers: --budget on Temporal through the run service's batch pool: the
// usage the runs in flight report reaches the Runner's meter, which stops
// the batch, and the runs in flight then have their workflow executions
// cancelled; the batch fails. An interrupt instead cancels none (the runs
// go on on Temporal).
func TestABatchOverItsBudgetCancelsItsRunsOnTemporal(t *testing.T) {
	wf := &engine.Workflow{Name: "w", Hash: "h"}
	for _, c := range []struct {
		name      string
		budget    string
		interrupt bool
		want      []string
	}{
		{"over budget", "tokens=150", false, []string{"acpflow-t1", "acpflow-t2"}},
		{"interrupted", "", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var cancelled []string
			b := &temporalBackend{cancel: func(_ context.Context, id string) error {
				mu.Lock()
				defer mu.Unlock()
				cancelled = append(cancelled, id)
				return nil
			}}
			r := &runs.Runner{Backend: awaitedOnTemporal{b: b, spent: 100}, Notice: func(string) {}}
			if c.budget != "" {
				var err error
				if r.Budget, err = engine.ParseBudget(c.budget); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if c.interrupt {
				// Once both runs are in flight: the pool holds two.
				var once sync.Once
				var n int
				r.Events = eventsFunc(func(steps.Event) {
					mu.Lock()
					n++
					both := n >= 2
					mu.Unlock()
					if both {
						once.Do(func() { cancel(engine.ErrInterrupted) })
					}
				})
			}
			in := runs.NewLineReader(strings.NewReader("{}\n{}\n{}\n"), "in.jsonl")
			first, _ := in.Next()
			if err := r.Batch(ctx, wf, runs.NewBatch(wf, "/ws", "in.jsonl", 2, first), in, false, 2); err != nil {
				t.Fatal(err)
			}
			slices.Sort(cancelled)
			if !slices.Equal(cancelled, c.want) {
				t.Errorf("cancelled %v, want %v", cancelled, c.want)
			}
			if r.Failures() == 0 {
				t.Errorf("the batch did not fail")
			}
		})
	}
}

// eventsFunc is a steps.Sink of a func.
type eventsFunc func(steps.Event)

func (f eventsFunc) Emit(e steps.Event) { f(e) }
