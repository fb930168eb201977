package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acpflow/acpflow/engine"
)

// Batches, runs and steps have the engine's statuses (engine.Status): the
// store has no words of its own. A run recorded running whose acpflow is
// gone was interrupted; Run.OwnerPID and OwnerStartTicks let the caller
// tell.

func validRunStatus(s engine.Status) error {
	switch s {
	case engine.StatusRunning, engine.StatusSucceeded, engine.StatusFailed, engine.StatusCancelled:
		return nil
	}
	return fmt.Errorf("store: %q is not a run or batch status", s)
}

func validStepStatus(s engine.Status) error {
	if s == engine.StatusSkipped {
		return nil
	}
	if err := validRunStatus(s); err != nil {
		return fmt.Errorf("store: %q is not a step status", s)
	}
	return nil
}

// Batch is one `acpflow run --inputs FILE`: a run per input line.
type Batch struct {
	ID           string
	Workflow     string // the workflow's name
	WorkflowFile string // absolute
	WorkflowHash string // of the file's bytes, so resume can tell it changed
	Workspace    string
	InputsFile   string // as given; "-" for stdin
	Concurrency  int
	Status       engine.Status // running when empty at CreateBatch
	CreatedAt    time.Time
	EndedAt      time.Time // zero while running
	// OwnerPID and OwnerStartTicks name the acpflow process running the
	// batch, as for a run: a batch whose owner is alive is not resumed.
	OwnerPID        int
	OwnerStartTicks uint64
	// InputsComplete says every input line was read and stored. A batch
	// reads its lines as it goes (stdin may be endless); one that stopped
	// before the end of its input has only the lines it read.
	InputsComplete bool
	// Budget is the batch's --budget as given ("": none); Error says why
	// the batch stopped before its end (its budget exceeded), "" else.
	Budget string
	Error  string
	// Lines are input lines to store with the batch at CreateBatch (more
	// come with AddBatchLines; BatchLines reads them back, GetBatch does
	// not). They are stored so that resume can start the lines that never
	// started, even when the inputs came from stdin or the file has changed.
	Lines []BatchLine
}

// BatchLine is one input line of a batch.
type BatchLine struct {
	Line   int // 1-based line number in the inputs file
	Inputs map[string]any
	// Error says why the line is not an object of inputs at all (too long,
	// not UTF-8, not JSON, not an object); Inputs is nil then. Inputs that
	// do not fit the workflow are not an error here: they are checked
	// against the workflow when the line runs.
	Error string
}

// Run is one run of a workflow.
type Run struct {
	ID           string
	BatchID      string // empty when the run is not part of a batch
	BatchLine    int    // the batch's input line; 0 when not in a batch
	Workflow     string // the workflow's name
	WorkflowFile string // absolute
	WorkflowHash string
	Workspace    string
	Inputs       map[string]any // with defaults applied
	Status       engine.Status  // running when empty at CreateRun
	Error        string
	Outputs      map[string]any
	StartedAt    time.Time // now when zero at CreateRun
	EndedAt      time.Time // zero while running
	DurationMS   int64
	ResumedFrom  string // the run this one resumes, if any
	// OwnerPID and OwnerStartTicks name the acpflow process running the run
	// (pid and /proc start time), so a reader can tell a run in progress
	// elsewhere from one whose process died.
	OwnerPID        int
	OwnerStartTicks uint64
	// Usage sums what the run's steps reported (nil: nothing), set when
	// the run ends (SetRunUsage).
	Usage *engine.RunUsage
	// OutputNames are Outputs' names in the order the run recorded them
	// (its workflow's; name order for a run recorded before that order
	// was kept).
	OutputNames []string
	// TraceID is the OpenTelemetry trace the run exported (CreateRun, or
	// SetRunTrace for a resumed run), "" for none.
	TraceID string
}

// CreateBatch records a new batch and its input lines, if any.
func (s *Store) CreateBatch(ctx context.Context, b Batch) error {
	ctx = durable(ctx)
	if b.Status == "" {
		b.Status = engine.StatusRunning
	}
	if err := validRunStatus(b.Status); err != nil {
		return err
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = time.Now()
	}
	lines, err := encodeLines(b.ID, b.Lines)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO batches
			(id, workflow_name, workflow_file, workflow_hash, workspace, inputs_file, concurrency, status, created_at, ended_at,
			 owner_pid, owner_start_ticks, inputs_complete, budget, error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			b.ID, b.Workflow, b.WorkflowFile, b.WorkflowHash, b.Workspace, b.InputsFile, b.Concurrency,
			string(b.Status), timeArg(b.CreatedAt), timeArg(b.EndedAt), b.OwnerPID, int64(b.OwnerStartTicks), b.InputsComplete, b.Budget, b.Error)
		if err != nil {
			return fmt.Errorf("store: create batch %s: %w", b.ID, err)
		}
		return insertLines(ctx, tx, b.ID, b.Lines, lines)
	})
}

