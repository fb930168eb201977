package acpsubagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// What the client watches for while a turn runs, besides the answer
// (docs/acp-subagent.md#agents-that-decide-alone): tool calls that run
// without asking, a switch to a mode in which the agent decides alone, and
// a failed model call reported as text. Each can fail the turn
// (client.failTurn), which the turn then cancels.

// maxTracked bounds the tool calls a turn remembers: an agent that
// announces calls without end must not grow acpflow's memory. Past it, a
// new call is judged by what its first message says.
const maxTracked = 4096

// toolState is what the client knows of one tool call: its fields as the
// tool_call and tool_call_update messages set them, and whether a
// permission request for it came (asked) or it was judged as unasked.
type toolState struct {
	fields acpagent.ToolCallFields
	asked  bool
	judged bool
}

// toolSeen keeps a tool_call or tool_call_update and judges the call when
// it ran without asking: when the agent reports it ended (completed or
// failed) with no permission request for its id.
//
// # Notes
//
// "in_progress" is no proof that a call runs: codex-acp announces a patch,
// and opencode every call, as in progress before it asks (opencode 0.3–0.8
// s before). So a call is judged when it ends. One that failed is
// recorded too (codex-acp 2.6 runs `echo hi > out.txt` unasked in its
// read-only sandbox, where it fails: SPEC §10 wants it on the record) but
// fails the step only once one completed: gemini reports a write it
// refused itself, without asking and without running it, as failed.
func (c *client) toolSeen(id string, merge func(f *acpagent.ToolCallFields)) {
	c.mu.Lock()
	st := c.tools[id]
	if st == nil {
		if len(c.tools) >= maxTracked {
			clear(c.tools)
		}
		st = &toolState{fields: acpagent.ToolCallFields{ID: id}}
		c.tools[id] = st
	}
	merge(&st.fields)
	ended := st.fields.Status != nil && (*st.fields.Status == acp.ToolCallStatusCompleted || *st.fields.Status == acp.ToolCallStatusFailed)
	judge := ended && !st.asked && !st.judged && mustAsk(st.fields.Kind)
	if judge {
		st.judged = true
	}
	fields := st.fields
	c.mu.Unlock()
	if judge {
		c.judgeUnasked(fields)
	}
}

// mustAsk reports whether a call of this kind must have asked.
func mustAsk(kind *acp.ToolKind) bool {
	return kind != nil && slices.Contains(policies.UnaskedKinds, string(*kind))
}

// asked notes that a permission request came for the tool call id: it is
// not judged as unasked, whatever its status says later.
func (c *client) asked(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.tools[id]; st != nil {
		st.asked = true
		return
	}
	if len(c.tools) >= maxTracked {
		clear(c.tools)
	}
	c.tools[id] = &toolState{fields: acpagent.ToolCallFields{ID: id}, asked: true}
}

// judgeUnasked judges a call that ran without asking as the policy would
// have answered a request for it, records it with the step's permissions
// and as an `unasked` event, and fails the turn when the setting in force
// says so and the policy would not have allowed it.
func (c *client) judgeUnasked(f acpagent.ToolCallFields) {
	where := policies.Request{Workflow: c.inv.Workflow, RunID: c.inv.RunID, Step: c.inv.StepID,
		Agent: agentName(c.inv), Workspace: c.inv.Workspace, Cwd: c.cwd, Kind: policies.KindPermission}
	req := &policies.PermissionRequest{Request: where, Tool: acpagent.ToolFromACP(where, f), Options: []policies.Option{}, Config: map[string]any{}}
	ctx, cancel := context.WithTimeout(context.Background(), unaskedJudgeLimit)
	defer cancel()
	rec, fail := c.inv.Outer.JudgeUnasked(ctx, c.inv.Permission, c.inv.PermissionSource, req)
	rec.Status = string(*f.Status)
	// A call that failed changed nothing the policy must answer for: it
	// is on the record, and the turn goes on.
	fail = fail && *f.Status == acp.ToolCallStatusCompleted
	c.mu.Lock()
	c.permissions = append(c.permissions, rec)
	c.mu.Unlock()
	c.inv.Emit(steps.Unasked{PermissionRecord: rec})
	if fail {
		what := rec.Command
		if what == "" {
			what = rec.Title
		}
		c.failTurn(fmt.Errorf("agent %s ran %s call without asking, which the permission policy would not have allowed: %q (would %s, %s rule %s%s); the turn was cancelled (unasked: fail)",
			agentName(c.inv), withArticle(rec.Kind), termtext.Sanitize(termtext.Cut(what, 200)), rec.Would, rec.Policy, rec.Rule, reasonNote(rec.Reason)))
	}
}

