package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/store"
)

// ApprovalPoll is how often a step waiting for a person asks its run's
// workflow whether the approval was answered (ApprovalsQuery): the most
// an answer waits to reach the agent, besides the query's own time.
const ApprovalPoll = 500 * time.Millisecond

// Querier asks a workflow execution a query and decodes its answer into
// out; the Temporal client's QueryWorkflow is one (see queryWith).
type Querier func(ctx context.Context, workflowID, runID, name string, out any, args ...any) error

// runAsker is the asker of one attempt on a worker: each ask becomes an
// approval the run's workflow keeps (ApprovalOpenSignal), and the step
// waits, its activity heartbeating, until the workflow says it was
// answered or timed out. A worker that dies leaves the approval pending
// in the workflow; the attempt, run again by another worker, asks the
// same and finds it there (approvalID), answered or not.
type runAsker struct {
	workflow   string // the acpflow workflow's name
	task       Task
	wid, runID string // the run's workflow execution
	signal     Signaller
	query      Querier

	connect   sync.Once
	connectTo func() // sets signal and query where they are nil

	mu   sync.Mutex
	seen map[string]int // how many times this attempt asked each request
}

// asker is the asker of attempt t's activity (ctx). The worker's client
// signals and queries unless a.Signal and a.Query say otherwise; it is
// looked up at the first ask.
func (a *Activities) asker(ctx context.Context, t Task, workflowName string) *runAsker {
	run := activity.GetInfo(ctx).WorkflowExecution
	k := &runAsker{workflow: workflowName, task: t, wid: run.ID, runID: run.RunID, signal: a.Signal, query: a.Query, seen: map[string]int{}}
	k.connectTo = func() {
		if k.signal == nil {
			k.signal = activity.GetClient(ctx).SignalWorkflow
		}
		if k.query == nil {
			k.query = queryWith(activity.GetClient(ctx).QueryWorkflow)
		}
	}
	return k
}

// queryWith is a Querier of the Temporal client's QueryWorkflow.
func queryWith(q func(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)) Querier {
	return func(ctx context.Context, workflowID, runID, name string, out any, args ...any) error {
		v, err := q(ctx, workflowID, runID, name, args...)
		if err != nil {
			return err
		}
		return v.Get(out)
	}
}

// Ask implements policies.Asker.
func (k *runAsker) Ask(ctx context.Context, q *policies.Question) (policies.Reply, error) {
	shown := q.Shown
	if shown == nil {
		shown = q.Request
	}
	k.connect.Do(k.connectTo)
	list, err := k.approvals(ctx)
	if err != nil {
		return policies.Reply{}, err
	}
	if g, ok := granted(list, q.Request, shown); ok {
		return g, nil
	}
	id := k.approvalID(shown)
	a := findApproval(list, id)
	if a == nil {
		a = k.newApproval(id, q, shown)
		if err := k.signal(ctx, k.wid, k.runID, ApprovalOpenSignal, *a); err != nil {
			return policies.Reply{}, fmt.Errorf("the request could not be put to the run's workflow: %w", err)
		}
	}
	if q.Pending != nil {
		q.Pending(id, []string{policies.ByCLI})
	}
	return k.await(ctx, *a)
}