// AddBatchLines stores more input lines of a batch, in one transaction.
func (s *Store) AddBatchLines(ctx context.Context, batchID string, lines []BatchLine) error {
	ctx = durable(ctx)
	enc, err := encodeLines(batchID, lines)
	if err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error { return insertLines(ctx, tx, batchID, lines, enc) })
}

// BatchInputsComplete records that every input line of a batch is stored.
func (s *Store) BatchInputsComplete(ctx context.Context, batchID string) error {
	return s.update(durable(ctx), "batch", batchID, `UPDATE batches SET inputs_complete = 1 WHERE id = ?`, batchID)
}

func encodeLines(batchID string, lines []BatchLine) ([]string, error) {
	enc := make([]string, len(lines))
	for i, l := range lines {
		var err error
		if enc[i], err = jsonArg("batch inputs", l.Inputs); err != nil {
			return nil, fmt.Errorf("store: batch %s line %d: %w", batchID, l.Line, err)
		}
	}
	return enc, nil
}

func insertLines(ctx context.Context, tx *sql.Tx, batchID string, lines []BatchLine, enc []string) error {
	if len(lines) == 0 {
		return nil
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO batch_inputs (batch_id, line, inputs_json, error) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("store: batch %s: store input lines: %w", batchID, err)
	}
	defer ins.Close()
	for i, l := range lines {
		if _, err := ins.ExecContext(ctx, batchID, l.Line, enc[i], l.Error); err != nil {
			return fmt.Errorf("store: batch %s: store input line %d: %w", batchID, l.Line, err)
		}
	}
	return nil
}

// FinishBatch records a batch's end: succeeded, failed or cancelled.
//
// # Notes
//
// A batch is running again only through ClaimBatch, which checks that no
// live process owns it: FinishBatch refuses engine.StatusRunning.
func (s *Store) FinishBatch(ctx context.Context, id string, status engine.Status) error {
	ctx = durable(ctx)
	if err := validRunStatus(status); err != nil {
		return err
	}
	if status == engine.StatusRunning {
		return fmt.Errorf("store: finish batch %s: %q is not an end; ClaimBatch takes a batch up again", id, status)
	}
	return s.update(ctx, "batch", id, `UPDATE batches SET status = ?, ended_at = ? WHERE id = ?`, string(status), timeArg(time.Now()), id)
}

// CreateRun records a run as it starts.
func (s *Store) CreateRun(ctx context.Context, r Run) error {
	ctx = durable(ctx)
	if r.Status == "" {
		r.Status = engine.StatusRunning
	}
	if err := validRunStatus(r.Status); err != nil {
		return err
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = time.Now()
	}
	inputs, err := jsonArg("inputs", r.Inputs)
	if err != nil {
		return fmt.Errorf("store: run %s: %w", r.ID, err)
	}
	outputs, err := jsonArg("outputs", r.Outputs)
	if err != nil {
		return fmt.Errorf("store: run %s: %w", r.ID, err)
	}
	return s.exec(ctx, "store: create run "+r.ID, &s.stmts.insertRun,
		r.ID, nullString(r.BatchID), nullInt(r.BatchLine), r.Workflow, r.WorkflowFile, r.WorkflowHash, r.Workspace, inputs,
		string(r.Status), r.Error, outputs, timeArg(r.StartedAt), timeArg(r.EndedAt), r.DurationMS,
		nullString(r.ResumedFrom), r.OwnerPID, int64(r.OwnerStartTicks), r.TraceID)
}

// FinishRun records a run's end (now when ended is zero). Its duration is
// ended minus its start. The outputs are kept in the order of names (the
// workflow's), any not named after them in name order.
func (s *Store) FinishRun(ctx context.Context, id string, status engine.Status, errMsg string, outputs map[string]any, ended time.Time, names ...string) error {
	ctx = durable(ctx)
	if err := validRunStatus(status); err != nil {
		return err
	}
	if ended.IsZero() {
		ended = time.Now()
	}
	out, err := orderedObject("outputs", outputs, names)
	if err != nil {
		return fmt.Errorf("store: run %s: %w", id, err)
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		var startedS sql.NullString
		if err := tx.StmtContext(ctx, s.stmts.runStarted).QueryRowContext(ctx, id).Scan(&startedS); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("store: run %q: %w", id, ErrNotFound)
			}
			return fmt.Errorf("store: finish run %s: %w", id, err)
		}
		started, err := parseTime(startedS)
		if err != nil {
			return fmt.Errorf("store: finish run %s: %w", id, err)
		}
		_, err = tx.StmtContext(ctx, s.stmts.finishRun).ExecContext(ctx, string(status), errMsg, out, timeArg(ended), max(ended.Sub(started).Milliseconds(), 0), id)
		if err != nil {
			return fmt.Errorf("store: finish run %s: %w", id, err)
		}
		return nil
	})
}

