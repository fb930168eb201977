package acpsubagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// client is acpflow's side of one ACP connection: it collects the answer,
// records what else the agent streams, and answers permission requests
// through the step's policy. It serves nothing else: no file system, no
// terminals (every other agent request gets -32601).
type client struct {
	inv  *steps.Invocation
	cwd  string
	gate *stdoutGate // nil when the client is not a step's (probe)
	// scribe scrubs what the client shows outside the process (a question
	// put to approvers); nil: nothing to scrub (probe, tests).
	scribe *scribe

	mu          sync.Mutex
	sessionID   string // set once session/new answered; updates for others are ignored
	output      transcriptText
	permissions []policies.PermissionRecord
	cancelled   bool // a cancel was sent: pending permissions are answered `cancelled`
	// sealed: the turn is over and its result taken (seal); a request is
	// answered `cancelled` and recorded as the run's.
	sealed bool
	// turnEnded ends with the turn's cancel: a person still thinking about
	// a request is not waited for (and the request is answered
	// `cancelled`, as ACP wants after a cancel).
	turnEnded context.Context
	endTurn   context.CancelFunc
	// answering counts the permission requests being answered, which a
	// cancel waits for (answersSettled), so that their records (a question
	// withdrawn, a policy call cut short) are the step's; waiting those of
	// them a policy or a person is deciding (answerBounded).
	answering, waiting int
	// usage is what the agent reported of the turn (steps.Usage); costBase
	// the session's cost when the turn began, lastCost its latest.
	usage              steps.Usage
	costBase, lastCost *acp.Cost
	// usageWarned: the usage fields already warned of as dropped (usage.go).
	usageWarned map[string]bool
	// overflow is closed when the output passed its limit.
	overflow     chan struct{}
	overflowOnce sync.Once

	// tools are the turn's tool calls by id, for the unasked check
	// (watch.go); guard, when set, keeps the session out of the modes in
	// which the agent decides alone, and mode is the session's current one.
	tools map[string]*toolState
	guard *modeGuard
	mode  string
	// switchGranted: the policy allowed a switch_mode request (Claude's
	// ExitPlanMode), so the next switch to a mode in which the agent asks
	// is one the client asked for (modeChanged).
	switchGranted bool
	// restores counts the mode guard's set-backs in flight (goRestore).
	restores int
	// failed is closed, with failErr set, when something the client saw
	// fails the turn (failTurn): an unasked call, a mode that could not be
	// set back, a failed model call.
	failed   chan struct{}
	failOnce sync.Once
	failErr  error
	// modelFailed: the agent reported a failed model call during the
	// turn (watch.go, sessionInfo), with modelMessage when it said one.
	modelFailed  bool
	modelMessage string
}

// transcriptText is the agent's answer: every message, in order, a blank
// line between two messages that something else (a tool call, a plan, a
// thought) came between, and the last message alone. It keeps at most
// limit bytes of output (final is a part of it).
type transcriptText struct {
	all, last strings.Builder
	limit     int64
	broken    bool // an update other than a message chunk came since the last chunk
	full      bool // the limit was reached: nothing more is kept
	// messageID is the id of the message being streamed, where the agent
	// sends one (ACP's messageId): chunks of one id are one message
	// whatever came between them, and a new id is a new message even with
	// nothing between.
	messageID string
}

// write adds a message chunk with its message id ("" when the agent sends
// none); false once the limit is reached.
func (t *transcriptText) write(text, messageID string) bool {
	if t.full {
		return false
	}
	switch {
	case messageID == "":
	case t.messageID == "":
		t.messageID = messageID
	case messageID == t.messageID:
		t.broken = false // the same message goes on
	default:
		t.messageID, t.broken = messageID, true
	}
	sep := ""
	if t.broken && t.all.Len() > 0 {
		t.last.Reset()
		sep = "\n\n"
	}
	t.broken = false
	if left := int(t.limit) - t.all.Len(); len(sep)+len(text) > left {
		t.full = true
		if len(sep) > left {
			return false
		}
		text = termtext.Cut(text, left-len(sep))
	}
	t.all.WriteString(sep)
	t.all.WriteString(text)
	t.last.WriteString(text)
	return !t.full
}

