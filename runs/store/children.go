package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Child is an agent process a step spawned, or a process seen below one. If
// acpflow is killed, its direct children die with it (Pdeathsig), but their
// descendants may not; the rows still live after the run's end are what
// resume must make sure are gone.
type Child struct {
	RunID  string
	StepID string
	PID    int
	// PGID is the agent's process group, which is the agent's pid: an agent's
	// row has PID == PGID, a descendant's row the PGID of the agent it
	// descends from, also when it left that group (setsid).
	PGID int
	// StartTicks is the process's start time in clock ticks since boot
	// (field 22 of /proc/PID/stat): a process with this pid and another start
	// time is a later one that reused the pid, and must not be signalled.
	StartTicks uint64
	StartedAt  time.Time
	EndedAt    time.Time // zero while live
}

// ChildStarted records that a step spawned a process. It is committed when
// it returns, so a kill of acpflow right after the spawn still leaves a
// record of the process.
func (s *Store) ChildStarted(ctx context.Context, runID, stepID string, pid, pgid int, startTicks uint64) error {
	ctx = durable(ctx)
	return s.exec(ctx, fmt.Sprintf("store: record process %d of step %s of run %s", pid, stepID, runID),
		&s.stmts.insertChild, runID, stepID, pid, pgid, int64(startTicks), timeArg(time.Now()))
}

// ChildEnded records that a step's process, and its group, are gone. A
// process not recorded live (already ended, or never recorded) is no error:
// teardown may report a process more than once.
func (s *Store) ChildEnded(ctx context.Context, runID, stepID string, pid int) error {
	ctx = durable(ctx)
	return s.exec(ctx, fmt.Sprintf("store: record end of process %d of step %s of run %s", pid, stepID, runID),
		&s.stmts.endChild, timeArg(time.Now()), runID, stepID, pid)
}

// DescendantSeen records a process seen below the agent whose pid (and
// group id) is pgid. Like ChildStarted, it is committed when it returns.
func (s *Store) DescendantSeen(ctx context.Context, runID, stepID string, pid, pgid int, startTicks uint64) error {
	return s.ChildStarted(ctx, runID, stepID, pid, pgid, startTicks)
}

// GroupEnded records that an agent (pid pgid), its group and every process
// recorded below it are gone.
func (s *Store) GroupEnded(ctx context.Context, runID, stepID string, pgid int) error {
	ctx = durable(ctx)
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE children SET ended_at = ? WHERE run_id = ? AND step_id = ? AND pgid = ? AND ended_at IS NULL`,
			timeArg(time.Now()), runID, stepID, pgid)
		if err != nil {
			return fmt.Errorf("store: record end of process group %d of step %s of run %s: %w", pgid, stepID, runID, err)
		}
		return nil
	})
}

// LiveChildren lists the processes of a run not recorded as ended, oldest
// first; with runID empty, those of every run.
func (s *Store) LiveChildren(ctx context.Context, runID string) ([]Child, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	q := `SELECT run_id, step_id, pid, pgid, start_ticks, started_at, ended_at FROM children WHERE ended_at IS NULL`
	var args []any
	if runID != "" {
		q += ` AND run_id = ?`
		args = append(args, runID)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: live processes: %w", err)
	}
	return scanChildren(rows)
}

func scanChildren(rows *sql.Rows) ([]Child, error) {
	defer rows.Close()
	var out []Child
	for rows.Next() {
		var c Child
		var ticks int64
		var started, ended sql.NullString
		if err := rows.Scan(&c.RunID, &c.StepID, &c.PID, &c.PGID, &ticks, &started, &ended); err != nil {
			return nil, fmt.Errorf("store: read processes: %w", err)
		}
		c.StartTicks = uint64(ticks)
		var err error
		if c.StartedAt, err = parseTime(started); err != nil {
			return nil, err
		}
		if c.EndedAt, err = parseTime(ended); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read processes: %w", err)
	}
	return out, nil
}
