package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/acpflow/acpflow/engine"
)

// Owner is the acpflow process that runs a run or a batch: its pid and its
// start time (field 22 of /proc/PID/stat), which tells it from a later
// process that reused the pid. The zero Owner is no one.
type Owner struct {
	PID        int
	StartTicks uint64
}

// Alive says whether an owner's process still runs. The store does not
// look at processes itself: the caller passes how to tell.
type Alive func(Owner) bool

// ErrSucceeded is returned (wrapped) by ClaimRun for a run that succeeded:
// there is nothing to take up.
var ErrSucceeded = errors.New("already succeeded")

// OwnedError is returned by ClaimRun and ClaimBatch when a live process
// runs the run or batch.
type OwnedError struct {
	Kind  string // KindRun or KindBatch
	ID    string
	Owner Owner
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("%s %s is still running (acpflow process %d); wait for it to end, or stop it first", e.Kind, e.ID, e.Owner.PID)
}

// ClaimRun makes me the owner of a run that is to be resumed, and marks it
// running again (its end and error cleared; its steps kept). It returns
// the owner it replaced, whose leftover processes the caller may reap. It
// fails with
// an *OwnedError when the run is running in another process that alive
// says is still there, and with ErrSucceeded when the run succeeded.
//
// # Notes
//
// The owner is read and replaced in one write transaction, which SQLite
// serialises across processes, and the UPDATE is conditional on the owner
// read: of several processes claiming one run at once, exactly one wins.
func (s *Store) ClaimRun(ctx context.Context, id string, me Owner, alive Alive) (was Owner, err error) {
	return s.claim(ctx, KindRun, id, me, alive)
}

// ClaimBatch makes me the owner of a batch that is to be resumed, and
// marks it running again. It fails with an *OwnedError when another process
// that alive says is still there runs it. See ClaimRun.
func (s *Store) ClaimBatch(ctx context.Context, id string, me Owner, alive Alive) error {
	_, err := s.claim(ctx, KindBatch, id, me, alive)
	return err
}

func (s *Store) claim(ctx context.Context, kind, id string, me Owner, alive Alive) (was Owner, err error) {
	ctx = durable(ctx)
	// The table name is one of two constants, never user input.
	table, clear := "runs", `error = '', ended_at = NULL, duration_ms = 0`
	if kind == KindBatch {
		table, clear = "batches", `ended_at = NULL`
	}
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		var status engine.Status
		var ticks int64
		err := tx.QueryRowContext(ctx, `SELECT status, owner_pid, owner_start_ticks FROM `+table+` WHERE id = ?`, id).Scan(&status, &was.PID, &ticks)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: %s %q: %w", kind, id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: claim %s %s: %w", kind, id, err)
		}
		was.StartTicks = uint64(ticks)
		switch {
		case kind == KindRun && status == engine.StatusSucceeded:
			return fmt.Errorf("run %s %w", id, ErrSucceeded)
		case status == engine.StatusRunning && was.PID != 0 && was != me && alive(was):
			return &OwnedError{Kind: kind, ID: id, Owner: was}
		}
		res, err := tx.ExecContext(ctx, `UPDATE `+table+` SET status = ?, `+clear+`, owner_pid = ?, owner_start_ticks = ?
			WHERE id = ? AND status = ? AND owner_pid = ? AND owner_start_ticks = ?`,
			string(engine.StatusRunning), me.PID, int64(me.StartTicks), id, string(status), was.PID, ticks)
		if err != nil {
			return fmt.Errorf("store: claim %s %s: %w", kind, id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("store: claim %s %s: its owner changed while it was claimed", kind, id)
		}
		if kind == KindRun {
			// The asks of the process that ran it wait for no one now.
			if _, err := tx.ExecContext(ctx, `UPDATE approvals SET status = ? WHERE run_id = ? AND status = ?`, ApprovalWithdrawn, id, ApprovalPending); err != nil {
				return fmt.Errorf("store: claim run %s: %w", id, err)
			}
		}
		return nil
	})
	return was, err
}

// BatchLines reads up to limit input lines of a batch, those after line
// after, in line order: a batch of any size is read a page at a time.
func (s *Store) BatchLines(ctx context.Context, batchID string, after, limit int) ([]BatchLine, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT line, inputs_json, error FROM batch_inputs
		WHERE batch_id = ? AND line > ? ORDER BY line LIMIT ?`, batchID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: read batch %s: %w", batchID, err)
	}
	defer rows.Close()
	var out []BatchLine
	for rows.Next() {
		var l BatchLine
		var inputs string
		if err := rows.Scan(&l.Line, &inputs, &l.Error); err != nil {
			return nil, fmt.Errorf("store: read batch %s: %w", batchID, err)
		}
		if l.Inputs, err = parseMap("batch inputs", inputs); err != nil {
			return nil, fmt.Errorf("store: batch %s line %d: %w", batchID, l.Line, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read batch %s: %w", batchID, err)
	}
	return out, nil
}

// LatestRuns returns, for the batch's lines from first to last, the last
// run of each line that has one (a line resumed has a run per attempt).
func (s *Store) LatestRuns(ctx context.Context, batchID string, first, last int) (map[int]Run, error) {
	runs, err := s.queryRuns(ctx, `SELECT `+runColumns+` FROM runs
		WHERE batch_id = ? AND batch_line BETWEEN ? AND ? ORDER BY batch_line, started_at, id`, batchID, first, last)
	if err != nil {
		return nil, err
	}
	out := make(map[int]Run, len(runs))
	for _, r := range runs {
		out[r.BatchLine] = r
	}
	return out, nil
}

// BatchProgress counts a batch's stored input lines and those whose last
// run succeeded.
func (s *Store) BatchProgress(ctx context.Context, batchID string) (lines, succeeded int, err error) {
	if err := s.Ready(ctx); err != nil {
		return 0, 0, err
	}
	err = s.r.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(
			(SELECT status FROM runs r WHERE r.batch_id = bi.batch_id AND r.batch_line = bi.line
			 ORDER BY r.started_at DESC, r.id DESC LIMIT 1) = 'succeeded'), 0)
		FROM batch_inputs bi WHERE bi.batch_id = ?`, batchID).Scan(&lines, &succeeded)
	if err != nil {
		return 0, 0, fmt.Errorf("store: read batch %s: %w", batchID, err)
	}
	return lines, succeeded, nil
}
