package runs_test

// Tests of the run service itself, on the in-process fake kind
// (steps/steptest): no agent, no process. What they check is what the
// service adds around the engine: a batch's lines, counts and record; a
// resume that keeps what succeeded; claims that refuse a live owner; the
// backend seam.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/steptest"
	"github.com/acpflow/acpflow/workflows"
)

var fake = steptest.NewFake()

func init() { steps.Register(fake) }

// writeWorkflow writes src as dir/name and loads it.
func writeWorkflow(t *testing.T, dir, name, src string) *engine.Workflow {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wf, err := workflows.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// open opens a run service on a new store in dir.
func open(t *testing.T, dir string) *runs.Service {
	t.Helper()
	svc, err := runs.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

const echo = `name: echo
inputs:
  x: {type: string, required: true}
steps:
  - {id: a, uses: fake, with: {output: "${{ inputs.x }}"}}
  - {id: b, needs: a, uses: fake, with: {output: "${{ steps.a.output }}!"}}
`

// Covers: the lines of a batch, good and bad (not JSON, a missing
// required input, an input of the wrong type), read from a file (every
// line stored first) and from a stream (stored as they come). Each line is
// one result and one recorded run; a bad line fails alone.
func TestABatchRunsEachLineAndRecordsOneRunPerLine(t *testing.T) {
	lines := strings.Join([]string{`{"x":"one"}`, `not json`, `{"x":"two"}`, `{}`, `{"x":3}`, `{"x":"three"}`}, "\n") + "\n"
	for _, all := range []bool{true, false} {
		name := map[bool]string{true: "a file", false: "a stream"}[all]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			wf := writeWorkflow(t, dir, "echo.yaml", echo)
			svc := open(t, dir)
			var mu sync.Mutex
			outputs := map[string]string{}
			r := svc.Runner()
			r.Result = func(res *engine.RunResult) {
				mu.Lock()
				defer mu.Unlock()
				outputs[res.RunID] = string(res.Status)
				if res.Status == engine.StatusSucceeded {
					outputs[res.RunID] = fmt.Sprint(res.Steps["b"].Output)
				}
			}
			defer r.Close()
			in := runs.NewLineReader(strings.NewReader(lines), "in.jsonl")
			first, err := in.Next()
			if err != nil {
				t.Fatal(err)
			}
			b := runs.NewBatch(wf, dir, "in.jsonl", 2, first)
			if err := r.Batch(context.Background(), wf, b, in, all, 2); err != nil {
				t.Fatal(err)
			}
			ended, failed := r.Runs()
			if ended != 6 || failed != 3 || r.Failures() != 3 {
				t.Errorf("runs %d, failed %d, failures %d; want 6, 3, 3", ended, failed, r.Failures())
			}
			var got []string
			for _, o := range outputs {
				got = append(got, o)
			}
			slices.Sort(got)
			if want := []string{"failed", "failed", "failed", "one!", "three!", "two!"}; !slices.Equal(got, want) {
				t.Errorf("results %q, want %q", got, want)
			}
			ctx := context.Background()
			recorded, err := svc.RunsOfBatch(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			var statuses []string
			for _, run := range recorded {
				statuses = append(statuses, string(run.Status))
				if _, ok := outputs[run.ID]; !ok {
					t.Errorf("recorded run %s was not a result", run.ID)
				}
			}
			slices.Sort(statuses)
			if want := []string{"failed", "failed", "failed", "succeeded", "succeeded", "succeeded"}; !slices.Equal(statuses, want) {
				t.Errorf("recorded statuses %q, want %q", statuses, want)
			}
			rec, err := svc.GetBatch(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status != engine.StatusFailed || !rec.InputsComplete {
				t.Errorf("batch %s, inputs complete %v; want failed, true", rec.Status, rec.InputsComplete)
			}
			if id, kind, err := svc.ResolveID(ctx, b.ID[:8]); err != nil || id != b.ID || kind != runs.KindBatch {
				t.Errorf("ResolveID(prefix) = %q, %q, %v; want %q, batch", id, kind, err, b.ID)
			}
		})
	}
}

// Covers: a run resumed keeps the steps that succeeded and runs the
// others again; a workflow file changed since the run is refused unless
// forced; a run that succeeded has nothing to resume.
func TestResumeRunsOnlyWhatDidNotSucceed(t *testing.T) {
	dir := t.TempDir()
	failing := strings.Replace(echo, `output: "${{ steps.a.output }}!"`, `fail: true`, 1)
	wf := writeWorkflow(t, dir, "echo.yaml", failing)
	svc := open(t, dir)
	ctx := context.Background()
	r := svc.Runner()
	defer r.Close()
	res := r.Run(ctx, wf, runs.Spec{Inputs: map[string]any{"x": "one"}, Workspace: dir})
	if res.Status != engine.StatusFailed {
		t.Fatalf("first run %s, want failed", res.Status)
	}

	// The same file: b fails again, a is not run again.
	again, err := svc.Runner().ResumeRun(ctx, res.RunID, false)
	if err != nil || again.Status != engine.StatusFailed || again.RunID != res.RunID {
		t.Fatalf("resume: %v, %+v", err, again)
	}
	if got := fake.Trace(res.RunID).Started; !slices.Equal(got, []string{"a", "b", "b"}) {
		t.Errorf("steps started %q, want a, b, then b alone", got)
	}

	// The file fixed: refused as changed, then forced.
	writeWorkflow(t, dir, "echo.yaml", echo)
	_, err = svc.Runner().ResumeRun(ctx, res.RunID, false)
	var inv *runs.InvalidError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "changed since the run was recorded") {
		t.Fatalf("resume of a changed file: %v, want an InvalidError saying it changed", err)
	}
	done, err := svc.Runner().ResumeRun(ctx, res.RunID, true)
	if err != nil || done.Status != engine.StatusSucceeded || done.Steps["b"].Output != any("one!") {
		t.Fatalf("forced resume: %v, %+v", err, done)
	}
	if got := fake.Trace(res.RunID).Started; !slices.Equal(got, []string{"a", "b", "b", "b"}) {
		t.Errorf("steps started %q, want a never again", got)
	}
	if _, err := svc.Runner().ResumeRun(ctx, res.RunID, false); !errors.Is(err, runs.ErrSucceeded) {
		t.Errorf("resume of a succeeded run: %v, want ErrSucceeded", err)
	}
}

// Covers: a run that a live process owns (recorded running,
// its owner this test's parent) is refused, and nothing runs; one whose
// owner is gone (the same pid, another start time) is taken up.
func TestAClaimRefusesALiveOwnerAndTakesUpADeadOnes(t *testing.T) {
	ppid := os.Getppid()
	ticks, ok := procgroup.StartTicks(ppid)
	if !ok {
		t.Skip("no start time of the parent process")
	}
	for _, c := range []struct {
		name  string
		ticks uint64
		alive bool
	}{
		{"a live owner", ticks, true},
		{"a dead owner", ticks + 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			failing := strings.Replace(echo, `output: "${{ steps.a.output }}!"`, `fail: true`, 1)
			wf := writeWorkflow(t, dir, "echo.yaml", failing)
			path := filepath.Join(dir, "state.db")
			ctx := context.Background()

			// A batch of one line whose run failed; then both are marked
			// running in another process, as a crash or a live acpflow
			// leaves them.
			svc, err := runs.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			r := svc.Runner()
			in := runs.NewLineReader(strings.NewReader(`{"x":"one"}`+"\n"), "in.jsonl")
			first, _ := in.Next()
			b := runs.NewBatch(wf, dir, "in.jsonl", 1, first)
			if err := r.Batch(ctx, wf, b, in, true, 1); err != nil {
				t.Fatal(err)
			}
			recorded, err := svc.RunsOfBatch(ctx, b.ID)
			if err != nil || len(recorded) != 1 {
				t.Fatalf("runs of the batch: %v, %d", err, len(recorded))
			}
			runID := recorded[0].ID
			r.Close()
			svc.Close()
			s, err := store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ReopenRun(ctx, runID, ppid, c.ticks); err != nil {
				t.Fatal(err)
			}
			if err := s.SetRunStatus(ctx, runID, engine.StatusRunning); err != nil {
				t.Fatal(err)
			}
			s.Close()
			svc = open(t, dir)
			before := len(fake.Trace(runID).Started)

			res, err := svc.Runner().ResumeRun(ctx, runID, false)
			var inv *runs.InvalidError
			var owned *store.OwnedError
			switch {
			case c.alive && (!errors.As(err, &inv) || !errors.As(err, &owned) || owned.Owner.PID != ppid):
				t.Errorf("resume of a run a live process owns: %v, want an InvalidError naming process %d", err, ppid)
			case !c.alive && (err != nil || res.Status != engine.StatusFailed):
				t.Errorf("resume of a dead owner's run: %v, %+v; want it run (and b fail again)", err, res)
			}
			ran := len(fake.Trace(runID).Started) - before
			if want := map[bool]int{true: 0, false: 1}[c.alive]; ran != want {
				t.Errorf("%d steps ran, want %d", ran, want)
			}
		})
	}
}

