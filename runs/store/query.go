package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acpflow/acpflow/engine"
)

// What an id names, as FindRunOrBatch and ResolveID say.
const (
	KindRun   = "run"
	KindBatch = "batch"
)

// MinPrefix is the shortest id prefix ResolveID accepts: shorter ones would
// soon be ambiguous, and a typo would name some other run.
const MinPrefix = 6

// Filter selects runs for ListRuns. Empty fields select everything.
type Filter struct {
	Status   engine.Status // runs with this status
	Workflow string        // runs of this workflow: its name, or its file as recorded
	Batch    string        // runs of this batch (its exact id)
	Limit    int           // at most this many; 0 for no limit
	// Since selects runs started at or after it (zero: any time).
	Since time.Time
	// Before is a keyset page's cursor: only runs that come after it in
	// the list's order (older, or as old with a smaller id); nil: from the
	// newest. A page at any depth costs what the first does.
	Before *Cursor
}

// Cursor is where a page of ListRuns ends: its last run's start and id.
type Cursor struct {
	StartedAt time.Time
	ID        string
}

// RunDetail is a run with its steps (in file order, each with its
// permission decisions) and the agent processes its steps spawned.
type RunDetail struct {
	Run      Run
	Steps    []Step
	Children []Child
	// Worktrees are the run's git worktrees (isolation: worktree), its
	// own first; nil: none.
	Worktrees []*engine.Worktree
	// Approvals are the asks put to people, oldest first; nil: none.
	Approvals []Approval
}

const runColumns = `id, batch_id, batch_line, workflow_name, workflow_file, workflow_hash, workspace, inputs_json,
	` + waitingStatus + `, error, outputs_json, started_at, ended_at, duration_ms, resumed_from, owner_pid, owner_start_ticks, usage_json, trace_id`

// waitingStatus is a run's status as read: waiting (engine.StatusWaiting)
// while it is running and one of its approvals is pending, before that
// approval's deadline (an approval left pending by a process that was
// killed does not keep its run waiting).
const waitingStatus = `CASE WHEN status = 'running' AND EXISTS (SELECT 1 FROM approvals
	WHERE approvals.run_id = runs.id AND approvals.status = 'pending' AND approvals.deadline > ` + sqlNow + `)
	THEN 'waiting' ELSE status END`

// ListRuns lists runs newest first (by start time, then id).
func (s *Store) ListRuns(ctx context.Context, f Filter) ([]Run, error) {
	var where []string
	var args []any
	switch f.Status {
	case "":
	case engine.StatusWaiting: // running is every live run, waiting ones too
		where = append(where, waitingStatus+` = ?`)
		args = append(args, string(f.Status))
	default:
		where = append(where, `status = ?`)
		args = append(args, string(f.Status))
	}
	if f.Workflow != "" {
		where = append(where, `(workflow_name = ? OR workflow_file = ?)`)
		args = append(args, f.Workflow, f.Workflow)
	}
	if f.Batch != "" {
		where = append(where, `batch_id = ?`)
		args = append(args, f.Batch)
	}
	if !f.Since.IsZero() {
		where = append(where, `started_at >= ?`)
		args = append(args, timeArg(f.Since))
	}
	if f.Before != nil {
		// A row value, which SQLite compares along the (started_at, id) index.
		where = append(where, `(started_at, id) < (?, ?)`)
		args = append(args, timeArg(f.Before.StartedAt), f.Before.ID)
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY started_at DESC, id DESC`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return s.queryRuns(ctx, q, args...)
}

// RunsOfBatch lists a batch's runs by input line (a line resumed has a run
// per attempt, oldest first).
func (s *Store) RunsOfBatch(ctx context.Context, batchID string) ([]Run, error) {
	return s.queryRuns(ctx, `SELECT `+runColumns+` FROM runs WHERE batch_id = ? ORDER BY batch_line, started_at, id`, batchID)
}

func (s *Store) queryRuns(ctx context.Context, q string, args ...any) ([]Run, error) {
	return queryAll(ctx, s, "runs", q, scanRun, args...)
}

// queryAll runs q on the read connection and scans each row with scan;
// what names the rows in its errors ("runs").
func queryAll[T any](ctx context.Context, s *Store, what, q string, scan func(scanner) (T, error), args ...any) ([]T, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	return scanAll(rows, err, what, scan)
}

// scanAll scans each row of a query's answer (rows, err) with scan; what
// names the rows in its errors.
func scanAll[T any](rows *sql.Rows, err error, what string, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	return out, nil
}

// GetRun reads one run, whole, as of one moment (one read transaction).
func (s *Store) GetRun(ctx context.Context, id string) (*RunDetail, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: read run %s: %w", id, err)
	}
	defer tx.Rollback()

	run, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: run %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	d := &RunDetail{Run: run}
	if d.Steps, err = readSteps(ctx, tx, id); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT run_id, step_id, pid, pgid, start_ticks, started_at, ended_at FROM children WHERE run_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("store: read run %s: %w", id, err)
	}
	if d.Children, err = scanChildren(rows); err != nil {
		return nil, err
	}
	var wts sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT worktrees_json FROM runs WHERE id = ?`, id).Scan(&wts); err != nil {
		return nil, fmt.Errorf("store: read run %s: %w", id, err)
	}
	if d.Worktrees, err = decodeWorktrees(id, wts); err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, approvalsOfRun, id)
	if d.Approvals, err = scanAll(rows, err, "approvals of run "+id, scanApproval); err != nil {
		return nil, err
	}
	return d, nil
}

