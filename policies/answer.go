package policies

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/acpflow/acpflow/decisions"
	"github.com/acpflow/acpflow/internal/suggest"
	"github.com/acpflow/acpflow/internal/termtext"
)

// Outcomes of a permission answer, as ACP names them.
const (
	OutcomeSelected  = decisions.OutcomeSelected
	OutcomeCancelled = decisions.OutcomeCancelled
)

// The rules of the records of requests acpflow answered itself, asking no
// policy (docs/policies.md "What is recorded"): `cancelled` for the first
// five, a reject for the last two, which refuse what no policy should be
// shown.
const (
	RuleTurnCancelled   = "turn-cancelled"    // the turn was cancelled
	RuleOtherSession    = "other-session"     // a session no step has open
	RuleSessionNotOpen  = "session-not-open"  // before the step's session was open
	RuleBetweenTurns    = "between-turns"     // a session kept for a later step, between turns
	RuleTurnEnded       = "turn-ended"        // a step's session after its turn ended
	RuleRequestTooLarge = "request-too-large" // a request past the bounds of what a policy is shown
	RuleTooManyRequests = "too-many-requests" // more requests of the turn waiting for an answer than acpflow holds
)

// AnsweredItself reports whether a record's rule says acpflow answered the
// request itself: no policy was asked, so none can be said to have decided
// it (`acpflow policy test` skips such records).
func AnsweredItself(rule string) bool {
	switch rule {
	case RuleTurnCancelled, RuleOtherSession, RuleSessionNotOpen, RuleBetweenTurns, RuleTurnEnded,
		RuleRequestTooLarge, RuleTooManyRequests:
		return true
	}
	return false
}

// reasonNoOption is recorded when the chosen family had no option, so the
// agent got `cancelled` although the policy asked for something else.
const reasonNoOption = "no matching option"

// ParseDecision reads one of the six decision words, as written after
// `then:` in a rule or answered by a WASM module.
func ParseDecision(s string) (Decision, error) {
	if d := Decision(s); d.Valid() {
		return d, nil
	}
	msg := fmt.Sprintf("decision %q: want allow, allow_always, reject, reject_always, cancel or ask", s)
	if c := suggest.Closest(s, []string{string(Allow), string(AllowAlways), string(Reject), string(RejectAlways), string(Cancel), string(Ask)}); c != "" {
		msg += fmt.Sprintf("; did you mean %q?", c)
	}
	return "", errors.New(msg)
}

// Asker puts a permission request to a person (`ask`). Implementations
// must be safe for concurrent use.
type Asker interface {
	// Ask returns the person's answer to q. It returns ctx's error when
	// ctx ends first (the turn was cancelled, the step timed out, the
	// ask-timeout passed), and ErrNoOneToAsk when there is no one after
	// all (the terminal went away): the fallback decides then.
	Ask(ctx context.Context, q *Question) (Reply, error)
}

// ErrNoOneToAsk is an Asker's answer when it cannot put the question.
var ErrNoOneToAsk = errors.New("no one to ask")

// Who answered an ask (Reply.By, PermissionRecord.AnsweredBy): the
// approvers of docs/policies.md#approvals.
const (
	ByTerminal = "terminal" // the person at acpflow's terminal
	ByUI       = "ui"       // acpflow ui
	ByWebhook  = "webhook"  // a webhook's signed answer link
	ByCLI      = "cli"      // acpflow approve
)

// DefaultAskTimeout is how long an ask waits for an answer when the policy
// sets no ask-timeout: long enough for a person called away, short enough
// that a forgotten run fails closed the same evening.
const DefaultAskTimeout = 10 * time.Minute

// Reply is a person's answer to a Question: an option of the agent's
// (OptionID, what the terminal picks), or a decision turned into an option
// as a policy's decision is (SelectOption: what the web UI, a webhook's
// link and `acpflow approve` answer, allow or reject).
type Reply struct {
	OptionID string
	Decision Decision // when OptionID is ""
	By       string   // ByTerminal, ByUI, ByWebhook or ByCLI
	At       time.Time
	Approval string // the approval's id; "" for the terminal alone
	// Grant says the answer was given before, for the rest of the run
	// (`--for run`), and this request is its repeat: no one was asked.
	Grant bool
}

// Question is what a person is asked: the request as the policy saw it,
// the rule that decided to ask, and what happens without an answer.
type Question struct {
	Request  *PermissionRequest
	Rule     string
	Reason   string
	Timeout  time.Duration // the ask-timeout
	Fallback Decision      // the ask-fallback
	// Shown is the request as it may be shown outside this process (the
	// run store, the web UI, a webhook): scrubbed of the step's secrets as
	// its records are; nil: Request itself.
	Shown *PermissionRequest
	// Pending, when set, is told once the request waits for an answer:
	// the approval's id ("" when only the terminal is asked) and who may
	// answer (ByTerminal, ByUI, ...), so a view can say the step waits.
	Pending func(approval string, approvers []string)
}

