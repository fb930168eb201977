package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/acpflow/acpflow/engine"
)

// RunWorktrees is a run that made git worktrees (isolation: worktree),
// as `acpflow worktrees` lists it.
type RunWorktrees struct {
	RunID     string
	Workflow  string
	Workspace string
	Status    engine.Status
	StartedAt string // as stored (timeLayout, UTC)
	Owner     Owner
	Worktrees []*engine.Worktree
}

// SetRunWorktrees records the worktrees of a run, its own and its steps'
// (nil or empty: none). A run not recorded yet is not an error: its
// worktrees are recorded when it starts.
func (s *Store) SetRunWorktrees(ctx context.Context, id string, wts []*engine.Worktree) error {
	ctx = durable(ctx)
	var arg any
	if len(wts) > 0 {
		b, err := json.Marshal(wts)
		if err != nil {
			return fmt.Errorf("store: run %s: encode worktrees: %w", id, err)
		}
		arg = string(b)
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET worktrees_json = ? WHERE id = ?`, arg, id); err != nil {
			return fmt.Errorf("store: update run %s: %w", id, err)
		}
		return nil
	})
}

// GetRunWorktrees reads the worktrees recorded of a run (nil: none).
func (s *Store) GetRunWorktrees(ctx context.Context, id string) ([]*engine.Worktree, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	var col sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT worktrees_json FROM runs WHERE id = ?`, id).Scan(&col)
	switch {
	case err == sql.ErrNoRows:
		return nil, fmt.Errorf("store: run %q: %w", id, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("store: run %s: %w", id, err)
	}
	return decodeWorktrees(id, col)
}

// ListWorktrees lists the runs that recorded worktrees, oldest first.
func (s *Store) ListWorktrees(ctx context.Context) ([]RunWorktrees, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, workflow_name, workspace, status, started_at, owner_pid, owner_start_ticks, worktrees_json
		FROM runs WHERE worktrees_json IS NOT NULL ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list worktrees: %w", err)
	}
	defer rows.Close()
	var out []RunWorktrees
	for rows.Next() {
		var r RunWorktrees
		var col sql.NullString
		var status string
		if err := rows.Scan(&r.RunID, &r.Workflow, &r.Workspace, &status, &r.StartedAt, &r.Owner.PID, &r.Owner.StartTicks, &col); err != nil {
			return nil, fmt.Errorf("store: list worktrees: %w", err)
		}
		r.Status = engine.Status(status)
		if r.Worktrees, err = decodeWorktrees(r.RunID, col); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func decodeWorktrees(id string, col sql.NullString) ([]*engine.Worktree, error) {
	if !col.Valid {
		return nil, nil
	}
	var wts []*engine.Worktree
	if err := json.Unmarshal([]byte(col.String), &wts); err != nil {
		return nil, fmt.Errorf("store: run %s: decode worktrees: %w", id, err)
	}
	return wts, nil
}
