package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acpflow/acpflow/policies"
)

// Where an approval is (Approval.Status).
const (
	ApprovalPending   = "pending"   // waiting for its first answer
	ApprovalAnswered  = "answered"  // the first answer is recorded
	ApprovalTimedOut  = "timed_out" // its ask-timeout passed: the ask-fallback decided
	ApprovalWithdrawn = "withdrawn" // the step stopped waiting (its turn ended, the run was interrupted)
)

// Approval is one ask put to people (docs/policies.md#approvals): the
// request as they are shown it, and its first answer once there is one.
type Approval struct {
	ID       string
	RunID    string
	StepID   string
	Workflow string
	// Request is the permission request as shown outside the run
	// (scrubbed); Rule and Reason are the policy's that said ask.
	Request  *policies.PermissionRequest
	Rule     string
	Reason   string
	Fallback string // the ask-fallback that decides at Deadline
	// AnswerKey signs the approval's answer links (never shown).
	AnswerKey string
	Status    string
	CreatedAt time.Time
	Deadline  time.Time
	// The first answer: Decision allow or reject (or the decision of the
	// option the terminal picked, OptionID), ForRun for the rest of the
	// run, who gave it and when.
	Decision   string
	OptionID   string
	ForRun     bool
	AnsweredBy string
	AnsweredAt time.Time
	// Late are the answers refused because one came first.
	Late []LateAnswer
}

// maxLate bounds the late answers an approval keeps: an answer link can
// be replayed by anyone who has it, and each replay would otherwise grow
// the row (and the cost of the next one) for good. Later ones are still
// refused, no longer recorded.
const maxLate = 32

// LateAnswer is an answer that came after the first, recorded and refused.
type LateAnswer struct {
	Decision string    `json:"decision"`
	ForRun   bool      `json:"for_run,omitempty"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// Answer is an answer to an approval.
type Answer struct {
	Decision string // allow or reject, or an option's decision (OptionID)
	OptionID string // the terminal's pick; "" for the others
	ForRun   bool
	By       string // policies.ByTerminal, ByUI, ByWebhook, ByCLI
	At       time.Time
}

// approvalRequest is what request_json holds.
type approvalRequest struct {
	Request *policies.PermissionRequest `json:"request"`
	Rule    string                      `json:"rule"`
	Reason  string                      `json:"reason"`
}

// LateError is AnswerApproval's error for an approval answered, timed out
// or withdrawn before: the answer was recorded as late and refused.
type LateError struct{ Approval Approval }

func (e *LateError) Error() string {
	a := e.Approval
	if a.Status == ApprovalAnswered {
		return fmt.Sprintf("approval %s was answered already (%s by %s at %s): this answer is recorded as late and has no effect",
			a.ID, a.Decision, a.AnsweredBy, a.AnsweredAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("approval %s is no longer pending (%s): this answer is recorded as late and has no effect", a.ID, strings.ReplaceAll(a.Status, "_", " "))
}

// CreateApproval records a pending approval.
func (s *Store) CreateApproval(ctx context.Context, a Approval) error {
	ctx = durable(ctx)
	req, err := json.Marshal(approvalRequest{Request: a.Request, Rule: a.Rule, Reason: a.Reason})
	if err != nil {
		return fmt.Errorf("store: approval %s: encode request: %w", a.ID, err)
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO approvals (id, run_id, step_id, workflow, request_json, fallback, answer_key, status, created_at, deadline)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, a.ID, a.RunID, a.StepID, a.Workflow, string(req), a.Fallback, a.AnswerKey,
			ApprovalPending, timeArg(a.CreatedAt), timeArg(a.Deadline))
		if err != nil {
			return fmt.Errorf("store: record approval %s of run %s: %w", a.ID, a.RunID, err)
		}
		return nil
	})
}

// AnswerApproval records ans as the approval's answer if it is still
// pending, and returns the approval as it then is. Of several answers, by
// any processes, exactly one wins: the status is read and changed in one
// write transaction. Any other is appended to the approval's late answers
// (the first maxLate of them) and refused with a *LateError.
func (s *Store) AnswerApproval(ctx context.Context, id string, ans Answer) (Approval, error) {
	ctx = durable(ctx)
	var out Approval
	var late *LateError
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		late = nil
		a, err := scanApproval(tx.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("no approval %q in the store: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if a.Status != ApprovalPending {
			if len(a.Late) < maxLate {
				a.Late = append(a.Late, LateAnswer{Decision: ans.Decision, ForRun: ans.ForRun, By: ans.By, At: ans.At.UTC()})
				lateJSON, _ := json.Marshal(a.Late)
				if _, err := tx.ExecContext(ctx, `UPDATE approvals SET late_json = ? WHERE id = ?`, string(lateJSON), id); err != nil {
					return fmt.Errorf("store: approval %s: %w", id, err)
				}
			}
			out, late = a, &LateError{Approval: a}
			return nil
		}
		a.Status, a.Decision, a.OptionID, a.ForRun, a.AnsweredBy, a.AnsweredAt = ApprovalAnswered, ans.Decision, ans.OptionID, ans.ForRun, ans.By, ans.At
		_, err = tx.ExecContext(ctx, `UPDATE approvals SET status = ?, decision = ?, option_id = ?, for_run = ?, answered_by = ?, answered_at = ? WHERE id = ?`,
			a.Status, a.Decision, a.OptionID, a.ForRun, a.AnsweredBy, timeArg(a.AnsweredAt), id)
		if err != nil {
			return fmt.Errorf("store: answer approval %s: %w", id, err)
		}
		out = a
		return nil
	})
	if err == nil && late != nil {
		return out, late
	}
	return out, err
}

// CloseApproval ends a pending approval unanswered, as status
// (ApprovalTimedOut, ApprovalWithdrawn), and returns it as it then is: an
// approval answered meanwhile keeps its answer, which the caller then
// takes.
func (s *Store) CloseApproval(ctx context.Context, id, status string) (Approval, error) {
	ctx = durable(ctx)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE approvals SET status = ? WHERE id = ? AND status = ?`, status, id, ApprovalPending)
		return err
	})
	if err != nil {
		return Approval{}, fmt.Errorf("store: close approval %s: %w", id, err)
	}
	return s.GetApproval(ctx, id)
}