// interrupt marks the end of the current message, if one has begun.
func (t *transcriptText) interrupt() {
	if t.all.Len() > 0 {
		t.broken = true
	}
}

// newTurn ends the current message and empties the last one: what the
// agent says in the next turn is a message of its own, and the final one
// even when it says nothing.
func (t *transcriptText) newTurn() {
	t.interrupt()
	t.last.Reset()
	t.messageID = ""
}

func (c *client) setSession(id string) {
	c.mu.Lock()
	c.sessionID = id
	c.mu.Unlock()
}

func (c *client) ours(id acp.SessionId) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID != "" && string(id) == c.sessionID
}

// answersSettled waits, at most limit, for the permission requests being
// answered when the turn was cancelled.
func (c *client) answersSettled(limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		n := c.answering
		c.mu.Unlock()
		if n == 0 {
			return
		}
	}
}

func (c *client) markCancelled() {
	c.mu.Lock()
	c.cancelled = true
	c.mu.Unlock()
	if c.endTurn != nil {
		c.endTurn()
	}
}

// quiesce waits, once the connection has closed, until every session/update
// the agent wrote has been handed to SessionUpdate: the SDK processes them
// on a goroutine of its own, and a request that failed on the closed
// connection does not wait for them. Partial text survives a crash, as in
// the seed. It gives up after limit (an update the SDK could not decode is
// never handed over).
func (c *client) quiesce(done <-chan struct{}, limit time.Duration) {
	select {
	case <-done:
	default:
		return // still connected: nothing is in flight on our account
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && !c.gate.caughtUp() {
		time.Sleep(time.Millisecond)
	}
}

// snapshot returns the output, the last message and the permission records so far.
func (c *client) snapshot() (output, final string, perms []policies.PermissionRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.output.all.String(), c.output.last.String(), append([]policies.PermissionRecord(nil), c.permissions...)
}

// final is the last message so far.
func (c *client) final() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.output.last.String()
}

// beginTurn starts another turn of the same session: its messages follow
// the earlier ones in the output, and final is its own.
func (c *client) beginTurn() {
	c.mu.Lock()
	c.output.newTurn()
	c.mu.Unlock()
}

// overflowed is closed once the output has passed its limit.
func (c *client) overflowed() <-chan struct{} { return c.overflow }

// SessionUpdate keeps agent_message_chunk text of this session as the
// output (see transcriptText); everything else goes to the event stream
// with its kind, and a tool call, a plan or a thought ends the message
// being streamed.
func (c *client) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	if c.gate != nil {
		defer c.gate.handledOne()
	}
	if !c.ours(n.SessionId) {
		return nil
	}
	u := n.Update
	if u.AgentMessageChunk != nil {
		c.messageChunk(u.AgentMessageChunk)
		return nil
	}
	if endsMessage(u) {
		c.mu.Lock()
		c.output.interrupt()
		c.mu.Unlock()
	}
	kind, body := describeUpdate(u)
	c.inv.Emit(acpagent.AgentUpdate{Kind: kind, Update: body})
	switch {
	case u.ToolCall != nil:
		tc := u.ToolCall
		c.toolSeen(string(tc.ToolCallId), func(f *acpagent.ToolCallFields) {
			if tc.Kind != "" {
				f.Kind = &tc.Kind
			}
			f.Title = &tc.Title
			if tc.Status != "" {
				f.Status = &tc.Status
			}
			if tc.RawInput != nil {
				f.RawInput = tc.RawInput
			}
			if len(tc.Locations) > 0 {
				f.Locations = tc.Locations
			}
		})
	case u.ToolCallUpdate != nil:
		tc := u.ToolCallUpdate
		c.toolSeen(string(tc.ToolCallId), func(f *acpagent.ToolCallFields) {
			if tc.Kind != nil {
				f.Kind = tc.Kind
			}
			if tc.Title != nil {
				f.Title = tc.Title
			}
			if tc.Status != nil {
				f.Status = tc.Status
			}
			if tc.RawInput != nil {
				f.RawInput = tc.RawInput
			}
			if len(tc.Locations) > 0 {
				f.Locations = tc.Locations
			}
		})
	case u.CurrentModeUpdate != nil:
		c.modeChanged(string(u.CurrentModeUpdate.CurrentModeId))
	case u.ConfigOptionUpdate != nil:
		c.optionsChanged(u.ConfigOptionUpdate.ConfigOptions)
	case u.SessionInfoUpdate != nil:
		c.sessionInfo(u.SessionInfoUpdate.Meta)
	}
	return nil
}

