package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
)

// Step is one step of a run, as recorded at its start and again at its end.
type Step struct {
	RunID  string
	StepID string
	// Ord is the step's position in the workflow file. The store keeps no
	// workflow, so this is what GetRun orders a run's steps by.
	Ord        int
	Status     engine.Status
	StopReason string
	// Output is a string, or a list of them for a for-each step. It is
	// stored as JSON, so it reads back as a string or a []any.
	Output any
	// Final is the step's last agent message: a string, or a list of them
	// for a for-each step, like Output.
	Final any
	// JSON is the value of a step with an output schema that succeeded
	// (engine.StepResult.JSON), as JSON decodes it; nil for any other step.
	JSON        any
	Error       string
	Attempts    int
	SessionID   string
	Stderr      string // the kept tail of the agent's stderr
	StartedAt   time.Time
	EndedAt     time.Time // zero while running
	DurationMS  int64
	Permissions []Permission // every decision of every attempt, in order
	// Usage is what the agent reported of the step's tokens and cost;
	// nil when it reported nothing (unknown, not zero).
	Usage *steps.Usage
	// Sandbox is what the step's sandbox enforced; nil: none.
	Sandbox *steps.SandboxRecord
	// ExitCode is how a shell step's command exited; nil for any other step.
	ExitCode *int
}

// Permission is one permission request a step's agent made and how it was
// answered (docs/results.md "permissions").
type Permission struct {
	ToolCallID string
	Kind       string
	Title      string
	Command    string     // the command line the policy saw
	Locations  []Location // the files the policy saw
	Decision   string     // allow, allow_always, reject, reject_always, cancel; unasked
	Would      string     // an unasked call's: what the policy would have decided
	Status     string     // an unasked call's: completed or failed, as the agent reported it
	Outcome    string     // selected or cancelled; "" for an unasked call
	OptionID   string     // empty when cancelled
	Layer      string     // outer or workflow (every record of a store from before layers: workflow)
	Policy     string     // workflow, step or default; an outer decision's file
	Rule       string
	Reason     string
	// Ask, Approval, AnsweredBy and AnsweredAt say who answered an ask
	// (policies.PermissionRecord); "" for any other record.
	Ask, Approval, AnsweredBy, AnsweredAt string
}

// Location is one file a permission's tool call would reach.
type Location struct {
	Path        string `json:"path"`
	Line        int    `json:"line"`
	InWorkspace bool   `json:"in_workspace"`
}

// SaveStep records a step's whole state, replacing what was recorded for it
// before, permissions included. The engine calls it when a step starts and
// when it ends; when it returns the step is committed, so no step that
// completed is lost if acpflow is killed after it.
func (s *Store) SaveStep(ctx context.Context, st Step) error {
	ctx = durable(ctx)
	if err := validStepStatus(st.Status); err != nil {
		return err
	}
	out, err := jsonArg("output", st.Output)
	if err != nil {
		return fmt.Errorf("store: step %s of run %s: %w", st.StepID, st.RunID, err)
	}
	final, err := jsonArg("final", st.Final)
	if err != nil {
		return fmt.Errorf("store: step %s of run %s: %w", st.StepID, st.RunID, err)
	}
	value, err := jsonArg("json", st.JSON)
	if err != nil {
		return fmt.Errorf("store: step %s of run %s: %w", st.StepID, st.RunID, err)
	}
	usage, err := usageArg(st.Usage)
	if err != nil {
		return fmt.Errorf("store: step %s of run %s: %w", st.StepID, st.RunID, err)
	}
	sandbox, err := usageArg(st.Sandbox)
	if err != nil {
		return fmt.Errorf("store: step %s of run %s: %w", st.StepID, st.RunID, err)
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, s.stmts.upsertStep).ExecContext(ctx,
			st.RunID, st.StepID, st.Ord, string(st.Status), st.StopReason, out, final, value, st.Error, st.Attempts, st.SessionID, st.Stderr,
			timeArg(st.StartedAt), timeArg(st.EndedAt), st.DurationMS, usage, sandbox, exitCodeArg(st.ExitCode))
		if err != nil {
			return fmt.Errorf("store: save step %s of run %s: %w", st.StepID, st.RunID, err)
		}
		if _, err := tx.StmtContext(ctx, s.stmts.deletePermissions).ExecContext(ctx, st.RunID, st.StepID); err != nil {
			return fmt.Errorf("store: save step %s of run %s: %w", st.StepID, st.RunID, err)
		}
		ins := tx.StmtContext(ctx, s.stmts.insertPermission)
		for i, p := range st.Permissions {
			locs := p.Locations
			if locs == nil {
				locs = []Location{}
			}
			locations, err := jsonArg("locations", locs)
			if err != nil {
				return fmt.Errorf("store: save step %s of run %s: permission %d: %w", st.StepID, st.RunID, i, err)
			}
			_, err = ins.ExecContext(ctx,
				st.RunID, st.StepID, i, p.ToolCallID, p.Kind, p.Title, p.Command, locations, p.Decision, p.Would, p.Status, p.Outcome, p.OptionID, p.Layer, p.Policy, p.Rule, p.Reason,
				p.Ask, p.Approval, p.AnsweredBy, p.AnsweredAt)
			if err != nil {
				return fmt.Errorf("store: save step %s of run %s: permission %d: %w", st.StepID, st.RunID, i, err)
			}
		}
		return nil
	})
}

// stepUsage is steps.Usage where a variable named steps hides the package.
type stepUsage = steps.Usage

// stepSandbox is steps.SandboxRecord, named where a variable called steps hides the package.
type stepSandbox = steps.SandboxRecord

// usageArg is a usage as its column holds it: JSON, or NULL for none.
func usageArg[U any](u *U) (any, error) {
	if u == nil {
		return nil, nil
	}
	b, err := json.Marshal(u)
	if err != nil {
		return nil, fmt.Errorf("encode usage: %w", err)
	}
	return string(b), nil
}

// exitCodeArg is an exit code as a column: NULL for none.
func exitCodeArg(code *int) any {
	if code == nil {
		return nil
	}
	return *code
}

// parseUsage reads a usage column back: nil for NULL.
func parseUsage[U any](col sql.NullString) (*U, error) {
	if !col.Valid {
		return nil, nil
	}
	u := new(U)
	if err := json.Unmarshal([]byte(col.String), u); err != nil {
		return nil, fmt.Errorf("decode usage: %w", err)
	}
	return u, nil
}
