package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
)

// openTest opens a new store in a temporary directory, closed at the end of
// the test.
func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "state", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// at is a fixed UTC time plus d, so records compare with reflect.DeepEqual.
func at(d time.Duration) time.Time {
	return time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC).Add(d)
}

func TestDefaultPath(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory:", err)
	}
	tests := []struct {
		name, state, xdg, want string
	}{
		{"ACPFLOW_STATE wins over everything", "/srv/acpflow.db", "/xdg", "/srv/acpflow.db"},
		{"XDG_STATE_HOME is used when ACPFLOW_STATE is unset", "", "/xdg", "/xdg/acpflow/state.db"},
		{"a relative XDG_STATE_HOME is ignored", "", "rel/xdg", filepath.Join(home, ".local/state/acpflow/state.db")},
		{"the home directory is the last resort", "", "", filepath.Join(home, ".local/state/acpflow/state.db")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ACPFLOW_STATE", tt.state)
			t.Setenv("XDG_STATE_HOME", tt.xdg)
			got, err := DefaultPath()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("DefaultPath() = %q, want %q", got, tt.want)
			}
		})
	}
}

// Files names the store in use and the default one with their -wal and
// -shm, and what the state directory holds, but not the worktrees made
// there: an isolated step works in one.
func TestFilesAreTheStoresAndTheStateDirectoryButItsWorktrees(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("ACPFLOW_STATE", "")
	t.Setenv("XDG_STATE_HOME", xdg)
	dir := filepath.Join(xdg, "acpflow")
	for _, p := range []string{"state.db", "ui-token", WorktreesDir + "/run-1/README"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o700)
		os.WriteFile(filepath.Join(dir, p), nil, 0o600)
	}
	got := Files("/srv/runs.db")
	want := []string{"/srv/runs.db", "/srv/runs.db-wal", "/srv/runs.db-shm",
		filepath.Join(dir, "state.db"), filepath.Join(dir, "state.db-wal"), filepath.Join(dir, "state.db-shm"), filepath.Join(dir, "ui-token")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Files = %q\nwant %q", got, want)
	}
}

func TestOpenCreatesAPrivateWALStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	var mode string
	if err := s.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var fk, version int
	if err := s.w.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
	}
	if err := s.w.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != len(migrations) {
		t.Errorf("user_version = %d, %v; want %d", version, err, len(migrations))
	}
	if _, err := s.r.Exec("DELETE FROM runs"); err == nil {
		t.Error("a reader connection could write")
	}
	// A write makes the -wal file, which must be as private as the store.
	if err := s.CreateRun(context.Background(), Run{ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("wal file: %v, %v; want mode 0600", fi.Mode(), err)
	}
}

func TestOpenMigratesAnEmptyFileAndIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateRun(context.Background(), Run{ID: fmt.Sprint("r", i)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenAppliesOnlyTheMigrationsAStoreHasNotHad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRun(context.Background(), Run{ID: "before"}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A later acpflow adds a migration; the store is taken from version 1 to 2
	// and keeps its runs.
	saved := migrations
	defer func() { migrations = saved }()
	migrations = append(saved[:len(saved):len(saved)], `ALTER TABLE runs ADD COLUMN labels TEXT NOT NULL DEFAULT '[]'`)

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var version int
	if err := s.r.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != len(migrations) {
		t.Errorf("user_version = %d, %v; want %d", version, err, len(migrations))
	}
	var labels string
	if err := s.r.QueryRow("SELECT labels FROM runs WHERE id = 'before'").Scan(&labels); err != nil || labels != "[]" {
		t.Errorf("migrated run: labels = %q, %v", labels, err)
	}
}

func TestAStepRecordedBeforeStructuredOutputReadsBackWithNoValue(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// The store as acpflow kept it before migration 7 (value_json), with a
	// step whose output is JSON.
	for _, q := range []string{
		`INSERT INTO runs (id, status, started_at) VALUES ('old', 'succeeded', '2026-12-01T00:00:00.000000000Z')`,
		`ALTER TABLE steps DROP COLUMN value_json`,
		`ALTER TABLE permissions DROP COLUMN layer`,
		`ALTER TABLE permissions DROP COLUMN would`,
		`ALTER TABLE steps DROP COLUMN sandbox_json`,
		`ALTER TABLE steps DROP COLUMN exit_code`,
		`DROP INDEX runs_with_worktrees`,
		`ALTER TABLE runs DROP COLUMN worktrees_json`,
		`ALTER TABLE transcripts DROP COLUMN model_json`,
		`ALTER TABLE runs DROP COLUMN trace_id`,
		`DROP TABLE approvals`,
		`ALTER TABLE permissions DROP COLUMN ask`,
		`ALTER TABLE permissions DROP COLUMN approval_id`,
		`ALTER TABLE permissions DROP COLUMN answered_by`,
		`ALTER TABLE permissions DROP COLUMN answered_at`,
		`ALTER TABLE permissions DROP COLUMN status`,
		`INSERT INTO steps (run_id, step_id, status, output_json, final_json) VALUES ('old', 'a', 'succeeded', '"{\"x\":1}"', '"{\"x\":1}"')`,
		`PRAGMA user_version = 6`,
	} {
		if _, err := s.w.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.GetRun(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Steps) != 1 || d.Steps[0].JSON != nil || d.Steps[0].Output != `{"x":1}` {
		t.Errorf("steps %+v: want the old step, with no value", d.Steps)
	}
}

func TestPermissionsRecordedBeforeLayersAreTheWorkflows(t *testing.T) {
	// A store at schema version 4, as an acpflow without outer policies
	// left it, with one permission recorded.
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:4] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		"PRAGMA user_version = 4",
		`INSERT INTO runs (id, status, started_at) VALUES ('r', 'succeeded', '2026-12-01T00:00:00.000000000Z')`,
		`INSERT INTO steps (run_id, step_id, status) VALUES ('r', 's', 'succeeded')`,
		`INSERT INTO permissions (run_id, step_id, seq, tool_call_id, decision, policy, rule) VALUES ('r', 's', 0, 'c', 'reject', 'workflow', '2')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.GetRun(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Steps[0].Permissions; len(p) != 1 || p[0].Layer != "workflow" || p[0].Policy != "workflow" || p[0].Rule != "2" {
		t.Errorf("permissions after the migration: %+v", p)
	}
}

// storeOfANewerAcpflow is the path of a store whose schema version (99)
// this acpflow does not know.
func storeOfANewerAcpflow(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return path
}

func TestOpenRefusesAStoreFromANewerAcpflow(t *testing.T) {
	path := storeOfANewerAcpflow(t)
	_, err := Open(path)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open = %v, want ErrNewerSchema", err)
	}
	for _, want := range []string{path, "99", "upgrade acpflow"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestOpenTakesAPathThatLooksLikeAURI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd dir?x=1#frag", "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateRun(context.Background(), Run{ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the store is not at the path given: %v", err)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)

	batch := Batch{
		ID: "batch-1", Workflow: "review", WorkflowFile: "/w/review.yaml", WorkflowHash: "sha256:ab",
		Workspace: "/w", InputsFile: "-", Concurrency: 4, Status: engine.StatusRunning, CreatedAt: at(0),
		OwnerPID: 77, OwnerStartTicks: 1 << 41,
		Lines: []BatchLine{{Line: 1, Inputs: map[string]any{"pr": 1.0}}, {Line: 3, Inputs: map[string]any{"pr": 2.0}}},
	}
	moreLines := []BatchLine{{Line: 4, Error: "not a JSON object of inputs, but an array"}, {Line: 9, Inputs: map[string]any{}}}
	if err := s.CreateBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	run := Run{
		ID: "run-1", BatchID: "batch-1", BatchLine: 3, Workflow: "review", WorkflowFile: "/w/review.yaml",
		WorkflowHash: "sha256:ab", Workspace: "/w", Inputs: map[string]any{"pr": 2.0, "draft": false},
		Status: engine.StatusRunning, Outputs: map[string]any{}, StartedAt: at(time.Second),
		ResumedFrom: "run-0", OwnerPID: 4242, OwnerStartTicks: 1 << 40,
	}
	if err := s.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := s.AddBatchLines(ctx, "batch-1", moreLines); err != nil {
		t.Fatal(err)
	}
	if err := s.BatchInputsComplete(ctx, "batch-1"); err != nil {
		t.Fatal(err)
	}
	plan := Step{
		RunID: "run-1", StepID: "plan", Ord: 0, Status: engine.StatusSucceeded, StopReason: "completed",
		Output: "the plan", Final: "```json\n{\"approved\": true}\n```", Attempts: 2, SessionID: "sess-1", Stderr: "warn: x\n",
		JSON:      map[string]any{"approved": true, "n": 2.0, "tags": []any{"a"}},
		StartedAt: at(2 * time.Second), EndedAt: at(3 * time.Second), DurationMS: 1000,
		Permissions: []Permission{
			{ToolCallID: "call_1", Kind: "execute", Title: "rm -rf /tmp/x", Decision: "reject", Outcome: "selected",
				OptionID: "r1", Layer: "outer", Policy: "/etc/acpflow/policy.yaml", Rule: "2", Reason: "no deletes"},
			{ToolCallID: "call_2", Kind: "read", Title: "README", Decision: "cancel", Outcome: "cancelled",
				Layer: "workflow", Policy: "default", Reason: "the turn was cancelled"},
		},
	}
	each := Step{
		RunID: "run-1", StepID: "each", Ord: 1, Status: engine.StatusFailed, StopReason: "error",
		Output: []any{"a", "b"}, Error: "item 1: boom", Attempts: 1,
		StartedAt: at(3 * time.Second), EndedAt: at(4 * time.Second), DurationMS: 1000, Permissions: []Permission{},
	}
	skipped := Step{RunID: "run-1", StepID: "after", Ord: 2, Status: engine.StatusSkipped, Output: nil, Permissions: []Permission{}}
	// Saved out of file order: GetRun orders by Ord.
	for _, st := range []Step{skipped, each, plan} {
		if err := s.SaveStep(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ChildStarted(ctx, "run-1", "plan", 100, 100, 12345); err != nil {
		t.Fatal(err)
	}
	if err := s.ChildStarted(ctx, "run-1", "each", 101, 101, 12346); err != nil {
		t.Fatal(err)
	}
	if err := s.ChildEnded(ctx, "run-1", "plan", 100); err != nil {
		t.Fatal(err)
	}
	if err := s.ChildEnded(ctx, "run-1", "plan", 100); err != nil {
		t.Errorf("ending a process twice: %v", err)
	}
	events := []Event{
		{RunID: "run-1", Type: "run_start", Time: at(time.Second), Fields: map[string]any{"workflow": "review"}},
		{RunID: "run-1", StepID: "plan", Type: "step_update", Time: at(2 * time.Second), Fields: map[string]any{"text": "hel"}},
		{RunID: "run-1", StepID: "plan", Type: "step_end", Time: at(3 * time.Second)},
		{RunID: "other", Type: "run_start", Time: at(time.Second)},
	}
	for _, e := range events {
		s.AppendEvent(e)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, "run-1", engine.StatusFailed, "step each failed", map[string]any{"summary": "x"}, at(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishBatch(ctx, "batch-1", engine.StatusFailed); err != nil {
		t.Fatal(err)
	}

	t.Run("GetRun returns the run with its steps in file order", func(t *testing.T) {
		d, err := s.GetRun(ctx, "run-1")
		if err != nil {
			t.Fatal(err)
		}
		want := run
		want.Status, want.Error, want.Outputs = engine.StatusFailed, "step each failed", map[string]any{"summary": "x"}
		want.EndedAt, want.DurationMS = at(5*time.Second), 4000
		want.OutputNames = []string{"summary"}
		if !reflect.DeepEqual(d.Run, want) {
			t.Errorf("run:\n got %+v\nwant %+v", d.Run, want)
		}
		if !reflect.DeepEqual(d.Steps, []Step{plan, each, skipped}) {
			t.Errorf("steps:\n got %+v\nwant %+v", d.Steps, []Step{plan, each, skipped})
		}
		if len(d.Children) != 2 || d.Children[0].PID != 100 || d.Children[0].EndedAt.IsZero() ||
			d.Children[1].StartTicks != 12346 || !d.Children[1].EndedAt.IsZero() {
			t.Errorf("children: %+v", d.Children)
		}
	})
	t.Run("LiveChildren lists the processes not ended", func(t *testing.T) {
		for _, runID := range []string{"run-1", ""} {
			live, err := s.LiveChildren(ctx, runID)
			if err != nil {
				t.Fatal(err)
			}
			if len(live) != 1 || live[0].RunID != "run-1" || live[0].StepID != "each" || live[0].PID != 101 ||
				live[0].PGID != 101 || live[0].StartTicks != 12346 || live[0].StartedAt.IsZero() {
				t.Errorf("LiveChildren(%q) = %+v", runID, live)
			}
		}
	})
	t.Run("Events returns a run's events in order", func(t *testing.T) {
		got, err := s.Events(ctx, "run-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("got %d events, want 3: %+v", len(got), got)
		}
		for i, e := range got {
			want := events[i]
			if want.Fields == nil {
				want.Fields = map[string]any{}
			}
			if i > 0 && e.Seq <= got[i-1].Seq {
				t.Errorf("event %d: seq %d after %d", i, e.Seq, got[i-1].Seq)
			}
			e.Seq = 0
			if !reflect.DeepEqual(e, want) {
				t.Errorf("event %d:\n got %+v\nwant %+v", i, e, want)
			}
		}
	})
	t.Run("GetBatch returns the batch and BatchLines its input lines, a page at a time", func(t *testing.T) {
		b, err := s.GetBatch(ctx, "batch-1")
		if err != nil {
			t.Fatal(err)
		}
		if b.EndedAt.IsZero() {
			t.Error("finished batch has no end time")
		}
		want := batch
		want.Status, want.EndedAt, want.InputsComplete, want.Lines = engine.StatusFailed, b.EndedAt, true, nil
		if !reflect.DeepEqual(*b, want) {
			t.Errorf("batch:\n got %+v\nwant %+v", *b, want)
		}
		var lines []BatchLine
		for after := 0; ; {
			page, err := s.BatchLines(ctx, "batch-1", after, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			lines = append(lines, page...)
			after = page[len(page)-1].Line
		}
		if wantLines := append(append([]BatchLine{}, batch.Lines...), moreLines...); !reflect.DeepEqual(lines, wantLines) {
			t.Errorf("lines:\n got %+v\nwant %+v", lines, wantLines)
		}
	})
	t.Run("SetRunStatus running clears the end", func(t *testing.T) {
		if err := s.SetRunStatus(ctx, "run-1", engine.StatusRunning); err != nil {
			t.Fatal(err)
		}
		d, err := s.GetRun(ctx, "run-1")
		if err != nil {
			t.Fatal(err)
		}
		if d.Run.Status != engine.StatusRunning || d.Run.Error != "" || !d.Run.EndedAt.IsZero() || d.Run.DurationMS != 0 {
			t.Errorf("run after SetRunStatus(running): %+v", d.Run)
		}
	})
	t.Run("unknown ids and statuses are errors", func(t *testing.T) {
		if _, err := s.GetRun(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetRun(nope) = %v", err)
		}
		if _, err := s.GetBatch(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetBatch(nope) = %v", err)
		}
		if err := s.FinishRun(ctx, "nope", engine.StatusFailed, "", nil, at(0)); !errors.Is(err, ErrNotFound) {
			t.Errorf("FinishRun(nope) = %v", err)
		}
		if err := s.SetRunStatus(ctx, "nope", engine.StatusFailed); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetRunStatus(nope) = %v", err)
		}
		if err := s.FinishBatch(ctx, "nope", engine.StatusFailed); !errors.Is(err, ErrNotFound) {
			t.Errorf("FinishBatch(nope) = %v", err)
		}
		if err := s.SetRunStatus(ctx, "run-1", "done"); err == nil {
			t.Error("SetRunStatus took the status \"done\"")
		}
		if err := s.SaveStep(ctx, Step{RunID: "run-1", StepID: "x", Status: "pending"}); err == nil {
			t.Error("SaveStep took the status \"pending\"")
		}
		if err := s.SaveStep(ctx, Step{RunID: "nope", StepID: "x", Status: engine.StatusRunning}); err == nil {
			t.Error("SaveStep saved a step of a run that does not exist")
		}
	})
}

func TestSaveStepReplacesTheWholeStep(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.CreateRun(ctx, Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	start := Step{RunID: "r", StepID: "a", Status: engine.StatusRunning, StartedAt: at(0), Permissions: []Permission{}}
	end := Step{RunID: "r", StepID: "a", Status: engine.StatusSucceeded, StopReason: "completed", Output: "done", Attempts: 1,
		StartedAt: at(0), EndedAt: at(time.Second), DurationMS: 1000,
		Permissions: []Permission{{ToolCallID: "c1", Decision: "allow"}, {ToolCallID: "c2", Decision: "reject"}}}
	retried := end
	retried.Permissions = []Permission{{ToolCallID: "c3", Decision: "allow"}}

	for _, want := range []Step{start, end, retried} {
		if err := s.SaveStep(ctx, want); err != nil {
			t.Fatal(err)
		}
		d, err := s.GetRun(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Steps) != 1 || !reflect.DeepEqual(d.Steps[0], want) {
			t.Errorf("after SaveStep:\n got %+v\nwant %+v", d.Steps, want)
		}
	}
}

func TestWritesOutliveTheirContext(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the run was cancelled; its end must still be recorded
	if err := s.CreateRun(ctx, Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStep(ctx, Step{RunID: "r", StepID: "a", Status: engine.StatusCancelled, StopReason: "aborted"}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, "r", engine.StatusCancelled, "cancelled", nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx, "r"); !errors.Is(err, context.Canceled) {
		t.Errorf("a read with a cancelled context: %v, want context.Canceled", err)
	}
	d, err := s.GetRun(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	if d.Run.Status != engine.StatusCancelled || d.Run.EndedAt.IsZero() || len(d.Steps) != 1 || d.Steps[0].Status != engine.StatusCancelled {
		t.Errorf("after writes with a cancelled context: %+v", d)
	}
}

func TestListRuns(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.CreateBatch(ctx, Batch{ID: "b1", Workflow: "review"}); err != nil {
		t.Fatal(err)
	}
	runs := []Run{
		{ID: "r1", Workflow: "review", WorkflowFile: "/w/review.yaml", StartedAt: at(1 * time.Second)},
		{ID: "r2", Workflow: "fix", StartedAt: at(2 * time.Second), BatchID: "b1", BatchLine: 2},
		{ID: "r3", Workflow: "review", StartedAt: at(3 * time.Second), BatchID: "b1", BatchLine: 1},
		// Same start as r3: the id breaks the tie.
		{ID: "r4", Workflow: "review", StartedAt: at(3 * time.Second), Status: engine.StatusSucceeded},
		{ID: "r0", Workflow: "review", StartedAt: at(4 * time.Second), Status: engine.StatusFailed},
	}
	for _, r := range runs {
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		filter Filter
		want   []string
	}{
		{"all runs come newest first", Filter{}, []string{"r0", "r4", "r3", "r2", "r1"}},
		{"a limit keeps the newest", Filter{Limit: 2}, []string{"r0", "r4"}},
		{"a status selects", Filter{Status: engine.StatusRunning}, []string{"r3", "r2", "r1"}},
		{"a workflow name selects", Filter{Workflow: "fix"}, []string{"r2"}},
		{"a workflow file selects", Filter{Workflow: "/w/review.yaml"}, []string{"r1"}},
		{"a batch selects", Filter{Batch: "b1"}, []string{"r3", "r2"}},
		{"filters combine", Filter{Batch: "b1", Workflow: "review"}, []string{"r3"}},
		{"no match is an empty list", Filter{Status: engine.StatusCancelled}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListRuns(ctx, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if ids := runIDs(got); !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("ListRuns(%+v) = %v, want %v", tt.filter, ids, tt.want)
			}
		})
	}
	t.Run("RunsOfBatch orders by input line", func(t *testing.T) {
		got, err := s.RunsOfBatch(ctx, "b1")
		if err != nil {
			t.Fatal(err)
		}
		if ids := runIDs(got); !reflect.DeepEqual(ids, []string{"r3", "r2"}) {
			t.Errorf("RunsOfBatch(b1) = %v", ids)
		}
	})
}

func runIDs(runs []Run) []string {
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestResolveID(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for _, id := range []string{"01JABCDEF0", "01JABCDXYZ", "01JQQQQQQQ"} {
		if err := s.CreateRun(ctx, Run{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateBatch(ctx, Batch{ID: "b01JZZZZZZ"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in, id, kind string
		err                error
	}{
		{"an exact run id", "01JABCDEF0", "01JABCDEF0", KindRun, nil},
		{"an exact batch id", "b01JZZZZZZ", "b01JZZZZZZ", KindBatch, nil},
		{"a unique prefix", "01JQQQ", "01JQQQQQQQ", KindRun, nil},
		{"a unique batch prefix", "b01JZZ", "b01JZZZZZZ", KindBatch, nil},
		{"a prefix of two ids is ambiguous", "01JABCD", "", "", ErrAmbiguous},
		{"a short prefix is not taken", "01JQQ", "", "", ErrNotFound},
		{"an unknown id is not found", "zzzzzzzz", "", "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, kind, err := s.ResolveID(ctx, tt.in)
			if id != tt.id || kind != tt.kind || !errors.Is(err, tt.err) {
				t.Errorf("ResolveID(%q) = %q, %q, %v; want %q, %q, %v", tt.in, id, kind, err, tt.id, tt.kind, tt.err)
			}
		})
	}
	t.Run("FindRunOrBatch takes exact ids only", func(t *testing.T) {
		if kind, err := s.FindRunOrBatch(ctx, "b01JZZZZZZ"); kind != KindBatch || err != nil {
			t.Errorf("FindRunOrBatch(batch) = %q, %v", kind, err)
		}
		if _, err := s.FindRunOrBatch(ctx, "01JQQQ"); !errors.Is(err, ErrNotFound) {
			t.Errorf("FindRunOrBatch(prefix) = %v, want ErrNotFound", err)
		}
	})
}

func TestEventsAreWrittenWithoutFlush(t *testing.T) {
	s := openTest(t)
	s.AppendEvent(Event{RunID: "r", Type: "run_start"})
	// A hang guard: the writer flushes every 50 ms; a loaded disk may take
	// seconds to sync; "never" is what this test is about.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := s.Events(context.Background(), "r")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("an event was not written within 30s without Flush")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCloseWritesQueuedEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		s.AppendEvent(Event{RunID: "r", Type: "step_update", Fields: map[string]any{"text": "x"}})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.AppendEvent(Event{RunID: "r", Type: "late"}) // dropped, not a panic
	if err := s.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), "1 events not recorded") {
		t.Errorf("Flush after Close = %v, want the late event reported", err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Events(context.Background(), "r")
	if err != nil || len(got) != 1000 {
		t.Errorf("after Close: %d events, %v; want 1000", len(got), err)
	}
}

// TestConcurrentWriters has 16 goroutines save steps and append events at
// once, as a batch of runs does.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	const writers, stepsEach, eventsPerStep = 16, 25, 20
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			errs <- func() error {
				runID := "run-" + string(rune('a'+w))
				if err := s.CreateRun(ctx, Run{ID: runID}); err != nil {
					return err
				}
				for i := range stepsEach {
					st := Step{RunID: runID, StepID: "s" + string(rune('A'+i)), Ord: i, Status: engine.StatusRunning, StartedAt: time.Now()}
					if err := s.SaveStep(ctx, st); err != nil {
						return err
					}
					for range eventsPerStep {
						s.AppendEvent(Event{RunID: runID, StepID: st.StepID, Type: "step_update", Fields: map[string]any{"text": "chunk"}})
					}
					st.Status, st.EndedAt = engine.StatusSucceeded, time.Now()
					st.Permissions = []Permission{{ToolCallID: "c", Decision: "allow"}}
					if err := s.SaveStep(ctx, st); err != nil {
						return err
					}
					if _, err := s.ListRuns(ctx, Filter{Limit: 5}); err != nil {
						return err
					}
				}
				return s.FinishRun(ctx, runID, engine.StatusSucceeded, "", nil, time.Now())
			}()
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		runID := "run-" + string(rune('a'+w))
		d, err := s.GetRun(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Run.Status != engine.StatusSucceeded || len(d.Steps) != stepsEach {
			t.Errorf("%s: status %s, %d steps", runID, d.Run.Status, len(d.Steps))
		}
		for _, st := range d.Steps {
			if st.Status != engine.StatusSucceeded || len(st.Permissions) != 1 {
				t.Errorf("%s/%s: %s with %d permissions", runID, st.StepID, st.Status, len(st.Permissions))
			}
		}
		ev, err := s.Events(ctx, runID)
		if err != nil || len(ev) != stepsEach*eventsPerStep {
			t.Errorf("%s: %d events, %v; want %d", runID, len(ev), err, stepsEach*eventsPerStep)
		}
	}
}

// TestTwoStoresShareAFile opens the file twice, as two acpflow processes
// would, and writes through both at once.
func TestTwoStoresShareAFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	var stores [2]*Store
	for i := range stores {
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	errs := make(chan error, 2)
	for i, s := range stores {
		go func() {
			errs <- func() error {
				runID := []string{"one", "two"}[i]
				if err := s.CreateRun(ctx, Run{ID: runID}); err != nil {
					return err
				}
				for j := range 100 {
					if err := s.SaveStep(ctx, Step{RunID: runID, StepID: string(rune('a' + j%26)), Status: engine.StatusRunning}); err != nil {
						return err
					}
					s.AppendEvent(Event{RunID: runID, Type: "x"})
				}
				return s.Flush(ctx)
			}()
		}()
	}
	for range stores {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err := stores[0].ListRuns(ctx, Filter{})
	if err != nil || len(got) != 2 {
		t.Errorf("ListRuns: %v, %v; want both runs", runIDs(got), err)
	}
}

// integrityCheck runs SQLite's own check of the file.
func integrityCheck(t *testing.T, db *sql.DB) {
	t.Helper()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Errorf("integrity_check = %q, %v", res, err)
	}
	if rows, err := db.Query("PRAGMA foreign_key_check"); err != nil {
		t.Error(err)
	} else {
		defer rows.Close()
		if rows.Next() {
			t.Error("foreign_key_check found violations")
		}
	}
}

func TestReopenRunMakesARunRunningAgainUnderANewOwner(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if err := s.CreateRun(ctx, Run{ID: "r1", Workflow: "wf", OwnerPID: 1, OwnerStartTicks: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, "r1", engine.StatusFailed, "boom", nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := s.ReopenRun(ctx, "r1", 42, 4242); err != nil {
		t.Fatal(err)
	}
	d, err := s.GetRun(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if r := d.Run; r.Status != engine.StatusRunning || r.Error != "" || !r.EndedAt.IsZero() || r.OwnerPID != 42 || r.OwnerStartTicks != 4242 {
		t.Errorf("run = %+v", d.Run)
	}
	if err := s.ReopenRun(ctx, "missing", 1, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("reopening a missing run: %v", err)
	}
}

func TestAWriteAfterCloseIsAnErrorNotAPanic(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.CreateRun(context.Background(), Run{ID: "late", Workflow: "w"}); err == nil {
		t.Error("a write after Close succeeded")
	}
}

func TestFinishBatchNeverReopensABatch(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if err := s.CreateBatch(ctx, Batch{ID: "b1", Workflow: "wf"}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishBatch(ctx, "b1", engine.StatusFailed); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishBatch(ctx, "b1", engine.StatusRunning); err == nil {
		t.Error("FinishBatch(running) reopened the batch")
	}
	b, err := s.GetBatch(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != engine.StatusFailed || b.EndedAt.IsZero() {
		t.Errorf("batch after FinishBatch(running) = %s, ended %v", b.Status, b.EndedAt)
	}
}

func TestAClaimIsRefusedWhileTheOwnerLivesAndTakenWhenItIsDeadOrAbsent(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	live, dead, me := Owner{PID: 10, StartTicks: 100}, Owner{PID: 11, StartTicks: 110}, Owner{PID: 12, StartTicks: 120}
	alive := func(o Owner) bool { return o == live || o == me }
	for _, c := range []struct {
		name   string
		status engine.Status
		owner  Owner
		want   error // nil: claimed
	}{
		{"a running run whose owner lives is refused", engine.StatusRunning, live, &OwnedError{}},
		{"a running run whose owner is dead is claimed", engine.StatusRunning, dead, nil},
		{"a running run with no owner recorded is claimed", engine.StatusRunning, Owner{}, nil},
		{"a failed run is claimed even while its last owner lives", engine.StatusFailed, live, nil},
		{"a cancelled run is claimed", engine.StatusCancelled, dead, nil},
		{"a run this process owns is claimed again", engine.StatusRunning, me, nil},
		{"a succeeded run is not claimed", engine.StatusSucceeded, dead, ErrSucceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := strings.ReplaceAll(c.name, " ", "-")
			if err := s.CreateRun(ctx, Run{ID: id, Workflow: "wf", OwnerPID: c.owner.PID, OwnerStartTicks: c.owner.StartTicks}); err != nil {
				t.Fatal(err)
			}
			if c.status != engine.StatusRunning {
				if err := s.FinishRun(ctx, id, c.status, "boom", nil, time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
			was, err := s.ClaimRun(ctx, id, me, alive)
			d, gerr := s.GetRun(ctx, id)
			if gerr != nil {
				t.Fatal(gerr)
			}
			var owned *OwnedError
			switch {
			case c.want == nil:
				if err != nil {
					t.Fatalf("claim: %v", err)
				}
				if was != c.owner {
					t.Errorf("the claim replaced %+v, want %+v", was, c.owner)
				}
				if r := d.Run; r.Status != engine.StatusRunning || r.Error != "" || !r.EndedAt.IsZero() || r.OwnerPID != me.PID || r.OwnerStartTicks != me.StartTicks {
					t.Errorf("claimed run = %+v", r)
				}
			case errors.As(c.want, &owned):
				if !errors.As(err, &owned) || owned.Owner != c.owner || !strings.Contains(err.Error(), "acpflow process 10") {
					t.Errorf("claim = %v, want an OwnedError naming process 10", err)
				}
				if d.Run.OwnerPID != c.owner.PID {
					t.Errorf("a refused claim changed the owner to %d", d.Run.OwnerPID)
				}
			default:
				if !errors.Is(err, c.want) {
					t.Errorf("claim = %v, want %v", err, c.want)
				}
				if d.Run.Status != c.status {
					t.Errorf("a refused claim changed the status to %s", d.Run.Status)
				}
			}
		})
	}
	t.Run("a batch is claimed like a run", func(t *testing.T) {
		if err := s.CreateBatch(ctx, Batch{ID: "b-live", OwnerPID: live.PID, OwnerStartTicks: live.StartTicks}); err != nil {
			t.Fatal(err)
		}
		var owned *OwnedError
		if err := s.ClaimBatch(ctx, "b-live", me, alive); !errors.As(err, &owned) || owned.Kind != KindBatch {
			t.Errorf("claim of a live batch = %v", err)
		}
		if err := s.CreateBatch(ctx, Batch{ID: "b-dead", OwnerPID: dead.PID, OwnerStartTicks: dead.StartTicks}); err != nil {
			t.Fatal(err)
		}
		if err := s.ClaimBatch(ctx, "b-dead", me, alive); err != nil {
			t.Errorf("claim of a batch whose owner died: %v", err)
		}
		if err := s.FinishBatch(ctx, "b-dead", engine.StatusFailed); err != nil {
			t.Fatal(err)
		}
		if err := s.ClaimBatch(ctx, "b-dead", me, alive); err != nil {
			t.Errorf("claim of an ended batch: %v", err)
		}
		b, _ := s.GetBatch(ctx, "b-dead")
		if b.Status != engine.StatusRunning || !b.EndedAt.IsZero() || b.OwnerPID != me.PID {
			t.Errorf("claimed batch = %+v", b)
		}
		if err := s.ClaimBatch(ctx, "nope", me, alive); !errors.Is(err, ErrNotFound) {
			t.Errorf("claim of a missing batch = %v", err)
		}
	})
}

// TestOfManyStoresClaimingOneRunAtOnceExactlyOneWins opens the file once
// per claimant, as separate acpflow processes do, and claims one dead
// owner's run from all of them at once: each claimant is alive to the
// others.
func TestOfManyStoresClaimingOneRunAtOnceExactlyOneWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	ctx := context.Background()
	const claimants = 8
	stores := make([]*Store, claimants)
	for i := range stores {
		s, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	for round := range 20 {
		id := fmt.Sprintf("r%d", round)
		if err := stores[0].CreateRun(ctx, Run{ID: id, Workflow: "wf", OwnerPID: 1, OwnerStartTicks: 1}); err != nil {
			t.Fatal(err)
		}
		alive := func(o Owner) bool { return o.PID >= 100 } // the claimants; pid 1 is the dead owner
		var wg sync.WaitGroup
		var won, refused atomic.Int32
		start := make(chan struct{})
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := s.ClaimRun(ctx, id, Owner{PID: 100 + i, StartTicks: 1}, alive)
				var owned *OwnedError
				switch {
				case err == nil:
					won.Add(1)
				case errors.As(err, &owned):
					refused.Add(1)
				default:
					t.Errorf("claim: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if won.Load() != 1 || refused.Load() != claimants-1 {
			t.Fatalf("round %d: %d claims won, %d refused; want exactly one winner", round, won.Load(), refused.Load())
		}
	}
}

// A run's outputs read back in the order FinishRun was given (the
// workflow's), those it did not name after them in name order; a run
// finished without an order reads back in name order.
func TestARunsOutputsKeepTheOrderTheyWereWrittenIn(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	outputs := map[string]any{"zeta": "z", "alpha": []any{1.0, 2.0}, "mid": "m", "extra": "e"}
	for _, c := range []struct {
		id    string
		names []string
		want  []string
	}{
		{"ordered", []string{"zeta", "alpha", "mid", "gone"}, []string{"zeta", "alpha", "mid", "extra"}},
		{"unordered", nil, []string{"alpha", "extra", "mid", "zeta"}},
	} {
		if err := s.CreateRun(ctx, Run{ID: c.id, Workflow: "w", Workspace: "/w", StartedAt: at(0)}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(ctx, c.id, engine.StatusSucceeded, "", outputs, at(time.Second), c.names...); err != nil {
			t.Fatal(err)
		}
		d, err := s.GetRun(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d.Run.OutputNames, c.want) || !reflect.DeepEqual(d.Run.Outputs, outputs) {
			t.Errorf("%s: outputs %v in the order %v, want %v", c.id, d.Run.Outputs, d.Run.OutputNames, c.want)
		}
	}
}