// GetApproval reads one approval by its id.
func (s *Store) GetApproval(ctx context.Context, id string) (Approval, error) {
	if err := s.Ready(ctx); err != nil {
		return Approval{}, err
	}
	a, err := scanApproval(s.r.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("no approval %q in the store (acpflow approvals lists the pending ones): %w", id, ErrNotFound)
	}
	return a, err
}

// PendingApprovals lists the approvals waiting for an answer, across the
// store's runs, oldest first. One past its deadline is left out: the
// process that asked was killed before it could record the timeout, and
// no one waits for its answer (a run's status reads so too, waitingStatus).
func (s *Store) PendingApprovals(ctx context.Context) ([]Approval, error) {
	return s.queryApprovals(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE status = ? AND deadline > `+sqlNow+` ORDER BY created_at, id`, ApprovalPending)
}

// sqlNow is SQLite's now as the store writes times (timeArg), to the
// millisecond: what a deadline is compared with.
const sqlNow = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`

// ApprovalsOfRun lists a run's approvals, oldest first.
func (s *Store) ApprovalsOfRun(ctx context.Context, runID string) ([]Approval, error) {
	return s.queryApprovals(ctx, approvalsOfRun, runID)
}

// approvalsOfRun selects a run's approvals, oldest first (ApprovalsOfRun,
// GetRun).
const approvalsOfRun = `SELECT ` + approvalColumns + ` FROM approvals WHERE run_id = ? ORDER BY created_at, id`

func (s *Store) queryApprovals(ctx context.Context, q string, args ...any) ([]Approval, error) {
	return queryAll(ctx, s, "approvals", q, scanApproval, args...)
}

const approvalColumns = `id, run_id, step_id, workflow, request_json, fallback, answer_key, status, created_at, deadline,
	decision, option_id, for_run, answered_by, answered_at, late_json`

func scanApproval(sc scanner) (Approval, error) {
	var a Approval
	var req, late string
	var created, deadline, answered sql.NullString
	err := sc.Scan(&a.ID, &a.RunID, &a.StepID, &a.Workflow, &req, &a.Fallback, &a.AnswerKey, &a.Status, &created, &deadline,
		&a.Decision, &a.OptionID, &a.ForRun, &a.AnsweredBy, &answered, &late)
	if errors.Is(err, sql.ErrNoRows) {
		return a, err
	}
	if err != nil {
		return a, fmt.Errorf("store: read approval: %w", err)
	}
	var r approvalRequest
	if err := json.Unmarshal([]byte(req), &r); err != nil {
		return a, fmt.Errorf("store: approval %s: decode request: %w", a.ID, err)
	}
	a.Request, a.Rule, a.Reason = r.Request, r.Rule, r.Reason
	if err := json.Unmarshal([]byte(late), &a.Late); err != nil {
		return a, fmt.Errorf("store: approval %s: decode late answers: %w", a.ID, err)
	}
	for _, t := range []struct {
		dst *time.Time
		col sql.NullString
	}{{&a.CreatedAt, created}, {&a.Deadline, deadline}, {&a.AnsweredAt, answered}} {
		if *t.dst, err = parseTime(t.col); err != nil {
			return a, err
		}
	}
	return a, nil
}