// readSteps reads a run's steps in file order, with their permissions.
func readSteps(ctx context.Context, tx *sql.Tx, runID string) ([]Step, error) {
	rows, err := tx.QueryContext(ctx, `SELECT step_id, ord, status, stop_reason, output_json, final_json, value_json, error, attempts, session_id,
		stderr_tail, started_at, ended_at, duration_ms, usage_json, sandbox_json, exit_code FROM steps WHERE run_id = ? ORDER BY ord, step_id`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: read steps of run %s: %w", runID, err)
	}
	defer rows.Close()
	var steps []Step
	index := map[string]int{}
	for rows.Next() {
		st := Step{RunID: runID, Permissions: []Permission{}}
		var output, final, value string
		var started, ended, usage, sandbox sql.NullString
		var exitCode sql.NullInt64
		if err := rows.Scan(&st.StepID, &st.Ord, &st.Status, &st.StopReason, &output, &final, &value, &st.Error, &st.Attempts, &st.SessionID,
			&st.Stderr, &started, &ended, &st.DurationMS, &usage, &sandbox, &exitCode); err != nil {
			return nil, fmt.Errorf("store: read steps of run %s: %w", runID, err)
		}
		if st.Usage, err = parseUsage[stepUsage](usage); err != nil {
			return nil, fmt.Errorf("store: step %s of run %s: %w", st.StepID, runID, err)
		}
		if exitCode.Valid {
			code := int(exitCode.Int64)
			st.ExitCode = &code
		}
		if st.Sandbox, err = parseUsage[stepSandbox](sandbox); err != nil {
			return nil, fmt.Errorf("store: step %s of run %s: %w", st.StepID, runID, err)
		}
		if err := json.Unmarshal([]byte(output), &st.Output); err != nil {
			return nil, fmt.Errorf("store: step %s of run %s: decode output: %w", st.StepID, runID, err)
		}
		if err := json.Unmarshal([]byte(final), &st.Final); err != nil {
			return nil, fmt.Errorf("store: step %s of run %s: decode final: %w", st.StepID, runID, err)
		}
		if err := json.Unmarshal([]byte(value), &st.JSON); err != nil {
			return nil, fmt.Errorf("store: step %s of run %s: decode json: %w", st.StepID, runID, err)
		}
		if st.StartedAt, err = parseTime(started); err != nil {
			return nil, err
		}
		if st.EndedAt, err = parseTime(ended); err != nil {
			return nil, err
		}
		index[st.StepID] = len(steps)
		steps = append(steps, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read steps of run %s: %w", runID, err)
	}
	rows.Close()
	if err := readPermissions(ctx, tx, runID, steps, index); err != nil {
		return nil, err
	}
	return steps, nil
}

// readPermissions adds the run's permission records to its steps (index:
// a step's place in steps by its id), in the order they were written.
func readPermissions(ctx context.Context, tx *sql.Tx, runID string, steps []Step, index map[string]int) error {
	rows, err := tx.QueryContext(ctx, `SELECT step_id, tool_call_id, kind, title, command, locations_json, decision, would, status, outcome, option_id, layer, policy, rule, reason,
		ask, approval_id, answered_by, answered_at
		FROM permissions WHERE run_id = ? ORDER BY step_id, seq`, runID)
	if err != nil {
		return fmt.Errorf("store: read permissions of run %s: %w", runID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var stepID string
		var p Permission
		var locations string
		if err := rows.Scan(&stepID, &p.ToolCallID, &p.Kind, &p.Title, &p.Command, &locations, &p.Decision, &p.Would, &p.Status, &p.Outcome, &p.OptionID, &p.Layer, &p.Policy, &p.Rule, &p.Reason,
			&p.Ask, &p.Approval, &p.AnsweredBy, &p.AnsweredAt); err != nil {
			return fmt.Errorf("store: read permissions of run %s: %w", runID, err)
		}
		if err := json.Unmarshal([]byte(locations), &p.Locations); err != nil {
			return fmt.Errorf("store: read permissions of run %s: decode locations: %w", runID, err)
		}
		if len(p.Locations) == 0 {
			p.Locations = nil
		}
		if i, ok := index[stepID]; ok {
			steps[i].Permissions = append(steps[i].Permissions, p)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: read permissions of run %s: %w", runID, err)
	}
	return nil
}

// Events reads the events of a run written so far, in order.
func (s *Store) Events(ctx context.Context, runID string) ([]Event, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, step_id, type, time, fields_json FROM events WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: read events of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{RunID: runID}
		var t sql.NullString
		var fields string
		if err := rows.Scan(&e.Seq, &e.StepID, &e.Type, &t, &fields); err != nil {
			return nil, fmt.Errorf("store: read events of run %s: %w", runID, err)
		}
		if e.Time, err = parseTime(t); err != nil {
			return nil, err
		}
		if e.Fields, err = parseMap("event fields", fields); err != nil {
			return nil, fmt.Errorf("store: event %d of run %s: %w", e.Seq, runID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read events of run %s: %w", runID, err)
	}
	return out, nil
}

// GetBatch reads one batch, without its input lines: BatchLines reads
// them a page at a time.
func (s *Store) GetBatch(ctx context.Context, id string) (*Batch, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	b := &Batch{}
	var created, ended sql.NullString
	var ticks int64
	err := s.r.QueryRowContext(ctx, `SELECT id, workflow_name, workflow_file, workflow_hash, workspace, inputs_file, concurrency, status,
		created_at, ended_at, owner_pid, owner_start_ticks, inputs_complete, budget, error
		FROM batches WHERE id = ?`, id).Scan(&b.ID, &b.Workflow, &b.WorkflowFile, &b.WorkflowHash, &b.Workspace, &b.InputsFile,
		&b.Concurrency, &b.Status, &created, &ended, &b.OwnerPID, &ticks, &b.InputsComplete, &b.Budget, &b.Error)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: batch %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read batch %s: %w", id, err)
	}
	b.OwnerStartTicks = uint64(ticks)
	if b.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if b.EndedAt, err = parseTime(ended); err != nil {
		return nil, err
	}
	return b, nil
}

// FindRunOrBatch says whether id is a run's or a batch's (KindRun or
// KindBatch); an error wrapping ErrNotFound when it is neither.
func (s *Store) FindRunOrBatch(ctx context.Context, id string) (kind string, err error) {
	if err := s.Ready(ctx); err != nil {
		return "", err
	}
	err = s.r.QueryRowContext(ctx, `SELECT 'run' FROM runs WHERE id = ?1 UNION ALL SELECT 'batch' FROM batches WHERE id = ?1 LIMIT 1`, id).Scan(&kind)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("no run or batch %q in the store: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: look up %s: %w", id, err)
	}
	return kind, nil
}

// ResolveID finds the run or batch an id names: an exact id, or a prefix of
// at least MinPrefix characters that starts exactly one id, the way git takes
// a short commit hash. A run wins over a batch with the same id.
func (s *Store) ResolveID(ctx context.Context, idOrPrefix string) (id, kind string, err error) {
	if err := s.Ready(ctx); err != nil {
		return "", "", err
	}
	kind, err = s.FindRunOrBatch(ctx, idOrPrefix)
	switch {
	case err == nil:
		return idOrPrefix, kind, nil
	case !errors.Is(err, ErrNotFound):
		return "", "", err
	}
	if len(idOrPrefix) < MinPrefix {
		return "", "", fmt.Errorf("no run or batch %q in the store (an id prefix must have at least %d characters): %w", idOrPrefix, MinPrefix, ErrNotFound)
	}
	// Three rows are enough to tell none, one and several; the comparison
	// on substr is a scan, which is fine at the thousands of runs a store holds.
	rows, err := s.r.QueryContext(ctx, `SELECT id, 'run' FROM runs WHERE substr(id, 1, length(?1)) = ?1
		UNION ALL SELECT id, 'batch' FROM batches WHERE substr(id, 1, length(?1)) = ?1 LIMIT 3`, idOrPrefix)
	if err != nil {
		return "", "", fmt.Errorf("store: look up %s: %w", idOrPrefix, err)
	}
	defer rows.Close()
	var ids, kinds []string
	for rows.Next() {
		var i, k string
		if err := rows.Scan(&i, &k); err != nil {
			return "", "", fmt.Errorf("store: look up %s: %w", idOrPrefix, err)
		}
		ids, kinds = append(ids, i), append(kinds, k)
	}
	if err := rows.Err(); err != nil {
		return "", "", fmt.Errorf("store: look up %s: %w", idOrPrefix, err)
	}
	switch len(ids) {
	case 0:
		return "", "", fmt.Errorf("no run or batch %q in the store: %w", idOrPrefix, ErrNotFound)
	case 1:
		return ids[0], kinds[0], nil
	}
	more := ""
	if len(ids) > 2 {
		more = ", …"
	}
	return "", "", fmt.Errorf("%w: %q starts %s %s and %s %s%s; give more of the id", ErrAmbiguous, idOrPrefix, kinds[0], ids[0], kinds[1], ids[1], more)
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (Run, error) {
	var r Run
	var batchID, resumedFrom, started, ended, usage sql.NullString
	var batchLine sql.NullInt64
	var inputs, outputs string
	var ticks int64
	err := sc.Scan(&r.ID, &batchID, &batchLine, &r.Workflow, &r.WorkflowFile, &r.WorkflowHash, &r.Workspace, &inputs,
		&r.Status, &r.Error, &outputs, &started, &ended, &r.DurationMS, &resumedFrom, &r.OwnerPID, &ticks, &usage, &r.TraceID)
	if errors.Is(err, sql.ErrNoRows) {
		return r, err
	}
	if err != nil {
		return r, fmt.Errorf("store: read run: %w", err)
	}
	r.BatchID, r.BatchLine, r.ResumedFrom = batchID.String, int(batchLine.Int64), resumedFrom.String
	r.OwnerStartTicks = uint64(ticks)
	if r.Usage, err = parseUsage[engine.RunUsage](usage); err != nil {
		return r, fmt.Errorf("store: run %s: %w", r.ID, err)
	}
	if r.Inputs, err = parseMap("inputs", inputs); err != nil {
		return r, fmt.Errorf("store: run %s: %w", r.ID, err)
	}
	if r.Outputs, err = parseMap("outputs", outputs); err != nil {
		return r, fmt.Errorf("store: run %s: %w", r.ID, err)
	}
	r.OutputNames = objectKeys(outputs)
	if r.StartedAt, err = parseTime(started); err != nil {
		return r, err
	}
	if r.EndedAt, err = parseTime(ended); err != nil {
		return r, err
	}
	return r, nil
}
