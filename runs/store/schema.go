package store

// migrations is the schema's history: migrations[i] takes a store from
// schema version i to i+1 (PRAGMA user_version). Entries are only ever
// appended, never edited: a store on disk may be at any earlier version, and
// each step must mean exactly what it meant when that store was migrated.
//
// Design notes, so that a later migration keeps to them:
//   - Times are TEXT in one fixed-width UTC layout (timeLayout), so they sort
//     as they compare and read well in the sqlite3 shell. NULL is "not yet".
//   - JSON columns (inputs, outputs, output, fields) hold what the engine
//     holds as `any`; the store does not look inside them.
//   - Statuses are not CHECK-constrained: SQLite cannot alter a CHECK without
//     rebuilding the table, and a new status should not need a migration.
//     The Go side validates them (validRunStatus).
//   - Steps, permissions and children belong to their run (ON DELETE
//     CASCADE), so pruning a run is one DELETE. Events have no foreign key:
//     they are written in batches, and one stray event must not fail the
//     batch it is in.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE batches (
	id            TEXT PRIMARY KEY,
	workflow_name TEXT NOT NULL DEFAULT '',
	workflow_file TEXT NOT NULL DEFAULT '',
	workflow_hash TEXT NOT NULL DEFAULT '',
	workspace     TEXT NOT NULL DEFAULT '',
	inputs_file   TEXT NOT NULL DEFAULT '',
	concurrency   INTEGER NOT NULL DEFAULT 0,
	status        TEXT NOT NULL,
	created_at    TEXT NOT NULL,
	ended_at      TEXT
) STRICT;

-- The batch's input lines as read, so that resume does not depend on the
-- inputs file still being there (or on stdin, which cannot be read twice).
CREATE TABLE batch_inputs (
	batch_id    TEXT NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
	line        INTEGER NOT NULL,
	inputs_json TEXT NOT NULL,
	PRIMARY KEY (batch_id, line)
) STRICT, WITHOUT ROWID;