// Covers: a batch resumed runs only its lines that did not succeed, and a
// batch whose every line succeeded has nothing pending.
func TestAResumedBatchRunsOnlyTheLinesThatFailed(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, "echo.yaml", echo)
	svc := open(t, dir)
	ctx := context.Background()
	r := svc.Runner()
	in := runs.NewLineReader(strings.NewReader(`{"x":"one"}`+"\n"+`{}`+"\n"+`{"x":"two"}`+"\n"), "in.jsonl")
	first, _ := in.Next()
	b := runs.NewBatch(wf, dir, "in.jsonl", 2, first)
	if err := r.Batch(ctx, wf, b, in, true, 2); err != nil {
		t.Fatal(err)
	}
	r.Close()

	r = svc.Runner()
	defer r.Close()
	c, err := r.ClaimBatch(ctx, b.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Lines != 3 || c.Pending != 1 {
		t.Fatalf("claim: %d lines, %d pending; want 3, 1", c.Lines, c.Pending)
	}
	r.ResumeBatch(ctx, c, 0)
	// The bad line is bad again: one run, failed; the good ones not rerun.
	if ended, failed := r.Runs(); ended != 1 || failed != 1 {
		t.Errorf("resume ran %d runs, %d failed; want 1, 1", ended, failed)
	}
	recorded, err := svc.RunsOfBatch(ctx, b.ID)
	if err != nil || len(recorded) != 4 {
		t.Errorf("runs of the batch: %v, %d; want the 3 first and the bad line's again", err, len(recorded))
	}
}

