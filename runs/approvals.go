package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
)

// What the run service names of approvals (docs/policies.md#approvals).
type (
	// Approval is one ask put to people, pending or answered.
	Approval = store.Approval
	// LateError is the refusal of an answer that came after the first.
	LateError = store.LateError
)

// Where an approval is.
const (
	ApprovalPending   = store.ApprovalPending
	ApprovalAnswered  = store.ApprovalAnswered
	ApprovalTimedOut  = store.ApprovalTimedOut
	ApprovalWithdrawn = store.ApprovalWithdrawn
)

// ApprovalPoll is how often a step waiting for a person reads its approval
// back from the run store, where another process (acpflow ui, acpflow
// approve) writes its answer: the most an answer waits to reach the agent.
// A read by primary key costs microseconds, so a batch of a hundred
// waiting steps reads the store a few hundred times a second at most.
const ApprovalPoll = 200 * time.Millisecond

// approvalHub is the asker of a Runner's runs when it has a store: it
// records each ask as a pending approval, offers it to every approver the
// run has (the terminal, a webhook; the web UI and acpflow approve read
// the store) and takes the first answer, which the store makes atomic.
// An answer given for the rest of the run is kept as a grant, and a
// repeat of the same request (tool kind and command, GrantScope) is
// answered with it without asking.
type approvalHub struct {
	store    *store.Store
	terminal policies.Asker // nil: no one at a terminal
	webhooks []webhook
	workflow string
	notice   func(string, ...any)

	mu     sync.Mutex
	grants map[grantKey]policies.Reply
}

// grantKey is what a grant covers: one run's calls of a tool kind with a
// command line (docs/policies.md#approvals: "the same tool kind and
// command"), GrantScope's what.
type grantKey struct{ run, kind, what string }

// GrantScope is what, besides its tool kind, a request must repeat for a
// grant to answer it (here and on the Temporal backend): its command; for a call with none (an edit, a
// read, a fetch), the files it names, else its title. Without this, an
// answer for the rest of the run to one edit would allow every edit of
// any file, command "" being the same for all of them.
func GrantScope(req *policies.PermissionRequest) string {
	t := req.Tool
	if t.Command != "" {
		return "command\x00" + t.Command
	}
	if len(t.Locations) > 0 {
		paths := make([]string, len(t.Locations))
		for i, l := range t.Locations {
			paths[i] = l.Path
		}
		slices.Sort(paths)
		return "files\x00" + strings.Join(slices.Compact(paths), "\x00")
	}
	return "title\x00" + t.Title
}

func keyOf(req *policies.PermissionRequest) grantKey {
	return grantKey{req.RunID, req.Tool.Kind, GrantScope(req)}
}

// asker is who a run's asks go to: the approval hub over the Runner's
// store, or only the terminal when there is no store.
func (r *Runner) asker(wf *engine.Workflow) policies.Asker {
	if r.Store == nil {
		return r.Asker
	}
	return &approvalHub{store: r.Store, terminal: r.Asker, webhooks: r.webhooks(wf), workflow: wf.Name,
		notice: r.notice, grants: map[grantKey]policies.Reply{}}
}

// Ask implements policies.Asker.
func (h *approvalHub) Ask(ctx context.Context, q *policies.Question) (policies.Reply, error) {
	if g, ok := h.granted(ctx, q); ok {
		return g, nil
	}
	a, err := h.open(ctx, q)
	if err != nil {
		h.notice("step %s: the request could not be recorded for approvers besides the terminal: %v", q.Request.Step, err)
		if h.terminal == nil {
			return policies.Reply{}, policies.ErrNoOneToAsk
		}
		return h.terminal.Ask(ctx, q)
	}
	if q.Pending != nil {
		q.Pending(a.ID, h.approvers())
	}
	reply, forRun, err := h.await(ctx, q, a)
	if err == nil && forRun {
		h.grant(q.Request, reply)
	}
	return reply, err
}

// approvers are who a pending request is offered to.
func (h *approvalHub) approvers() []string {
	var out []string
	if h.terminal != nil {
		out = append(out, policies.ByTerminal)
	}
	out = append(out, policies.ByUI, policies.ByCLI)
	if len(h.webhooks) > 0 {
		out = append(out, policies.ByWebhook)
	}
	return out
}

