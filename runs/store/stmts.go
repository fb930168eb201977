package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// writeStmts are the statements written on every step and event, prepared
// once on the writer's one connection: preparing (parsing SQL) was about
// half of what a SaveStep cost.
type writeStmts struct {
	upsertStep, deletePermissions, insertPermission *sql.Stmt
	insertEvent, insertEvents                       *sql.Stmt // one row; eventsPerInsert rows
	insertRun, insertChild, endChild                *sql.Stmt // once or twice a run: a batch does thousands
	runStarted, finishRun                           *sql.Stmt
	saveTranscript                                  *sql.Stmt
}

// eventsPerInsert is how many events one INSERT writes.
const eventsPerInsert = 32

const (
	upsertStepSQL = `INSERT INTO steps
	(run_id, step_id, ord, status, stop_reason, output_json, final_json, value_json, error, attempts, session_id, stderr_tail, started_at, ended_at, duration_ms, usage_json, sandbox_json, exit_code)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (run_id, step_id) DO UPDATE SET
		ord = excluded.ord, status = excluded.status, stop_reason = excluded.stop_reason,
		output_json = excluded.output_json, final_json = excluded.final_json, value_json = excluded.value_json,
		error = excluded.error, attempts = excluded.attempts,
		session_id = excluded.session_id, stderr_tail = excluded.stderr_tail,
		started_at = excluded.started_at, ended_at = excluded.ended_at, duration_ms = excluded.duration_ms, usage_json = excluded.usage_json,
		sandbox_json = excluded.sandbox_json, exit_code = excluded.exit_code`
	deletePermissionsSQL = `DELETE FROM permissions WHERE run_id = ? AND step_id = ?`
	insertPermissionSQL  = `INSERT INTO permissions
	(run_id, step_id, seq, tool_call_id, kind, title, command, locations_json, decision, would, status, outcome, option_id, layer, policy, rule, reason,
	 ask, approval_id, answered_by, answered_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertEventSQL = `INSERT INTO events (run_id, step_id, type, time, fields_json) VALUES (?, ?, ?, ?, ?)`
	insertRunSQL   = `INSERT INTO runs
		(id, batch_id, batch_line, workflow_name, workflow_file, workflow_hash, workspace, inputs_json,
		 status, error, outputs_json, started_at, ended_at, duration_ms, resumed_from, owner_pid, owner_start_ticks, trace_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertChildSQL    = `INSERT INTO children (run_id, step_id, pid, pgid, start_ticks, started_at) VALUES (?, ?, ?, ?, ?, ?)`
	endChildSQL       = `UPDATE children SET ended_at = ? WHERE run_id = ? AND step_id = ? AND pid = ? AND ended_at IS NULL`
	runStartedSQL     = `SELECT started_at FROM runs WHERE id = ?`
	finishRunSQL      = `UPDATE runs SET status = ?, error = ?, outputs_json = ?, ended_at = ?, duration_ms = ? WHERE id = ?`
	saveTranscriptSQL = `INSERT OR REPLACE INTO transcripts (run_id, step_id, item, attempt, agent, truncated, messages_json, spawn_json, model_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

var insertEventsSQL = insertEventSQL + strings.Repeat(`, (?, ?, ?, ?, ?)`, eventsPerInsert-1)

func (ws *writeStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&ws.upsertStep, upsertStepSQL},
		{&ws.deletePermissions, deletePermissionsSQL},
		{&ws.insertPermission, insertPermissionSQL},
		{&ws.insertEvent, insertEventSQL},
		{&ws.insertEvents, insertEventsSQL},
		{&ws.insertRun, insertRunSQL},
		{&ws.insertChild, insertChildSQL},
		{&ws.endChild, endChildSQL},
		{&ws.runStarted, runStartedSQL},
		{&ws.finishRun, finishRunSQL},
		{&ws.saveTranscript, saveTranscriptSQL},
	} {
		var err error
		if *p.stmt, err = db.PrepareContext(ctx, p.sql); err != nil {
			ws.close()
			return fmt.Errorf("open state store: prepare: %w", err)
		}
	}
	return nil
}

func (ws *writeStmts) close() error {
	var errs []error
	for _, s := range []*sql.Stmt{ws.upsertStep, ws.deletePermissions, ws.insertPermission, ws.insertEvent, ws.insertEvents,
		ws.insertRun, ws.insertChild, ws.endChild, ws.runStarted, ws.finishRun, ws.saveTranscript} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