// messageChunk keeps a chunk of the agent's message as output and logs
// it, up to max-output: the chunk that passes the limit closes overflow,
// and chunks after it are neither kept nor logged. A gemini-cli mode
// announcement is a mode change, not output.
func (c *client) messageChunk(chunk *acp.SessionUpdateAgentMessageChunk) {
	text := ""
	if t := chunk.Content.Text; t != nil {
		text = t.Text
	}
	if mode, ok := modeUpdateText(text); ok {
		c.modeChanged(mode)
		c.inv.Emit(acpagent.AgentUpdate{Kind: "current_mode_update", Update: map[string]string{"currentModeId": mode, "via": "agent_message_chunk"}})
		return
	}
	c.mu.Lock()
	wasFull := c.output.full
	id := ""
	if m := chunk.MessageId; m != nil {
		id = *m
	}
	kept := c.output.write(text, id)
	c.mu.Unlock()
	if wasFull {
		return // past max-output: neither kept nor logged
	}
	if !kept {
		c.overflowOnce.Do(func() { close(c.overflow) })
	}
	c.inv.Emit(acpagent.MessageChunk{Text: text})
}

// modeUpdateText reads the message chunk by which gemini-cli announces a
// mode change ("[MODE_UPDATE] yolo"; it sends no current_mode_update): a
// bookkeeping line, not the agent's answer.
func modeUpdateText(text string) (string, bool) {
	mode, ok := strings.CutPrefix(strings.TrimSpace(text), "[MODE_UPDATE] ")
	if !ok || mode == "" || len(mode) > 64 || strings.ContainsAny(mode, " \t\n") {
		return "", false
	}
	return mode, true
}

// modeOption is the config option of category mode, where the agent keeps
// its mode as one (opencode); nil for none.
func modeOption(options []acp.SessionConfigOption) *acp.SessionConfigOptionSelect {
	for _, o := range options {
		if o.Select != nil && o.Select.Category != nil && *o.Select.Category == acp.SessionConfigOptionCategoryMode {
			return o.Select
		}
	}
	return nil
}

// turnUsageSoFar is what the agent reported of the turn, nil for nothing.
func (c *client) turnUsageSoFar() *steps.Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.usage.Empty() {
		return nil
	}
	return c.usage.Clone()
}

// countCostFrom sets the session's cost when the turn begins: a step that
// continues a session on the live agent pays only for its own turn.
func (c *client) countCostFrom(cost acp.Cost) {
	c.mu.Lock()
	c.costBase = &cost
	c.mu.Unlock()
}

// sessionCost is the session's cumulative cost as last reported (the
// base's when nothing came during the turn).
func (c *client) sessionCost() (acp.Cost, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.lastCost != nil:
		return *c.lastCost, true
	case c.costBase != nil:
		return *c.costBase, true
	}
	return acp.Cost{}, false
}

