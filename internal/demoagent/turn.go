package demoagent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/coder/acp-go-sdk"
)

// maxEcho bounds the echo of the prompt's first line in the answer, in characters (runes).
const maxEcho = 200

// maxRemembered bounds the earlier prompts the answer lists, so that a long session's answer
// stays short; the count it gives is of all of them.
const maxRemembered = 20

// wordsPerChunk sets how the answer is cut into agent_message_chunk updates. Cutting inside
// lines, not at line ends, makes a client that adds anything between chunks visibly wrong.
const wordsPerChunk = 3

// ToolRequest is one `tool: KIND TITLE` line of a prompt: a tool call the demo agent asks
// permission for before it answers.
type ToolRequest struct {
	Kind  string // as written in the prompt; sent as "other" when it is not an ACP tool kind
	Title string // the rest of the line, trimmed; may be empty
}

// ParsePrompt splits a prompt into what the demo agent echoes (its first non-blank line,
// truncated to 200 characters) and its tool requests, in order.
//
// # Notes
//
// A tool line is a line that, trimmed, starts with "tool:" and has at least a KIND after it.
// Its KIND is not checked against the ACP tool kinds, so that a prompt can exercise a policy
// with a kind an agent is not supposed to send.
func ParsePrompt(prompt string) (echo string, tools []ToolRequest) {
	first := true
	for line := range strings.Lines(prompt) {
		line = strings.TrimRight(line, "\r\n")
		if first && strings.TrimSpace(line) != "" {
			echo, first = truncate(line, maxEcho), false
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "tool:")
		if !ok {
			continue
		}
		kind, title, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if kind == "" {
			continue
		}
		tools = append(tools, ToolRequest{Kind: kind, Title: strings.TrimSpace(title)})
	}
	return echo, tools
}

// Answer is the text of the demo agent's answer in a session's first turn: the echo, one line
// per tool request with the id of the option the client chose ("cancelled" when it chose none),
// and a closing line. outcomes[i] is the outcome of tools[i].
func Answer(echo string, tools []ToolRequest, outcomes []string) string {
	return AnswerWithHistory(nil, echo, tools, outcomes)
}

// AnswerWithHistory is the text of the demo agent's answer in a session whose earlier turns'
// prompts had the echoes history, oldest first: Answer's, with, when history is not empty, the
// line "demo agent remembers N earlier prompt(s): E1 | E2 | …" before the closing line. That
// line is how a test sees that a session was continued, not started afresh.
//
// # Notes
//
// N counts every earlier prompt, but only the last 20 echoes are listed. An echo is not
// escaped: one containing " | " reads as two.
func AnswerWithHistory(history []string, echo string, tools []ToolRequest, outcomes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "demo agent received: %s\n", echo)
	for i, tool := range tools {
		fmt.Fprintf(&b, "permission %s %s: %s\n", tool.Kind, tool.Title, outcomes[i])
	}
	if n := len(history); n > 0 {
		fmt.Fprintf(&b, "demo agent remembers %d earlier %s: %s\n",
			n, plural(n, "prompt", "prompts"), strings.Join(history[max(0, n-maxRemembered):], " | "))
	}
	fmt.Fprintf(&b, "demo agent: end of turn (%d tool %s).\n", len(tools), plural(len(tools), "request", "requests"))
	return b.String()
}

// Chunks cuts text into the pieces the demo agent streams: every wordsPerChunk words, each
// word keeping the whitespace that follows it. Concatenated, they give text back.
func Chunks(text string) []string {
	var chunks []string
	start, words := 0, 0
	for i, r := range text {
		next := i + utf8.RuneLen(r)
		if !unicode.IsSpace(r) {
			continue
		}
		if following, _ := utf8.DecodeRuneInString(text[next:]); next < len(text) && unicode.IsSpace(following) {
			continue
		}
		if words++; words == wordsPerChunk {
			chunks = append(chunks, text[start:next])
			start, words = next, 0
		}
	}
	if start < len(text) {
		chunks = append(chunks, text[start:])
	}
	return chunks
}

// turn is one session/prompt: thought, plan, a permission round per tool request, the answer.
type turn struct {
	conn    *acp.AgentSideConnection
	session *session
	cwd     string   // the session's when the turn started
	history []string // the session's when the turn started
	echo    string
	tools   []ToolRequest
	// directives change the answer (json:) and add usage (usage:); see directives.go.
	directives Directives
}

func (t *turn) run(ctx context.Context) error {
	tools := t.tools
	if err := t.update(ctx, acp.UpdateAgentThoughtText(fmt.Sprintf(
		"Reading the prompt: %d tool %s to ask permission for.", len(tools), plural(len(tools), "request", "requests")))); err != nil {
		return err
	}
	if err := t.update(ctx, acp.UpdatePlan(planEntries(tools)...)); err != nil {
		return err
	}

	outcomes := make([]string, len(tools))
	for i, tool := range tools {
		outcome, err := t.askPermission(ctx, tool)
		if err != nil {
			return err
		}
		outcomes[i] = outcome
	}

	if err := t.say(ctx, AnswerWithHistory(t.history, t.echo, tools, outcomes)); err != nil {
		return err
	}
	if t.directives.HasJSON {
		// The JSON is a message of its own, after a thought, so that it is the turn's final
		// message (what output-schema checks) while the answer above still reports the
		// permission outcomes.
		if err := t.update(ctx, acp.UpdateAgentThoughtText("Answering with the JSON the prompt gave.")); err != nil {
			return err
		}
		if err := t.say(ctx, t.directives.JSON); err != nil {
			return err
		}
	}
	if u := t.directives.Usage; u != nil {
		return t.update(ctx, u.update(t.session.addCost(u.Cost)))
	}
	return nil
}

