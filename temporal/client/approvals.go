package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/temporal/flow"
)

// runningRuns is the visibility query of the acpflow runs still running.
const runningRuns = "WorkflowType = '" + flow.WorkflowName + "' AND ExecutionStatus = 'Running'"

// Approvals are the approvals of the acpflow runs running on Temporal
// (pending or not), each run's oldest first; with runID, that run's only,
// running or ended. Each run's workflow answers for its own
// (flow.ApprovalsQuery), so a worker must be polling its task queue.
func Approvals(ctx context.Context, cl client.Client, runID string) ([]flow.Approval, error) {
	var ids []string
	if runID != "" {
		ids = []string{WorkflowID(runID)}
	} else {
		var err error
		if ids, err = running(ctx, cl); err != nil {
			return nil, err
		}
	}
	var out []flow.Approval
	for _, id := range ids {
		list, err := approvalsOf(ctx, cl, id)
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound) && runID != "":
			return nil, fmt.Errorf("no run %s on Temporal: %w", runID, err)
		case errors.As(err, &notFound): // ended since it was listed
		case err != nil:
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

// running lists the workflow ids of the acpflow runs still running.
func running(ctx context.Context, cl client.Client) ([]string, error) {
	var ids []string
	var next []byte
	for {
		resp, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: runningRuns, NextPageToken: next})
		if err != nil {
			return nil, fmt.Errorf("listing the running acpflow runs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if next = resp.GetNextPageToken(); len(next) == 0 {
			return ids, nil
		}
	}
}

// approvalsOf asks one run's workflow its approvals.
func approvalsOf(ctx context.Context, cl client.Client, workflowID string) ([]flow.Approval, error) {
	v, err := cl.QueryWorkflow(ctx, workflowID, "", flow.ApprovalsQuery)
	if err != nil {
		return nil, fmt.Errorf("the approvals of %s (is a worker polling its task queue?): %w", workflowID, err)
	}
	var list []flow.Approval
	if err := v.Get(&list); err != nil {
		return nil, fmt.Errorf("the approvals of %s: %w", workflowID, err)
	}
	return list, nil
}

// answerSeen bounds how long Approve waits for the run's workflow to show
// the answer it signalled: a workflow task, normally milliseconds.
const answerSeen = 30 * time.Second

// Approve answers approval id, of a run still running, with decision
// (allow or reject; for the rest of the run when forRun) as by
// (policies.ByCLI): it signals the run's workflow and returns the
// approval once the workflow shows the answer. The first answer wins; a
// later one is recorded as late and refused with a *store.LateError, as
// on the local backend.
func Approve(ctx context.Context, cl client.Client, id string, decision policies.Decision, forRun bool, by string) (flow.Approval, error) {
	if decision != policies.Allow && decision != policies.Reject {
		return flow.Approval{}, fmt.Errorf("answer %q: want allow or reject", decision)
	}
	list, err := Approvals(ctx, cl, "")
	if err != nil {
		return flow.Approval{}, err
	}
	var a *flow.Approval
	for i := range list {
		if list[i].ID == id {
			a = &list[i]
		}
	}
	if a == nil {
		return flow.Approval{}, fmt.Errorf("no approval %q in the runs running on Temporal (acpflow-temporal approvals lists the pending ones): %w", cut(id, 64), store.ErrNotFound)
	}
	ans := flow.Answer{ID: id, Decision: decision, ForRun: forRun, By: by, At: time.Now().UTC()}
	wid := WorkflowID(a.RunID)
	if err := cl.SignalWorkflow(ctx, wid, "", flow.ApprovalAnswerSignal, ans); err != nil {
		return flow.Approval{}, fmt.Errorf("approval %s: answering run %s: %w", id, a.RunID, err)
	}
	return answered(ctx, cl, wid, ans)
}

// answered waits until the workflow shows ans, as the approval's answer
// or as a late one.
func answered(ctx context.Context, cl client.Client, wid string, ans flow.Answer) (flow.Approval, error) {
	deadline := time.Now().Add(answerSeen)
	for {
		list, err := approvalsOf(ctx, cl, wid)
		if err != nil {
			return flow.Approval{}, err
		}
		for _, a := range list {
			if a.ID != ans.ID {
				continue
			}
			if a.Status == store.ApprovalAnswered && a.AnsweredBy == ans.By && a.AnsweredAt.Equal(ans.At) {
				return a, nil
			}
			late := a.Status != store.ApprovalPending && len(a.Late) >= flow.MaxLate // refused, no longer recorded
			for _, l := range a.Late {
				late = late || l.By == ans.By && l.At.Equal(ans.At)
			}
			if late {
				return a, &store.LateError{Approval: a.Approval}
			}
		}
		if time.Now().After(deadline) {
			return flow.Approval{}, fmt.Errorf("approval %s: the answer was sent, but run %s's workflow did not show it within %s", ans.ID, wid, answerSeen)
		}
		select {
		case <-ctx.Done():
			return flow.Approval{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cut bounds an id taken from a command line before an error quotes it.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