CREATE TABLE runs (
	id                TEXT PRIMARY KEY,
	batch_id          TEXT REFERENCES batches(id) ON DELETE SET NULL,
	batch_line        INTEGER,
	workflow_name     TEXT NOT NULL DEFAULT '',
	workflow_file     TEXT NOT NULL DEFAULT '',
	workflow_hash     TEXT NOT NULL DEFAULT '',
	workspace         TEXT NOT NULL DEFAULT '',
	inputs_json       TEXT NOT NULL DEFAULT '{}',
	status            TEXT NOT NULL,
	error             TEXT NOT NULL DEFAULT '',
	outputs_json      TEXT NOT NULL DEFAULT '{}',
	started_at        TEXT NOT NULL,
	ended_at          TEXT,
	duration_ms       INTEGER NOT NULL DEFAULT 0,
	resumed_from      TEXT,
	owner_pid         INTEGER NOT NULL DEFAULT 0,
	owner_start_ticks INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX runs_by_start    ON runs (started_at DESC, id DESC);
CREATE INDEX runs_by_status   ON runs (status, started_at DESC, id DESC);
CREATE INDEX runs_by_workflow ON runs (workflow_name, started_at DESC, id DESC);
CREATE INDEX runs_by_batch    ON runs (batch_id, batch_line);

CREATE TABLE steps (
	run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	step_id     TEXT NOT NULL,
	ord         INTEGER NOT NULL DEFAULT 0,
	status      TEXT NOT NULL,
	stop_reason TEXT NOT NULL DEFAULT '',
	output_json TEXT NOT NULL DEFAULT 'null',
	error       TEXT NOT NULL DEFAULT '',
	attempts    INTEGER NOT NULL DEFAULT 0,
	session_id  TEXT NOT NULL DEFAULT '',
	stderr_tail TEXT NOT NULL DEFAULT '',
	started_at  TEXT,
	ended_at    TEXT,
	duration_ms INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, step_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE permissions (
	run_id       TEXT NOT NULL,
	step_id      TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	tool_call_id TEXT NOT NULL DEFAULT '',
	kind         TEXT NOT NULL DEFAULT '',
	title        TEXT NOT NULL DEFAULT '',
	decision     TEXT NOT NULL DEFAULT '',
	outcome      TEXT NOT NULL DEFAULT '',
	option_id    TEXT NOT NULL DEFAULT '',
	policy       TEXT NOT NULL DEFAULT '',
	rule         TEXT NOT NULL DEFAULT '',
	reason       TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, step_id, seq),
	FOREIGN KEY (run_id, step_id) REFERENCES steps(run_id, step_id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- seq is the rowid: global insertion order, which is each run's event order
-- too, also across a resume or two processes sharing the store.
CREATE TABLE events (
	seq         INTEGER PRIMARY KEY,
	run_id      TEXT NOT NULL,
	step_id     TEXT NOT NULL DEFAULT '',
	type        TEXT NOT NULL,
	time        TEXT NOT NULL,
	fields_json TEXT NOT NULL DEFAULT '{}'
) STRICT;

CREATE INDEX events_by_run ON events (run_id, seq);

-- Every agent process a step spawned, until it is known gone. A row whose
-- ended_at is NULL after its run ended (acpflow was killed) names a process
-- that resume must make sure is dead; start_ticks (field 22 of
-- /proc/PID/stat) tells it from a later process that reused the pid.
CREATE TABLE children (
	id          INTEGER PRIMARY KEY,
	run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	step_id     TEXT NOT NULL,
	pid         INTEGER NOT NULL,
	pgid        INTEGER NOT NULL,
	start_ticks INTEGER NOT NULL,
	started_at  TEXT NOT NULL,
	ended_at    TEXT
) STRICT;

CREATE INDEX children_by_run ON children (run_id, pid);
`,
	// 2: a step's last message alone (final); what a permission's policy saw
	// (the command line and the locations, as JSON).
	`
ALTER TABLE steps ADD COLUMN final_json TEXT NOT NULL DEFAULT 'null';
ALTER TABLE permissions ADD COLUMN command TEXT NOT NULL DEFAULT '';
ALTER TABLE permissions ADD COLUMN locations_json TEXT NOT NULL DEFAULT '[]';
`,
	// 3: who owns a batch (as runs have: pid and start time), so that a
	// resume claims it atomically and a live batch is refused; whether every
	// input line was read and stored (a batch streams its lines); why a line
	// is not an object of inputs (too long, not JSON, ...), so resume fails it
	// again instead of running it with defaults. Batches recorded before were
	// stored whole at their start: inputs_complete defaults to 1.
	`
ALTER TABLE batches ADD COLUMN owner_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN owner_start_ticks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN inputs_complete INTEGER NOT NULL DEFAULT 1;
ALTER TABLE batch_inputs ADD COLUMN error TEXT NOT NULL DEFAULT '';
`,
	// 4: every ACP message of each step attempt (transcript.Step), as one
	// JSON array, redacted and bounded when recorded; item is the for-each
	// element (-1: not one).
	`
CREATE TABLE transcripts (
	run_id        TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	step_id       TEXT NOT NULL,
	item          INTEGER NOT NULL,
	attempt       INTEGER NOT NULL,
	agent         TEXT NOT NULL DEFAULT '',
	truncated     INTEGER NOT NULL DEFAULT 0,
	messages_json TEXT NOT NULL,
	PRIMARY KEY (run_id, step_id, item, attempt)
) STRICT, WITHOUT ROWID;
`,
	// 5: the env decision of the attempt's spawn (transcript.Spawn) as
	// JSON, names only; NULL when the attempt asked no env policy (it
	// continued a session on a live process) and for every attempt
	// recorded before.
	`
ALTER TABLE transcripts ADD COLUMN spawn_json TEXT;
`,
	// 6: usage and budgets (issue 15): what each step's agent reported of
	// its tokens and cost, and a run's sums, as JSON (steps.Usage,
	// engine.RunUsage; NULL: nothing reported, which is unknown, not
	// zero); a batch's --budget as given and why the batch stopped early.
	`
ALTER TABLE steps ADD COLUMN usage_json TEXT;
ALTER TABLE runs ADD COLUMN usage_json TEXT;
ALTER TABLE batches ADD COLUMN budget TEXT NOT NULL DEFAULT '';
ALTER TABLE batches ADD COLUMN error TEXT NOT NULL DEFAULT '';
`,
	// 7: the value of a step with an output schema (steps.ID.json): its
	// final message parsed as JSON, matching the schema; 'null' for any
	// other step. Kept as produced, so that resume and show need neither the
	// workflow's schema nor a second reading of the final message.
	`
ALTER TABLE steps ADD COLUMN value_json TEXT NOT NULL DEFAULT 'null';
`,
	// 8: which layer of policy decided a permission (outer or workflow).
	// Every record before it was the workflow's: there was no outer policy.
	`
ALTER TABLE permissions ADD COLUMN layer TEXT NOT NULL DEFAULT 'workflow';
`,
	// 9: for a tool call that ran without asking (decision 'unasked'),
	// what the policy would have decided; '' for every other record.
	`
ALTER TABLE permissions ADD COLUMN would TEXT NOT NULL DEFAULT '';
`,
	// 10: what a step's sandbox enforced (steps.SandboxRecord) as JSON;
	// NULL: the step had no sandbox.
	`
ALTER TABLE steps ADD COLUMN sandbox_json TEXT;
`,
	// 11: how a shell step's command exited (engine.StepResult.ExitCode);
	// NULL for every other step.
	`
ALTER TABLE steps ADD COLUMN exit_code INTEGER;
`,
	// 12: the git worktrees of a run (isolation: worktree, issue 27): its
	// own and its steps', as a JSON list of engine.Worktree; NULL: none.
	// Written when each is made, so that a crash leaves a record that
	// resume and `acpflow worktrees --prune` find.
	`
ALTER TABLE runs ADD COLUMN worktrees_json TEXT;
CREATE INDEX runs_with_worktrees ON runs (started_at) WHERE worktrees_json IS NOT NULL;
`,
	// 13: the model side of a step attempt whose gateway recorded
	// (transcript.Model: the agent that ran and its model exchanges, keys
	// removed) as JSON, which `builtin: replay` plays against the real
	// agent; NULL for every other attempt.
	`
ALTER TABLE transcripts ADD COLUMN model_json TEXT;
`,
	// 14: the id of the OpenTelemetry trace a run exported (docs/traces.md,
	// issue 39), 32 hex digits; '' when it exported none. A resume's
	// export replaces it.
	`
ALTER TABLE runs ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
`,
	// 15: approvals (issue 38): every ask put to people, pending until the
	// first answer (or its ask-timeout), so that another process (acpflow
	// ui, acpflow approve) sees and answers it; request_json is the
	// question as shown (scrubbed); answer_key signs its answer links;
	// late_json the answers that came after the first. A permission
	// record says who answered its ask, when, and under which approval.
	`
CREATE TABLE approvals (
	id           TEXT PRIMARY KEY,
	run_id       TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	step_id      TEXT NOT NULL,
	workflow     TEXT NOT NULL DEFAULT '',
	request_json TEXT NOT NULL,
	fallback     TEXT NOT NULL DEFAULT '',
	answer_key   TEXT NOT NULL,
	status       TEXT NOT NULL,
	created_at   TEXT NOT NULL,
	deadline     TEXT NOT NULL,
	decision     TEXT NOT NULL DEFAULT '',
	option_id    TEXT NOT NULL DEFAULT '',
	for_run      INTEGER NOT NULL DEFAULT 0,
	answered_by  TEXT NOT NULL DEFAULT '',
	answered_at  TEXT,
	late_json    TEXT NOT NULL DEFAULT '[]'
) STRICT;
CREATE INDEX approvals_pending ON approvals (created_at) WHERE status = 'pending';
CREATE INDEX approvals_by_run ON approvals (run_id, created_at);
ALTER TABLE permissions ADD COLUMN ask TEXT NOT NULL DEFAULT '';
ALTER TABLE permissions ADD COLUMN approval_id TEXT NOT NULL DEFAULT '';
ALTER TABLE permissions ADD COLUMN answered_by TEXT NOT NULL DEFAULT '';
ALTER TABLE permissions ADD COLUMN answered_at TEXT NOT NULL DEFAULT '';
`,
	// 16: an unasked call's final status as the agent reported it
	// (completed, or failed: a call that started and failed is recorded
	// all the same, issue 40); '' for every other record.
	`
ALTER TABLE permissions ADD COLUMN status TEXT NOT NULL DEFAULT '';
`,
}