// say streams text as agent_message_chunk updates (Chunks).
func (t *turn) say(ctx context.Context, text string) error {
	for _, chunk := range Chunks(text) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.update(ctx, acp.UpdateAgentMessageText(chunk)); err != nil {
			return err
		}
	}
	return nil
}

// permissionOptions are the four options of every permission request, in the order ACP lists
// the kinds.
var permissionOptions = []acp.PermissionOption{
	{OptionId: "allow-once", Name: "Allow once", Kind: acp.PermissionOptionKindAllowOnce},
	{OptionId: "allow-always", Name: "Allow always", Kind: acp.PermissionOptionKindAllowAlways},
	{OptionId: "reject-once", Name: "Reject once", Kind: acp.PermissionOptionKindRejectOnce},
	{OptionId: "reject-always", Name: "Reject always", Kind: acp.PermissionOptionKindRejectAlways},
}

// askPermission announces the tool call, asks permission for it, and settles it: completed
// when an allow option was chosen, failed otherwise. It returns the outcome for the answer:
// the chosen option id, or "cancelled".
func (t *turn) askPermission(ctx context.Context, tool ToolRequest) (string, error) {
	id := t.session.nextToolCallID()
	kind := toolKind(tool.Kind)
	locations := t.locations(kind, tool.Title)
	rawInput := rawInput(kind, tool.Title, locations)

	if err := t.update(ctx, acp.StartToolCall(id, tool.Title,
		acp.WithStartKind(kind),
		acp.WithStartStatus(acp.ToolCallStatusPending),
		acp.WithStartLocations(locations),
		acp.WithStartRawInput(rawInput),
	)); err != nil {
		return "", err
	}

	resp, err := t.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: t.session.id,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: id,
			Title:      acp.Ptr(tool.Title),
			Kind:       acp.Ptr(kind),
			Status:     acp.Ptr(acp.ToolCallStatusPending),
			Locations:  locations,
			RawInput:   rawInput,
		},
		Options: permissionOptions,
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("demo agent: session/request_permission for %s (%s %s): %w", id, tool.Kind, tool.Title, err)
	}

	outcome, status := "cancelled", acp.ToolCallStatusFailed
	if sel := resp.Outcome.Selected; sel != nil {
		outcome = string(sel.OptionId)
		if allows(sel.OptionId) {
			status = acp.ToolCallStatusCompleted
		}
	}
	if err := t.update(ctx, acp.UpdateToolCall(id, acp.WithUpdateStatus(status))); err != nil {
		return "", err
	}
	return outcome, nil
}

// locations is where a tool call acts, for the kinds that act on a path: the title's first
// word, made absolute against the session's cwd.
func (t *turn) locations(kind acp.ToolKind, title string) []acp.ToolCallLocation {
	switch kind {
	case acp.ToolKindRead, acp.ToolKindEdit, acp.ToolKindDelete, acp.ToolKindMove:
	default:
		return nil
	}
	words := strings.Fields(title)
	if len(words) == 0 {
		return nil
	}
	path := words[0]
	if !filepath.IsAbs(path) {
		path = filepath.Join(t.cwd, path)
	}
	return []acp.ToolCallLocation{{Path: path}}
}

func rawInput(kind acp.ToolKind, title string, locations []acp.ToolCallLocation) map[string]any {
	switch {
	case kind == acp.ToolKindExecute:
		return map[string]any{"command": title}
	case len(locations) > 0:
		return map[string]any{"path": locations[0].Path}
	}
	return nil
}

func (t *turn) update(ctx context.Context, u acp.SessionUpdate) error {
	return t.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: t.session.id, Update: u})
}

func planEntries(tools []ToolRequest) []acp.PlanEntry {
	entries := make([]acp.PlanEntry, 0, len(tools)+1)
	for _, tool := range tools {
		entries = append(entries, acp.PlanEntry{
			Content:  fmt.Sprintf("Ask permission to %s %s", tool.Kind, tool.Title),
			Priority: acp.PlanEntryPriorityHigh,
			Status:   acp.PlanEntryStatusPending,
		})
	}
	return append(entries, acp.PlanEntry{
		Content:  "Echo the prompt and report each permission",
		Priority: acp.PlanEntryPriorityMedium,
		Status:   acp.PlanEntryStatusPending,
	})
}

func toolKind(kind string) acp.ToolKind {
	switch k := acp.ToolKind(kind); k {
	case acp.ToolKindRead, acp.ToolKindEdit, acp.ToolKindDelete, acp.ToolKindMove, acp.ToolKindSearch,
		acp.ToolKindExecute, acp.ToolKindThink, acp.ToolKindFetch, acp.ToolKindSwitchMode, acp.ToolKindOther:
		return k
	}
	return acp.ToolKindOther
}

func allows(id acp.PermissionOptionId) bool {
	for _, o := range permissionOptions {
		if o.OptionId == id {
			return o.Kind == acp.PermissionOptionKindAllowOnce || o.Kind == acp.PermissionOptionKindAllowAlways
		}
	}
	return false
}

// promptText concatenates the prompt's text blocks; other blocks carry nothing to echo.
func promptText(blocks []acp.ContentBlock) string {
	var b strings.Builder
	for _, block := range blocks {
		if block.Text != nil {
			b.WriteString(block.Text.Text)
		}
	}
	return b.String()
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