// withArticle is a word with its indefinite article: "an execute", "a delete".
func withArticle(word string) string {
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

// unaskedJudgeLimit bounds a policy's verdict on an unasked call, as a
// WASM module's own limit bounds it on a request.
const unaskedJudgeLimit = 5 * time.Second

func reasonNote(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + termtext.Sanitize(termtext.Cut(reason, 200))
}

// failTurn ends the turn with err (the first one wins): the turn cancels
// and the step fails with it.
func (c *client) failTurn(err error) {
	c.failOnce.Do(func() {
		c.mu.Lock()
		c.failErr = err
		c.mu.Unlock()
		close(c.failed)
	})
}

// turnFailure is the error that failed the turn, nil for none.
func (c *client) turnFailure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failErr
}

// modeGuard keeps a session in the mode acpflow chose, and its permission
// config options at the values acpflow left them at, under every
// permission policy but allow (docs/acp-subagent.md#the-mode-guard). It
// does not rely on a mode's words: any switch the client did not ask for
// is set back. Words (acpagent.DecidesAlone) only judge the session's
// starting mode, and a switch when there is no mode to go back to.
type modeGuard struct {
	preset string
	// safe is the mode to set a session back to that starts in one in
	// which the agent decides alone: the step's, its agent's, its preset's
	// ("" when none is set: such a start fails the step).
	safe string
	// pinned is the mode acpflow left the session in once configured
	// ("" when the agent offers none: then only a switch to a mode in
	// which the agent decides alone is acted on, and fails the turn).
	// Guarded by the client's mu.
	pinned string
	// modes are the session's modes as offered, for their names.
	modes []acp.SessionMode
	// setMode sets the session's mode (session/set_mode, or the config
	// option of category mode: restore).
	setMode func(ctx context.Context, id string) error
	// options are the session's permission config options (not its mode
	// option, which is the mode) and the value acpflow left each at;
	// setOption sets one back.
	options   map[string]string
	setOption func(ctx context.Context, id, value string) error
}

// decidesAlone reports whether mode id is one in which the agent decides alone.
func (g *modeGuard) decidesAlone(id string) bool {
	name, desc := "", ""
	for _, m := range g.modes {
		if string(m.Id) == id {
			name = m.Name
			if m.Description != nil {
				desc = *m.Description
			}
		}
	}
	return acpagent.DecidesAlone(g.preset, id, name, desc)
}

// restoreLimit bounds setting a mode back.
const restoreLimit = 5 * time.Second

// modeChanged is a current_mode_update (or a mode config option's new
// value) during a turn. A switch away from the pinned mode is set back at
// once, off the notification path (the agent's answer comes on the
// connection whose notifications wait for this one); a failure fails the
// turn, naming the mode. The one switch the client asked for is the one
// a switch_mode request it allowed led to, to a mode in which the agent
// asks: that mode is pinned instead.
func (c *client) modeChanged(id string) {
	c.mu.Lock()
	g := c.guard
	c.mode = id
	if g == nil || id == g.pinned {
		c.mu.Unlock()
		return
	}
	pinned, granted := g.pinned, c.switchGranted
	if granted && !g.decidesAlone(id) {
		g.pinned, c.switchGranted = id, false
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if pinned == "" && !g.decidesAlone(id) {
		return
	}
	c.goRestore(func() {
		if err := g.restore(id, pinned); err != nil {
			c.failTurn(err)
			return
		}
		c.mu.Lock()
		c.mode = pinned
		c.mu.Unlock()
		c.inv.Emit(acpagent.ModeRestored{From: termtext.Cut(id, 80), To: pinned})
	})
}

// maxRestores bounds the set-backs in flight at once (each a goroutine
// and a request to the agent for up to restoreLimit): an agent that
// switches faster than it is set back fails its turn instead of growing
// them without end.
const maxRestores = 8

// goRestore runs restore off the notification path, or fails the turn
// when maxRestores are already in flight.
func (c *client) goRestore(restore func()) {
	c.mu.Lock()
	full := c.restores >= maxRestores
	if !full {
		c.restores++
	}
	c.mu.Unlock()
	if full {
		c.failTurn(fmt.Errorf("the agent changed its mode or permission options %d times while acpflow was still setting them back", maxRestores))
		return
	}
	go func() {
		defer func() {
			c.mu.Lock()
			c.restores--
			c.mu.Unlock()
		}()
		restore()
	}()
}

// restore sets the session back from mode id to mode to.
func (g *modeGuard) restore(id, to string) error {
	shown := termtext.Sanitize(termtext.Cut(id, 80))
	why := "without acpflow asking for it"
	if g.decidesAlone(id) {
		why = "in which it decides alone"
	}
	if to == "" {
		return fmt.Errorf("the agent switched to mode %q, %s, and acpflow has no mode to set it back to: set mode: to one in which it asks", shown, why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), restoreLimit)
	defer cancel()
	if err := g.setMode(ctx, to); err != nil {
		return fmt.Errorf("the agent switched to mode %q, %s, and setting it back to %q failed: %s", shown, why, to, describeLimited(err))
	}
	return nil
}

// describeLimited words an error of a call bounded by restoreLimit.
func describeLimited(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s", restoreLimit)
	}
	return describeRPCError(err)
}