// DecisionOf is the decision that selecting an option of this kind
// (allow_once, allow_always, reject_once, reject_always) amounts to; false
// for a kind ACP does not name.
func DecisionOf(kind string) (Decision, bool) {
	switch kind {
	case "allow_once":
		return Allow, true
	case "allow_always":
		return AllowAlways, true
	case "reject_once":
		return Reject, true
	case "reject_always":
		return RejectAlways, true
	}
	return "", false
}

// SelectOption turns a decision on a call of toolKind into the answer the
// agent receives: the outcome ("selected" or "cancelled") and, when
// selected, the option id.
//
// Allow selects the first allow_once option, and only such an option.
// AllowAlways selects the first allow_always, else the first allow_once.
// Reject selects the first reject_once, else the first reject_always;
// RejectAlways the reverse. The first option in the agent's order wins
// within a kind, so the agent's own ordering is respected. Neither allow
// ever selects an option that widens (Widens): one that switches the
// session's mode or stops the agent asking for the rest of the session.
//
// # Notes
//
// Allow never falls back to allow_always: an "always" answer is remembered
// by the agent itself (codex-acp writes it to $HOME/.codex/rules/) and
// would take every later call of that kind out of the policy's sight. Where
// no option fits, the answer is "cancelled": picking an option of another
// family would invert the policy's intent. Cancel and any unknown decision
// also answer "cancelled"; Answer makes sure an unknown decision never gets
// this far. So does a set of options that Ambiguous refuses: the agent reads
// only the id sent back, so an id must name one option.
func SelectOption(d Decision, toolKind string, options []Option) (outcome string, optionID string) {
	if Ambiguous(options) != "" {
		return OutcomeCancelled, ""
	}
	var kinds []string
	switch d {
	case Allow:
		kinds = []string{"allow_once"}
	case AllowAlways:
		kinds = []string{"allow_always", "allow_once"}
	case Reject:
		kinds = []string{"reject_once", "reject_always"}
	case RejectAlways:
		kinds = []string{"reject_always", "reject_once"}
	default:
		return OutcomeCancelled, ""
	}
	allow := d == Allow || d == AllowAlways
	for _, kind := range kinds {
		for _, o := range options {
			if o.Kind == kind && !(allow && Widens(toolKind, o)) {
				return OutcomeSelected, o.ID
			}
		}
	}
	return OutcomeCancelled, ""
}

// Ambiguous says why an answer by option id could mean more than one
// option, "" when it cannot: an option without an id, or two options that
// share an id and differ in kind or name. The agent reads only the id sent
// back, so with `allow_once "x"` and `reject_once "x"` a reject selects "x"
// and the agent may read an allow. Such a set is answered `cancelled`.
//
// # Notes
//
// Two options of the same kind under one id are ambiguous too when their
// names differ: Widens reads the name, so `allow_once "x" "Allow"` beside
// `allow_once "x" "Allow all edits during this session"` would pass the
// first while the agent may read the second. An exact repeat (same id,
// kind and name) is one option listed twice, and selecting its id can mean
// only it, so it is answered as usual.
func Ambiguous(options []Option) string {
	seen := make(map[string]Option, len(options))
	for _, o := range options {
		if o.ID == "" {
			return fmt.Sprintf("ambiguous options: the %s option %q has no id", quoteKind(o.Kind), cutText(o.Name))
		}
		first, dup := seen[o.ID]
		switch {
		case !dup:
			seen[o.ID] = o
		case first.Kind != o.Kind || first.Name != o.Name:
			return fmt.Sprintf("ambiguous options: id %q names two options, %s %q and %s %q",
				cutText(o.ID), quoteKind(first.Kind), cutText(first.Name), quoteKind(o.Kind), cutText(o.Name))
		}
	}
	return ""
}

// quoteKind is an option kind as a reason names it: ACP's words as they
// are, anything else quoted (it is the agent's text).
func quoteKind(kind string) string {
	if _, ok := DecisionOf(kind); ok {
		return kind
	}
	return fmt.Sprintf("%q", cutText(kind))
}

// cutText bounds an agent's text in a reason: records go to the terminal,
// the run store and results.
func cutText(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	return termtext.Cut(s, limit) + "…"
}

// unselected is the reason of a record whose decision selected no option:
// the options' ambiguity, joined to the policy's own reason, else that
// reason, else "no matching option".
func unselected(reason string, options []Option) string {
	if why := Ambiguous(options); why != "" {
		return joinReason(why, reason)
	}
	if reason == "" {
		return reasonNoOption
	}
	return reason
}