// countable reports whether an agent's cost can be counted and shown: an
// amount of at least zero in a currency code of letters and digits (ISO
// 4217 codes are three letters). Another is no report: its currency
// string would go to the terminal and into budgets as the agent wrote it.
func countable(c acp.Cost) bool {
	if c.Amount < 0 || c.Currency == "" || len(c.Currency) > 16 {
		return false
	}
	for _, r := range c.Currency {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func sameUsage(a, b *steps.Usage) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// endsMessage reports whether an update comes between two agent messages
// (a tool call, a plan, a thought, the user's words), as opposed to
// bookkeeping (usage, modes, commands) that may arrive mid-message.
func endsMessage(u acp.SessionUpdate) bool {
	return u.AgentThoughtChunk != nil || u.UserMessageChunk != nil || u.ToolCall != nil ||
		u.ToolCallUpdate != nil || u.Plan != nil
}

// describeUpdate names an update's kind and returns its payload for the log.
func describeUpdate(u acp.SessionUpdate) (string, any) {
	switch {
	case u.AgentThoughtChunk != nil:
		return "agent_thought_chunk", u.AgentThoughtChunk
	case u.UserMessageChunk != nil:
		return "user_message_chunk", u.UserMessageChunk
	case u.ToolCall != nil:
		return "tool_call", u.ToolCall
	case u.ToolCallUpdate != nil:
		return "tool_call_update", u.ToolCallUpdate
	case u.Plan != nil:
		return "plan", u.Plan
	case u.AvailableCommandsUpdate != nil:
		return "available_commands_update", u.AvailableCommandsUpdate
	case u.CurrentModeUpdate != nil:
		return "current_mode_update", u.CurrentModeUpdate
	case u.ConfigOptionUpdate != nil:
		return "config_option_update", u.ConfigOptionUpdate
	case u.UsageUpdate != nil:
		return "usage_update", u.UsageUpdate
	case u.SessionInfoUpdate != nil:
		return "session_info_update", u.SessionInfoUpdate
	}
	return "unknown", nil
}

// RequestPermission asks the step's permission policy, within the outer
// policy, and answers with the option it selects. After a cancel, ACP
// requires the `cancelled` outcome.
func (c *client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.answering++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.answering--
		c.mu.Unlock()
	}()
	c.asked(string(p.ToolCall.ToolCallId))
	req := c.permissionRequest(p)
	c.mu.Lock()
	cancelled, sealed := c.cancelled, c.sealed
	c.mu.Unlock()
	var rec policies.PermissionRecord
	switch {
	// No policy is asked in the first three: acpflow itself answers, and
	// says why (unowned.go).
	case sealed:
		rec = answeredItself(req, c.inv.PermissionSource, policies.RuleTurnEnded,
			fmt.Sprintf("request for the session of step %s after its turn ended", c.inv.StepID))
	case cancelled:
		rec = answeredItself(req, c.inv.PermissionSource, policies.RuleTurnCancelled, "the turn was cancelled")
	case !c.ours(p.SessionId):
		rec = answeredItself(req, c.inv.PermissionSource, policies.RuleOtherSession,
			fmt.Sprintf("request for session %s, which is not the step's", quotedSession(p.SessionId)))
	default:
		rec = c.answerBounded(ctx, req)
	}
	c.keep(rec)
	if rec.Kind == string(acp.ToolKindSwitchMode) && (rec.Decision == policies.Allow || rec.Decision == policies.AllowAlways) && rec.Outcome == "selected" {
		c.mu.Lock()
		c.switchGranted = true
		c.mu.Unlock()
	}
	return answerOf(rec), nil
}

// answerBounded asks the policy about a request within the bounds of
// bounds.go, and refuses one past them: too large to show a policy, or
// one more than maxWaitingPermissions waiting for an answer.
func (c *client) answerBounded(ctx context.Context, req *policies.PermissionRequest) policies.PermissionRecord {
	if why := oversized(req); why != "" {
		return refusedItself(req, c.inv.PermissionSource, policies.RuleRequestTooLarge, why)
	}
	c.mu.Lock()
	full := c.waiting >= maxWaitingPermissions
	if !full {
		c.waiting++
	}
	c.mu.Unlock()
	if full {
		return refusedItself(req, c.inv.PermissionSource, policies.RuleTooManyRequests,
			fmt.Sprintf("%d permission requests of the turn were already waiting for an answer", maxWaitingPermissions))
	}
	defer func() {
		c.mu.Lock()
		c.waiting--
		c.mu.Unlock()
	}()
	return c.answer(ctx, req)
}

// keep records an answer in the step's permissions and as its event; once
// the step's result is taken (seal), in the run's, saying so.
func (c *client) keep(rec policies.PermissionRecord) {
	c.mu.Lock()
	sealed := c.sealed
	if !sealed {
		c.permissions = append(c.permissions, rec)
	}
	c.mu.Unlock()
	if !sealed {
		c.inv.Emit(steps.Permission{PermissionRecord: rec})
		return
	}
	if rec.Rule != policies.RuleTurnEnded {
		rec.Reason = joinReasons(rec.Reason, fmt.Sprintf("answered after the turn of step %s ended", c.inv.StepID))
	}
	recordForRun(c.inv, rec)
}

// seal ends the turn for permission requests: a question still put to a
// person is withdrawn, the answers in flight are waited for (at most
// limit), and from then on a request is answered `cancelled` and every
// record goes to the run's (keep): the step's result is being taken.
func (c *client) seal(limit time.Duration) {
	if c.endTurn != nil {
		c.endTurn()
	}
	c.answersSettled(limit)
	c.mu.Lock()
	c.sealed = true
	c.mu.Unlock()
}

// answer asks the step's policy within the outer policy, and a person
// when one of them decides ask: until
// the person answers, the turn is cancelled (a timeout, an interrupt) or
// the request's own context ends.
func (c *client) answer(ctx context.Context, req *policies.PermissionRequest) policies.PermissionRecord {
	if c.inv.Asker == nil || c.turnEnded == nil {
		return c.inv.Outer.Answer(ctx, c.inv.Permission, c.inv.PermissionSource, req)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(c.turnEnded, stop)()
	return c.inv.Outer.AnswerAsking(ctx, c.inv.Permission, c.inv.PermissionSource, req, stepAsker{c})
}

// stepAsker puts a question to the invocation's asker with the step it
// comes from, so a person knows which agent asks, and the request
// scrubbed of the step's secrets for whoever is shown it outside this
// process.
type stepAsker struct{ c *client }

func (s stepAsker) Ask(ctx context.Context, q *policies.Question) (policies.Reply, error) {
	inv := s.c.inv
	if s.c.scribe != nil {
		q.Shown = s.c.scribe.request(q.Request)
	}
	q.Pending = func(approval string, approvers []string) {
		inv.Emit(acpagent.Asking{ToolCallID: q.Request.Tool.ID, Title: q.Request.Tool.Title, Approval: approval, Approvers: approvers})
	}
	return inv.Asker.Ask(ctx, q)
}

// permissionRequest flattens the ACP request into the policy's input
// (acpagent.FromACP, which `acpflow policy test` uses too).
func (c *client) permissionRequest(p acp.RequestPermissionRequest) *policies.PermissionRequest {
	return acpagent.FromACP(policies.Request{
		Workflow: c.inv.Workflow, RunID: c.inv.RunID, Step: c.inv.StepID,
		Agent: agentName(c.inv), Workspace: c.inv.Workspace, Cwd: c.cwd,
	}, p)
}

// decodeParams reads a request's params into v and validates them.
func decodeParams(params json.RawMessage, v interface{ Validate() error }) *acp.RequestError {
	if err := json.Unmarshal(params, v); err != nil {
		return acp.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	if err := v.Validate(); err != nil {
		return acp.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	return nil
}

// answerError is a handler's error as the agent is answered it, as the
// SDK's client side answers it.
func answerError(err error) *acp.RequestError {
	var re *acp.RequestError
	switch {
	case errors.As(err, &re):
		return re
	case errors.Is(err, context.Canceled):
		return acp.NewRequestCancelled(map[string]any{"error": err.Error()})
	}
	return acp.NewInternalError(map[string]any{"error": err.Error()})
}