// optionsChanged is a config_option_update: the mode option is a mode
// change, and a permission option the agent changed on its own (Copilot's
// allow_all turned on) is set back to the value acpflow left it at, or
// the turn fails naming it.
func (c *client) optionsChanged(options []acp.SessionConfigOption) {
	if o := modeOption(options); o != nil {
		c.modeChanged(string(o.CurrentValue))
	}
	c.mu.Lock()
	g := c.guard
	c.mu.Unlock()
	if g == nil {
		return
	}
	for _, o := range options {
		id, value, ok := optionValue(o)
		want, pinned := g.options[id]
		if !ok || !pinned || value == want {
			continue
		}
		c.goRestore(func() {
			ctx, cancel := context.WithTimeout(context.Background(), restoreLimit)
			defer cancel()
			if err := g.setOption(ctx, id, want); err != nil {
				c.failTurn(fmt.Errorf("the agent set its option %s to %q without acpflow asking for it, and setting it back to %q failed: %s",
					termtext.Sanitize(termtext.Cut(id, 80)), termtext.Sanitize(termtext.Cut(value, 80)), want, describeLimited(err)))
				return
			}
			c.inv.Emit(acpagent.ModeRestored{Option: termtext.Cut(id, 80), From: termtext.Cut(value, 80), To: want})
		})
	}
}

// optionValue is a config option's id and current value as a value id
// ("true"/"false" for a boolean); false for an option of neither shape.
func optionValue(o acp.SessionConfigOption) (id, value string, ok bool) {
	switch {
	case o.Select != nil:
		return string(o.Select.Id), string(o.Select.CurrentValue), true
	case o.Boolean != nil:
		return string(o.Boolean.Id), strconv.FormatBool(o.Boolean.CurrentValue), true
	}
	return "", "", false
}

// sessionInfo reads a session_info_update for a failed model call that
// the agent reports as text (codex-acp: _meta.codex.threadStatus.type
// "systemError"; the error's words follow as the turn's last message, then
// end_turn): the turn is marked failed, and modelFailure words it once
// the turn has ended.
func (c *client) sessionInfo(meta map[string]any) {
	codex, _ := meta["codex"].(map[string]any)
	status, _ := codex["threadStatus"].(map[string]any)
	if t, _ := status["type"].(string); t != "systemError" {
		return
	}
	msg, _ := status["message"].(string)
	c.mu.Lock()
	c.modelFailed, c.modelMessage = true, msg
	c.mu.Unlock()
}

// modelFailure is the error of a turn in which the agent reported a
// failed model call (sessionInfo), nil for none: its message, else the
// turn's last message, which carries the error's words.
func (c *client) modelFailure() error {
	c.mu.Lock()
	failed, msg := c.modelFailed, c.modelMessage
	if msg == "" {
		msg = c.output.last.String()
	}
	c.mu.Unlock()
	if !failed {
		return nil
	}
	// The turn's last message is the error's words, not an answer: the
	// step's final stays empty.
	c.mu.Lock()
	c.output.last.Reset()
	c.mu.Unlock()
	if msg = strings.TrimSpace(msg); msg == "" {
		msg = "the agent said nothing more"
	}
	return fmt.Errorf("agent %s reported a failed model call: %s", agentName(c.inv), termtext.Sanitize(termtext.Cut(msg, 2000)))
}