// widening are words of an option's id or name that say selecting it
// grants more than the one call: a mode in which the agent decides alone,
// or no more questions for a while. Matched lowercase, with "-" and "_"
// read as spaces.
var widening = []string{
	"auto mode", "use auto", "bypass", "yolo", "all edits", "accept edits", "acceptedits",
	"don't ask", "dont ask", "do not ask", "without asking", "stop asking", "never ask",
	"full access", "skip permission", "dangerously", "during this session", "for this session",
	"for the session", "rest of the session", "all tools", "any tool",
	"future sessions", "and save", "permanently", "and switch", "switch to",
}

// Widens reports whether selecting o, offered for a call of toolKind,
// would grant more than that call: an "always" option of a switch_mode
// call (claude-agent-acp's ExitPlanMode offers "Yes, and use auto mode" and
// "… bypass permissions" as allow_always), or an option whose id or name
// says it switches the session's mode or stops the agent asking
// (claude-agent-acp's "Yes, allow all edits during this session", after
// which every later edit and command ran unasked). Such an option is never
// selected by allow or allow_always; the mode guard catches a switch that
// no name announced.
func Widens(toolKind string, o Option) bool {
	if toolKind == "switch_mode" && (o.Kind == "allow_always" || o.Kind == "reject_always") {
		return true
	}
	text := strings.NewReplacer("-", " ", "_", " ").Replace(strings.ToLower(o.ID + " " + o.Name))
	for _, w := range widening {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// Answer asks p for a verdict on req and turns it into the answer and its
// record. It is the one place where a policy call becomes an answer, so
// failing closed is done once, here, for every kind of policy.
//
// src is recorded as the record's Policy: where the policy was configured.
// The record's Layer is LayerWorkflow; Outer.Answer decides within an
// outer policy.
// The record carries the tool's command and locations as the policy saw
// them, so a user can tell why a rule did or did not match.
//
// # Notes
//
// Answer never fails and never panics because of p. If p returns an error,
// panics, or answers a decision that is not one of the five words, the
// decision becomes Reject and the reason says what went wrong; the reject
// option is selected where the agent offered one, else the answer is
// "cancelled". The verdict's Rule is kept even then, so a failing module is
// still named in the record. A policy that wants to stop on time must honour ctx: Answer
// does not abandon a call that ignores it.
//
// A policy that decides ask gets its ask-fallback here: Answer has no one
// to ask (AnswerAsking has).
func Answer(ctx context.Context, p Permission, src Source, req *PermissionRequest) PermissionRecord {
	return AnswerAsking(ctx, p, src, req, nil)
}

// AnswerAsking is Answer with a person to ask when the policy decides ask:
// asker gets the question, and the option picked is the answer (recorded
// with Ask "person" and the decision the option's kind amounts to). With
// no asker, or one that has no one to ask, the verdict's fallback decides
// (Ask "fallback"); when ctx ends while the person thinks, the answer is
// `cancelled` (Ask "unanswered"), as ACP wants once a turn is cancelled.
func AnswerAsking(ctx context.Context, p Permission, src Source, req *PermissionRequest, asker Asker) PermissionRecord {
	if req == nil {
		req = &PermissionRequest{}
	}
	v, err := decide(ctx, p, req)
	switch {
	case err != nil:
		v = Verdict{Decision: Reject, Rule: v.Rule, Reason: "policy error: " + err.Error(), Stderr: v.Stderr}
	case !v.Decision.Valid():
		v = Verdict{Decision: Reject, Rule: v.Rule, Reason: fmt.Sprintf("policy answered an invalid decision %q", v.Decision), Stderr: v.Stderr}
	}
	if v.Decision == Ask {
		return asked(ctx, v, src, req, asker)
	}
	rec := record(req, src, v)
	rec.Outcome, rec.OptionID = SelectOption(v.Decision, req.Tool.Kind, req.Options)
	if rec.Outcome == OutcomeCancelled && v.Decision != Cancel {
		rec.Reason = unselected(rec.Reason, req.Options)
	}
	return rec
}

// ErrAskTimedOut is the cause of an ask's context when its ask-timeout
// passed: an asker tells it from the turn's end by it.
var ErrAskTimedOut = errors.New("no answer within the ask-timeout")

// asked answers a request its policy decided to ask about. Options that
// are ambiguous are put to no one: the number a person picks would name an
// id that more than one option has; the fallback's answer is then
// `cancelled`, as any answer to them. The person has the ask-timeout to
// answer; then the fallback decides, and the reason says so.
func asked(ctx context.Context, v Verdict, src Source, req *PermissionRequest, asker Asker) PermissionRecord {
	rec := record(req, src, v)
	ambiguous := Ambiguous(req.Options)
	fallback := v.Fallback
	if fallback == "" {
		fallback = Reject
	}
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = DefaultAskTimeout
	}
	if asker != nil && ambiguous == "" {
		actx, cancel := context.WithTimeoutCause(ctx, timeout, ErrAskTimedOut)
		q := &Question{Request: req, Rule: v.Rule, Reason: v.Reason, Timeout: timeout, Fallback: fallback}
		reply, err := asker.Ask(actx, q)
		// An asker whose approvers keep the deadline (a Temporal workflow's
		// timer) says it passed with ErrAskTimedOut itself.
		timedOut := err != nil && (errors.Is(context.Cause(actx), ErrAskTimedOut) || errors.Is(err, ErrAskTimedOut))
		cancel()
		switch {
		case err == nil:
			if err = answerWith(&rec, reply, req); err == nil {
				return rec
			}
		case ctx.Err() != nil:
			rec.Decision, rec.Outcome, rec.Ask = Cancel, OutcomeCancelled, "unanswered"
			rec.Reason = joinReason("the turn ended while waiting for an answer", v.Reason)
			rec.Approval = reply.Approval
			return rec
		case timedOut:
			rec.Reason = joinReason(fmt.Sprintf("no answer within the ask-timeout (%s): ask-fallback %s", timeout, fallback), v.Reason)
			rec.Approval = reply.Approval
			err = ErrNoOneToAsk
		}
		if !errors.Is(err, ErrNoOneToAsk) {
			rec.Reason = joinReason("asking failed: "+err.Error(), v.Reason)
		}
	}
	rec.Decision, rec.Ask = fallback, "fallback"
	rec.Outcome, rec.OptionID = SelectOption(fallback, req.Tool.Kind, req.Options)
	switch {
	case ambiguous != "":
		rec.Reason = joinReason(ambiguous+": no one was asked, ask-fallback "+string(fallback)+" answered cancelled", v.Reason)
	case rec.Reason == v.Reason:
		rec.Reason = joinReason("no one to ask: ask-fallback "+string(fallback), v.Reason)
	}
	if rec.Outcome == OutcomeCancelled && fallback != Cancel && ambiguous == "" {
		rec.Reason = joinReason(rec.Reason, reasonNoOption)
	}
	return rec
}

// answerWith makes rec the answer r gives to req: the option picked, or
// the option r's decision selects (cancelled where the agent offered none
// of its family, and the reason says so), with who answered and when.
func answerWith(rec *PermissionRecord, r Reply, req *PermissionRequest) error {
	if r.OptionID == "" {
		if r.Decision != Allow && r.Decision != Reject {
			return fmt.Errorf("the answer %q is neither allow nor reject", r.Decision)
		}
		rec.Decision = r.Decision
		rec.Outcome, rec.OptionID = SelectOption(r.Decision, req.Tool.Kind, req.Options)
		if rec.Outcome == OutcomeCancelled {
			rec.Reason = joinReason(rec.Reason, reasonNoOption)
		}
	} else {
		i := slices.IndexFunc(req.Options, func(o Option) bool { return o.ID == r.OptionID })
		if i < 0 {
			return fmt.Errorf("the answer %q is none of the options", r.OptionID)
		}
		d, ok := DecisionOf(req.Options[i].Kind)
		if !ok {
			d = Reject // an option of no known kind grants nothing
		}
		rec.Decision, rec.Outcome, rec.OptionID = d, OutcomeSelected, r.OptionID
	}
	rec.Ask = "person"
	if r.Grant {
		rec.Ask = "grant"
	}
	rec.Approval, rec.AnsweredBy = r.Approval, r.By
	if !r.At.IsZero() {
		rec.AnsweredAt = r.At.UTC().Format(time.RFC3339Nano)
	}
	return nil
}

func joinReason(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// record is the record of req answered by v, before the answer is chosen.
func record(req *PermissionRequest, src Source, v Verdict) PermissionRecord {
	locations := make([]ToolLocation, len(req.Tool.Locations))
	copy(locations, req.Tool.Locations)
	return PermissionRecord{
		ToolCallID:   req.Tool.ID,
		Kind:         req.Tool.Kind,
		Title:        req.Tool.Title,
		Command:      req.Tool.Command,
		Locations:    locations,
		Decision:     v.Decision,
		Layer:        LayerWorkflow,
		Policy:       src,
		Rule:         v.Rule,
		Reason:       v.Reason,
		PolicyStderr: v.Stderr,
	}
}

// decide calls p, turning a missing policy and a panic into errors so that
// Answer has a single failure path.
func decide(ctx context.Context, p Permission, req *PermissionRequest) (v Verdict, err error) {
	if p == nil {
		return Verdict{}, errors.New("no permission policy")
	}
	defer func() {
		if r := recover(); r != nil {
			v, err = Verdict{}, fmt.Errorf("panic: %v", r)
		}
	}()
	return p.DecidePermission(ctx, req)
}