// failOnLine is a backend that fails one line's run without a result and
// runs the others locally.
type failOnLine struct{ line int }

func (f failOnLine) Run(ctx context.Context, wf *engine.Workflow, req runs.Request) (*engine.RunResult, error) {
	if req.Line == f.line {
		return nil, errors.New("the backend is unreachable")
	}
	return runs.Local{}.Run(ctx, wf, req)
}

// Covers: the backend seam. A Runner without a store (a backend that
// keeps its runs itself) runs a batch; a run its backend could not run is
// counted failed, told as a notice and written to no Result.
func TestABackendWithoutAStoreRunsABatch(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, "echo.yaml", echo)
	var mu sync.Mutex
	var results, notices []string
	r := &runs.Runner{
		Backend: failOnLine{line: 2},
		Result: func(res *engine.RunResult) {
			mu.Lock()
			defer mu.Unlock()
			results = append(results, string(res.Status))
		},
		Notice: func(msg string) {
			mu.Lock()
			defer mu.Unlock()
			notices = append(notices, msg)
		},
	}
	defer r.Close()
	in := runs.NewLineReader(strings.NewReader(`{"x":"one"}`+"\n"+`{"x":"two"}`+"\n"+`{"x":"three"}`+"\n"), "in.jsonl")
	first, _ := in.Next()
	if err := r.Batch(context.Background(), wf, runs.NewBatch(wf, dir, "in.jsonl", 3, first), in, true, 3); err != nil {
		t.Fatal(err)
	}
	if ended, failed := r.Runs(); ended != 3 || failed != 1 {
		t.Errorf("runs %d, failed %d; want 3, 1", ended, failed)
	}
	if !slices.Equal(results, []string{"succeeded", "succeeded"}) {
		t.Errorf("results %q, want the two that ran", results)
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "unreachable") {
		t.Errorf("notices %q, want the backend's error", notices)
	}
	if errs, more := r.StoreErrors(); len(errs) != 0 || more != 0 {
		t.Errorf("store errors without a store: %v", errs)
	}
}