// approvalID is the id of the approval a request is put under: the same
// for the same request of the same attempt, asked for the same n-th time,
// so that the attempt run again after its worker died finds it. It is
// derived from the request as shown (scrubbed), never a secret.
func (k *runAsker) approvalID(shown *policies.PermissionRequest) string {
	t := k.task
	index := -1
	if t.Element != nil {
		index = t.Element.Index
	}
	what := shown.Tool.Kind + "\x00" + runs.GrantScope(shown)
	k.mu.Lock()
	k.seen[what]++
	n := k.seen[what]
	k.mu.Unlock()
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%s\x00%d", t.RunID, t.Step, index, t.Attempt, what, n)
	return "ap-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// newApproval is the pending approval of q under id.
func (k *runAsker) newApproval(id string, q *policies.Question, shown *policies.PermissionRequest) *Approval {
	now := time.Now().UTC()
	a := &Approval{Attempt: k.task.Attempt, Approval: store.Approval{
		ID: id, RunID: k.task.RunID, StepID: k.task.Step, Workflow: k.workflow, Request: shown, Rule: q.Rule, Reason: q.Reason,
		Fallback: string(q.Fallback), Status: store.ApprovalPending, CreatedAt: now, Deadline: now.Add(q.Timeout),
	}}
	if k.task.Element != nil {
		index := k.task.Element.Index
		a.Index = &index
	}
	return a
}

// await waits until the workflow says a was answered or timed out. When
// ctx ends by the ask-timeout, the workflow is told (an answer it took
// first is still the answer); when it ends otherwise (the turn ended, the
// worker stops) the approval stays pending: a worker that runs the attempt
// again takes it up.
func (k *runAsker) await(ctx context.Context, a Approval) (policies.Reply, error) {
	tick := time.NewTicker(ApprovalPoll)
	defer tick.Stop()
	for {
		switch a.Status {
		case store.ApprovalAnswered:
			return replyOf(a, false), nil
		case store.ApprovalTimedOut:
			return policies.Reply{Approval: a.ID}, policies.ErrAskTimedOut
		case store.ApprovalWithdrawn:
			return policies.Reply{Approval: a.ID}, fmt.Errorf("approval %s was withdrawn", a.ID)
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), policies.ErrAskTimedOut) {
				return k.timedOut(ctx, a)
			}
			return policies.Reply{Approval: a.ID}, ctx.Err()
		case <-tick.C:
		}
		list, err := k.approvals(ctx)
		if got := findApproval(list, a.ID); err == nil && got != nil {
			a = *got
		}
	}
}

// timedOut tells the workflow that a's ask-timeout ended on the worker and
// takes what the workflow then says: an answer it had taken, else the
// ask-timeout's end.
func (k *runAsker) timedOut(ctx context.Context, a Approval) (policies.Reply, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := k.signal(wctx, k.wid, k.runID, ApprovalTimeoutSignal, a.ID); err == nil {
		for wctx.Err() == nil {
			list, err := k.approvals(wctx)
			got := findApproval(list, a.ID)
			if err == nil && got != nil && got.Status == store.ApprovalAnswered {
				return replyOf(*got, false), nil
			}
			if err == nil && got != nil && got.Status != store.ApprovalPending {
				break
			}
			time.Sleep(ApprovalPoll / 5)
		}
	}
	return policies.Reply{Approval: a.ID}, ctx.Err()
}

// approvals are the run's approvals, as its workflow keeps them.
func (k *runAsker) approvals(ctx context.Context) ([]Approval, error) {
	var list []Approval
	if err := k.query(ctx, k.wid, k.runID, ApprovalsQuery, &list); err != nil {
		return nil, fmt.Errorf("the run's approvals could not be read from its workflow: %w", err)
	}
	return list, nil
}

func findApproval(list []Approval, id string) *Approval {
	for i := range list {
		if list[i].ID == id {
			return &list[i]
		}
	}
	return nil
}

// granted is the answer given for the rest of the run that answers req,
// if there is one: an approval of the run answered --for run, of req's
// tool kind and scope (runs.GrantScope), as on the local backend. A
// request whose scope reads otherwise once scrubbed is not granted: two
// such could read the same.
func granted(list []Approval, req, shown *policies.PermissionRequest) (policies.Reply, bool) {
	scope := runs.GrantScope(shown)
	if scope != runs.GrantScope(req) {
		return policies.Reply{}, false
	}
	for _, a := range list {
		if a.ForRun && a.Status == store.ApprovalAnswered && a.Request != nil && a.RunID == req.RunID &&
			a.Request.Tool.Kind == shown.Tool.Kind && runs.GrantScope(a.Request) == scope {
			return replyOf(a, true), true
		}
	}
	return policies.Reply{}, false
}

// replyOf is the answer recorded of a; grant: given to a repeat of its
// request, for the rest of the run.
func replyOf(a Approval, grant bool) policies.Reply {
	return policies.Reply{Decision: policies.Decision(a.Decision), By: a.AnsweredBy, At: a.AnsweredAt, Approval: a.ID, Grant: grant}
}