// open records q as a pending approval.
func (h *approvalHub) open(ctx context.Context, q *policies.Question) (store.Approval, error) {
	shown := q.Shown
	if shown == nil {
		shown = q.Request
	}
	key := make([]byte, 32)
	rand.Read(key)
	now := time.Now().UTC()
	a := store.Approval{
		ID: newApprovalID(), RunID: q.Request.RunID, StepID: q.Request.Step, Workflow: h.workflow,
		Request: shown, Rule: q.Rule, Reason: q.Reason, Fallback: string(q.Fallback),
		AnswerKey: hex.EncodeToString(key), Status: store.ApprovalPending, CreatedAt: now, Deadline: now.Add(q.Timeout),
	}
	return a, h.store.CreateApproval(ctx, a)
}

// newApprovalID is a new approval's id: short enough to type after
// `acpflow approve`, random enough that two never meet in one store.
func newApprovalID() string {
	var b [6]byte
	rand.Read(b[:])
	return "ap-" + hex.EncodeToString(b[:])
}

// await waits for the first answer to a: the terminal's (recorded in the
// store, where it may lose to one recorded first), or one another process
// recorded, read back every ApprovalPoll. When ctx ends first, the
// approval is closed (timed out at its deadline, else withdrawn) unless
// an answer was recorded meanwhile, which an ask-timeout then takes.
func (h *approvalHub) await(ctx context.Context, q *policies.Question, a store.Approval) (policies.Reply, bool, error) {
	offered, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	typed := make(chan policies.Reply, 1)
	if h.terminal != nil {
		tq := *q
		tq.Pending = nil
		go func() {
			if r, err := h.terminal.Ask(offered, &tq); err == nil {
				typed <- r
			}
		}()
	}
	for _, wh := range h.webhooks {
		go h.deliver(offered, wh, a)
	}
	tick := time.NewTicker(ApprovalPoll)
	defer tick.Stop()
	for {
		select {
		case r := <-typed:
			got, err := h.store.AnswerApproval(ctx, a.ID, store.Answer{Decision: string(optionDecision(q.Request.Options, r.OptionID)),
				OptionID: r.OptionID, By: policies.ByTerminal, At: r.At})
			var late *store.LateError
			if errors.As(err, &late) && late.Approval.Status == store.ApprovalAnswered {
				return replyOf(late.Approval), late.Approval.ForRun, nil
			}
			if err != nil && late == nil {
				h.notice("approval %s: the terminal's answer could not be recorded: %v", a.ID, err)
			}
			r.Approval = a.ID
			return r, got.ForRun, nil
		case <-tick.C:
			got, err := h.store.GetApproval(ctx, a.ID)
			if err == nil && got.Status == store.ApprovalAnswered {
				stop(fmt.Errorf("approval %s was answered %s by %s", a.ID, got.Decision, got.AnsweredBy))
				return replyOf(got), got.ForRun, nil
			}
		case <-ctx.Done():
			return h.close(ctx, a)
		}
	}
}

// close ends a whose ask's context ended: timed out when its ask-timeout
// ended it (the context's cause; a.Deadline, set a moment after the
// context's, can still be ahead), else withdrawn. An answer recorded
// meanwhile is taken when the ask-timeout ended the wait (it came in
// time), not when the turn did.
func (h *approvalHub) close(ctx context.Context, a store.Approval) (policies.Reply, bool, error) {
	timedOut := errors.Is(context.Cause(ctx), policies.ErrAskTimedOut)
	status := store.ApprovalWithdrawn
	if timedOut {
		status = store.ApprovalTimedOut
	}
	got, err := h.store.CloseApproval(context.WithoutCancel(ctx), a.ID, status)
	if err == nil && got.Status == store.ApprovalAnswered && timedOut {
		return replyOf(got), got.ForRun, nil
	}
	return policies.Reply{Approval: a.ID}, false, ctx.Err()
}

// replyOf is the answer recorded of a.
func replyOf(a store.Approval) policies.Reply {
	r := policies.Reply{OptionID: a.OptionID, By: a.AnsweredBy, At: a.AnsweredAt, Approval: a.ID}
	if r.OptionID == "" {
		r.Decision = policies.Decision(a.Decision)
	}
	return r
}

// optionDecision is what picking the option id amounts to (reject for an
// option of no known kind, which grants nothing).
func optionDecision(options []policies.Option, id string) policies.Decision {
	for _, o := range options {
		if o.ID == id {
			if d, ok := policies.DecisionOf(o.Kind); ok {
				return d
			}
		}
	}
	return policies.Reject
}