// SetRunUsage records the sums of a run's usage (nil: nothing reported).
func (s *Store) SetRunUsage(ctx context.Context, id string, u *engine.RunUsage) error {
	ctx = durable(ctx)
	usage, err := usageArg(u)
	if err != nil {
		return fmt.Errorf("store: run %s: %w", id, err)
	}
	return s.update(ctx, "run", id, `UPDATE runs SET usage_json = ? WHERE id = ?`, usage, id)
}

// SetRunTrace records the id of the trace a run exports (docs/traces.md).
func (s *Store) SetRunTrace(ctx context.Context, id, traceID string) error {
	ctx = durable(ctx)
	return s.update(ctx, "run", id, `UPDATE runs SET trace_id = ? WHERE id = ?`, traceID, id)
}

// SetBatchError records why a batch stopped before its end ("" clears
// it, as a resume does) and the budget it now runs under.
func (s *Store) SetBatchError(ctx context.Context, id, budget, errMsg string) error {
	ctx = durable(ctx)
	return s.update(ctx, "batch", id, `UPDATE batches SET budget = ?, error = ? WHERE id = ?`, budget, errMsg, id)
}

// SetRunStatus changes a run's status alone. Setting engine.StatusRunning (resume
// takes the run up again) also clears its end: error, ended_at, duration.
func (s *Store) SetRunStatus(ctx context.Context, id string, status engine.Status) error {
	ctx = durable(ctx)
	if err := validRunStatus(status); err != nil {
		return err
	}
	q := `UPDATE runs SET status = ? WHERE id = ?`
	if status == engine.StatusRunning {
		q = `UPDATE runs SET status = ?, error = '', ended_at = NULL, duration_ms = 0 WHERE id = ?`
	}
	return s.update(ctx, "run", id, q, string(status), id)
}

// durable is the context a write runs in: ctx's values, but neither its
// cancellation nor its deadline. The engine's context is cancelled exactly when a run is
// cancelled or times out, which is when its last records (the cancelled
// steps, the run's end) must still be written. A write is bounded anyway, by
// the busy timeout.
func durable(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

// writeTx runs fn in a write transaction (the writer's, which may hold
// other writes queued at the same moment: see writer) and returns once it
// is committed; with a ctx from Queued, it returns at once.
func (s *Store) writeTx(ctx context.Context, fn func(*sql.Tx) error) error {
	if report := queuedReport(ctx); report != nil {
		s.writer.post(fn, report)
		return nil
	}
	return s.writer.do(fn)
}

// exec runs a prepared statement (taken from *stmt when the write runs:
// the statements are prepared by then) through writeTx; its error is
// prefixed with what.
func (s *Store) exec(ctx context.Context, what string, stmt **sql.Stmt, args ...any) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.StmtContext(ctx, *stmt).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// update runs an UPDATE of the row of a kind ("run", "batch") whose id is
// id through writeTx: ErrNotFound when no row has that id.
func (s *Store) update(ctx context.Context, kind, id, q string, args ...any) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		return updated(res, err, kind, id)
	})
}

// Queued is a context for writes that are not waited for: a write method
// called with it queues its write and returns, and report is called with
// the write's error, if any (from the store's writer goroutine: it must
// not call the store). A write waited for afterwards is committed after
// every write queued before it.
//
// # Notes
//
// The run recorder (package runs) queues what resume does not depend on
// being on disk before the step goes on: the run's creation, a step's
// start, the processes seen and ended. What it does depend on is waited
// for: a process started is on record before the step drives it, a step's
// end before step_end is reported.
func Queued(ctx context.Context, report func(error)) context.Context {
	return context.WithValue(ctx, queuedKey{}, report)
}

type queuedKey struct{}

func queuedReport(ctx context.Context) func(error) {
	report, _ := ctx.Value(queuedKey{}).(func(error))
	return report
}

// updated turns an UPDATE of one row by id into an error: the statement's,
// or ErrNotFound when no row has that id.
func updated(res sql.Result, err error, kind, id string) error {
	if err != nil {
		return fmt.Errorf("store: update %s %s: %w", kind, id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("store: %s %q: %w", kind, id, ErrNotFound)
	}
	return nil
}

// ReopenRun marks a run running again for `resume`: it clears its end,
// error and usage (the resumed run sums it again, kept steps included) and records the process that now owns it. Its steps are kept, so
// the resumed run can skip those that succeeded.
func (s *Store) ReopenRun(ctx context.Context, id string, ownerPID int, ownerStartTicks uint64) error {
	ctx = durable(ctx)
	return s.update(ctx, "run", id, `UPDATE runs SET status = ?, error = '', ended_at = NULL, duration_ms = 0, usage_json = NULL,
		owner_pid = ?, owner_start_ticks = ? WHERE id = ?`, string(engine.StatusRunning), ownerPID, int64(ownerStartTicks), id)
}
