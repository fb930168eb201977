package flow

import (
	"sync"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
)

// The signals and the query of a run's approvals (docs/temporal.md#approvals):
// the run's workflow keeps them, so that a pending one outlives the worker
// whose step asked.
const (
	// ApprovalOpenSignal carries an Approval an attempt's activity puts
	// to people; one the run has already (the attempt run again by another
	// worker, asking the same) changes nothing.
	ApprovalOpenSignal = "acpflow.approval-open"
	// ApprovalAnswerSignal carries an Answer: the first one of an
	// approval wins, any later one is recorded as late.
	ApprovalAnswerSignal = "acpflow.approval-answer"
	// ApprovalTimeoutSignal carries the id of an approval whose
	// ask-timeout ended on the worker: it is timed out unless an answer
	// came first (the workflow's own timer says the same a moment later).
	ApprovalTimeoutSignal = "acpflow.approval-timeout"
	// ApprovalsQuery answers the run's approvals ([]Approval), oldest
	// first, pending or not.
	ApprovalsQuery = "acpflow.approvals"
)

// Approval is an ask of a run's step put to people, as the run's workflow
// keeps it: the run store's record of it (what `acpflow approvals` and
// `show --json` print), with the attempt that asked. Its AnswerKey is
// always empty: no answer link reaches Temporal.
type Approval struct {
	store.Approval
	Index   *int `json:",omitempty"` // the for-each element's; nil: none
	Attempt int
}

// Answer is a person's answer to an approval (ApprovalAnswerSignal).
type Answer struct {
	ID       string
	Decision policies.Decision // allow or reject
	ForRun   bool
	By       string // policies.ByCLI
	At       time.Time
}

// MaxLate bounds the late answers an approval keeps, as the run store
// does: later ones are refused, no longer recorded.
const MaxLate = 32

// approvalBook is a run's approvals in its workflow. The workflow's
// coroutines change it one at a time; mu is for the query, which the
// SDK's in-memory test suite answers on the caller's goroutine (a real
// worker answers it between coroutines).
type approvalBook struct {
	mu   sync.Mutex
	list []*Approval
}

// keep registers ApprovalsQuery and feeds the approval signals to the
// book for as long as the workflow lives, on a context the run's
// cancellation does not reach.
func (b *approvalBook) keep(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, ApprovalsQuery, b.all); err != nil {
		return err
	}
	c, _ := workflow.NewDisconnectedContext(ctx)
	sel := workflow.NewSelector(c)
	sel.AddReceive(workflow.GetSignalChannel(c, ApprovalOpenSignal), func(ch workflow.ReceiveChannel, _ bool) {
		var a Approval
		ch.Receive(c, &a)
		b.open(c, a)
	})
	sel.AddReceive(workflow.GetSignalChannel(c, ApprovalAnswerSignal), func(ch workflow.ReceiveChannel, _ bool) {
		var ans Answer
		ch.Receive(c, &ans)
		b.answer(ans)
	})
	sel.AddReceive(workflow.GetSignalChannel(c, ApprovalTimeoutSignal), func(ch workflow.ReceiveChannel, _ bool) {
		var id string
		ch.Receive(c, &id)
		b.close(id, store.ApprovalTimedOut)
	})
	workflow.Go(c, func(c workflow.Context) {
		for {
			sel.Select(c)
		}
	})
	return nil
}

// all answers ApprovalsQuery.
func (b *approvalBook) all() ([]Approval, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Approval, len(b.list))
	for i, a := range b.list {
		out[i] = *a
	}
	return out, nil
}

func (b *approvalBook) find(id string) *Approval {
	for _, a := range b.list {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// open keeps a new pending approval and starts its ask-timeout as a
// workflow timer: it times out at its deadline whether or not a worker
// runs its step then.
func (b *approvalBook) open(ctx workflow.Context, a Approval) {
	if a.ID == "" || b.find(a.ID) != nil {
		return
	}
	a.Status, a.AnswerKey, a.Late = store.ApprovalPending, "", nil
	b.mu.Lock()
	b.list = append(b.list, &a)
	b.mu.Unlock()
	workflow.Go(ctx, func(c workflow.Context) {
		if d := a.Deadline.Sub(workflow.Now(c)); d > 0 {
			workflow.NewTimer(c, d).Get(c, nil)
		}
		b.close(a.ID, store.ApprovalTimedOut)
	})
}

// answer records ans: the answer of a pending approval, else a late one.
func (b *approvalBook) answer(ans Answer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.find(ans.ID)
	switch {
	case a == nil:
	case a.Status == store.ApprovalPending:
		a.Status, a.Decision, a.ForRun, a.AnsweredBy, a.AnsweredAt = store.ApprovalAnswered, string(ans.Decision), ans.ForRun, ans.By, ans.At.UTC()
	case len(a.Late) < MaxLate:
		a.Late = append(a.Late, store.LateAnswer{Decision: string(ans.Decision), ForRun: ans.ForRun, By: ans.By, At: ans.At.UTC()})
	}
}

// close ends a pending approval unanswered, as status.
func (b *approvalBook) close(id, status string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a := b.find(id); a != nil && a.Status == store.ApprovalPending {
		a.Status = status
	}
}

// withdraw closes the pending approvals of an attempt whose activity
// returned: no step waits for them any more.
func (b *approvalBook) withdraw(k turnKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.list {
		if a.Status == store.ApprovalPending && keyOf(a.StepID, a.Index, a.Attempt) == k {
			a.Status = store.ApprovalWithdrawn
		}
	}
}