// grant keeps r as the answer to every later request of req's run with
// its tool kind and scope (GrantScope). An answer that picked an "always" option is
// kept as its once form: the grant is acpflow's, for this run, and the
// agent's own memory of an always answer is not acpflow's to widen.
func (h *approvalHub) grant(req *policies.PermissionRequest, r policies.Reply) {
	d := r.Decision
	if r.OptionID != "" {
		d = optionDecision(req.Options, r.OptionID)
	}
	switch d {
	case policies.Allow, policies.AllowAlways:
		d = policies.Allow
	default:
		d = policies.Reject
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.grants[keyOf(req)] = policies.Reply{Decision: d, By: r.By, At: r.At, Approval: r.Approval, Grant: true}
}

// granted is the grant that answers q's request, if there is one: one
// this process kept, else one recorded in the store for the run (an
// answer for the rest of the run given before the run was resumed).
func (h *approvalHub) granted(ctx context.Context, q *policies.Question) (policies.Reply, bool) {
	req := q.Request
	h.mu.Lock()
	g, ok := h.grants[keyOf(req)]
	h.mu.Unlock()
	if ok {
		return g, true
	}
	shown := q.Shown
	if shown == nil {
		shown = req
	}
	scope := GrantScope(shown)
	if scope != GrantScope(req) {
		// A command (or path) with a secret in it is stored scrubbed: two
		// such could read the same, and a grant covers one.
		return policies.Reply{}, false
	}
	list, err := h.store.ApprovalsOfRun(ctx, req.RunID)
	if err != nil {
		return policies.Reply{}, false
	}
	for _, a := range list {
		if a.ForRun && a.Status == store.ApprovalAnswered && a.Request != nil &&
			a.Request.Tool.Kind == shown.Tool.Kind && GrantScope(a.Request) == scope {
			h.grant(req, replyOf(a))
			return h.granted(ctx, q)
		}
	}
	return policies.Reply{}, false
}

// PendingApprovals lists the approvals waiting for an answer across the
// store's runs, oldest first (acpflow approvals, the web UI).
func (v *Service) PendingApprovals(ctx context.Context) ([]Approval, error) {
	return v.store.PendingApprovals(ctx)
}

// Approvals lists a run's approvals, oldest first (show, export).
func (v *Service) Approvals(ctx context.Context, runID string) ([]Approval, error) {
	return v.store.ApprovalsOfRun(ctx, runID)
}

// GetApproval reads one approval.
func (v *Service) GetApproval(ctx context.Context, id string) (Approval, error) {
	if err := checkApprovalID(id); err != nil {
		return Approval{}, err
	}
	return v.store.GetApproval(ctx, id)
}

// maxApprovalID bounds an approval id taken from a request (a URL's path,
// a command line) before it reaches the store or an error message: the
// ids are "ap-" and 12 hex digits (newApprovalID).
const maxApprovalID = 64

// checkApprovalID refuses an id too long to be one, as not found, without
// quoting it whole.
func checkApprovalID(id string) error {
	if len(id) > maxApprovalID {
		return fmt.Errorf("no approval %q in the store (an approval id is ap- and 12 hex digits): %w", cut(id, 16), store.ErrNotFound)
	}
	return nil
}

// Approve records an answer to a pending approval: decision allow or
// reject, for the rest of the run when forRun, given by by (ByUI, ByCLI,
// ByWebhook). The step waiting for it reads it within ApprovalPoll. An
// approval answered, timed out or withdrawn before refuses the answer
// with a *LateError, and records it as late.
func (v *Service) Approve(ctx context.Context, id string, decision policies.Decision, forRun bool, by string) (Approval, error) {
	if decision != policies.Allow && decision != policies.Reject {
		return Approval{}, fmt.Errorf("answer %q: want allow or reject", cut(string(decision), 16))
	}
	if by != policies.ByUI && by != policies.ByWebhook && by != policies.ByCLI {
		return Approval{}, fmt.Errorf("approver %q: want %s, %s or %s (the terminal answers through the step's own ask)", by, policies.ByUI, policies.ByWebhook, policies.ByCLI)
	}
	if err := checkApprovalID(id); err != nil {
		return Approval{}, err
	}
	return v.store.AnswerApproval(ctx, id, store.Answer{Decision: string(decision), ForRun: forRun, By: by, At: time.Now().UTC()})
}

// Approve records an answer to a pending approval in the store at path
// (Service.Approve), opening it for writing for the one answer: the web
// UI reads its store read-only otherwise.
func Approve(ctx context.Context, path, id string, decision policies.Decision, forRun bool, by string) (Approval, error) {
	v, err := Open(path)
	if err != nil {
		return Approval{}, err
	}
	defer v.Close()
	return v.Approve(ctx, id, decision, forRun, by)
}
