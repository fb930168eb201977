package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// OpenReadOnly opens an existing store for reading only (the web UI): no
// file or directory is created, no migration applied, and every connection
// is query_only, so nothing this process does can change the store. A store
// of an older schema must be brought up to date by any other command first.
// Close it when done.
func OpenReadOnly(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no state store at %s: run a workflow first (acpflow run), or pass --state or set ACPFLOW_STATE", abs)
		}
		return nil, fmt.Errorf("open state store: %w", err)
	}
	r, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		return nil, fmt.Errorf("open state store %s: %w", abs, err)
	}
	var version int
	if err := r.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		r.Close()
		return nil, fmt.Errorf("open state store %s: read schema version: %w", abs, err)
	}
	switch {
	case version > len(migrations):
		r.Close()
		return nil, fmt.Errorf("%w: %s has schema version %d, this acpflow knows up to %d; upgrade acpflow", ErrNewerSchema, abs, version, len(migrations))
	case version < len(migrations):
		r.Close()
		return nil, fmt.Errorf("state store %s has schema version %d, older than this acpflow's %d, and is opened read-only here: any other acpflow command (acpflow runs) brings it up to date", abs, version, len(migrations))
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	ready := make(chan struct{})
	close(ready)
	return &Store{path: abs, r: r, ready: ready}, nil
}

// readOnly says the store was opened by OpenReadOnly: it has no writer.
func (s *Store) readOnly() bool { return s.w == nil }

// Watcher tells when anything was committed to the store, by any process:
// SQLite's data_version on a connection of its own changes exactly then.
// Polling it is one cheap read; it costs nothing when nothing changed.
type Watcher struct {
	conn *sql.Conn
	last int64
}

// Watch is a Watcher on a connection of its own; Close it when done.
func (s *Store) Watch(ctx context.Context) (*Watcher, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	c, err := s.r.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: watch: %w", err)
	}
	w := &Watcher{conn: c}
	if _, err := w.Changed(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return w, nil
}

// Changed says whether anything was committed since the last call.
func (w *Watcher) Changed(ctx context.Context) (bool, error) {
	var v int64
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return false, fmt.Errorf("store: watch: %w", err)
	}
	changed := v != w.last
	w.last = v
	return changed, nil
}

// Close gives the watcher's connection back.
func (w *Watcher) Close() error { return w.conn.Close() }

// BatchSummary is one batch with its runs counted: what the web UI lists.
type BatchSummary struct {
	Batch
	Lines                                       int // input lines stored
	Runs, Succeeded, Failed, Running, Cancelled int // its runs (a line resumed has a run per attempt)
	// Cost sums what its runs' agents reported, in Currency ("" when
	// none reported a cost; "mixed" when they used more than one).
	Cost     float64
	Currency string
	Tokens   int64
}

// ListBatches lists up to limit batches, newest first, with their runs
// counted; workflow, when not "", selects a workflow's (name or file), and
// id one batch. counted, when not nil, holds summaries already made (of
// batches that ended: they do not change until resumed, which clears
// their end); a batch found there is not counted again.
func (s *Store) ListBatches(ctx context.Context, workflow, id string, limit int, counted func(Batch) (BatchSummary, bool)) ([]BatchSummary, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	q := `SELECT id, workflow_name, workflow_file, status, created_at, ended_at, budget, error, concurrency FROM batches`
	var args []any
	switch {
	case id != "":
		q += ` WHERE id = ?`
		args = append(args, id)
	case workflow != "":
		q += ` WHERE workflow_name = ? OR workflow_file = ?`
		args = append(args, workflow, workflow)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list batches: %w", err)
	}
	var list []Batch
	for rows.Next() {
		var b Batch
		var created, ended sql.NullString
		if err := rows.Scan(&b.ID, &b.Workflow, &b.WorkflowFile, &b.Status, &created, &ended, &b.Budget, &b.Error, &b.Concurrency); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list batches: %w", err)
		}
		if b.CreatedAt, err = parseTime(created); err != nil {
			rows.Close()
			return nil, err
		}
		if b.EndedAt, err = parseTime(ended); err != nil {
			rows.Close()
			return nil, err
		}
		list = append(list, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list batches: %w", err)
	}
	out := make([]BatchSummary, 0, len(list))
	for _, b := range list {
		if counted != nil {
			if sum, ok := counted(b); ok {
				out = append(out, sum)
				continue
			}
		}
		sum := BatchSummary{Batch: b}
		var currencies int
		err := s.r.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM batch_inputs bi WHERE bi.batch_id = ?1),
			COUNT(*), COALESCE(SUM(status = 'succeeded'), 0), COALESCE(SUM(status = 'failed'), 0),
			COALESCE(SUM(status = 'running'), 0), COALESCE(SUM(status = 'cancelled'), 0),
			COALESCE(SUM(json_extract(usage_json, '$.cost.amount')), 0),
			COUNT(DISTINCT json_extract(usage_json, '$.cost.currency')), COALESCE(MIN(json_extract(usage_json, '$.cost.currency')), ''),
			COALESCE(SUM(json_extract(usage_json, '$.total_tokens')), 0)
			FROM runs WHERE batch_id = ?1`, b.ID).Scan(&sum.Lines, &sum.Runs, &sum.Succeeded, &sum.Failed, &sum.Running, &sum.Cancelled,
			&sum.Cost, &currencies, &sum.Currency, &sum.Tokens)
		if err != nil {
			return nil, fmt.Errorf("store: count the runs of batch %s: %w", b.ID, err)
		}
		if currencies > 1 {
			sum.Currency = "mixed"
		}
		out = append(out, sum)
	}
	return out, nil
}

// TimelineEvents reads the events of a run that say when its steps and
// their attempts started and ended (run_start, step_start, turn_end,
// step_end, run_end, and the retry and element_end updates), in order:
// the web UI's timeline and graph, without every chunk of the run's text.
func (s *Store) TimelineEvents(ctx context.Context, runID string) ([]Event, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, step_id, type, time, fields_json FROM events
		WHERE run_id = ? AND (type IN ('run_start', 'step_start', 'turn_end', 'step_end', 'run_end')
			OR (type = 'step_update' AND json_extract(fields_json, '$.kind') IN ('retry', 'element_end')))
		ORDER BY seq`, runID)
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
