package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/steps"
)

// stderrLines is how many of a step's last stderr lines its page shows.
const stderrLines = 50

// stepPage shows one step: its result, permission decisions, stderr tail,
// sandbox record and transcript, attempt by attempt.
func (s *Server) stepPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st := s.cfg.Store
	id, kind, err := st.ResolveID(ctx, r.PathValue("id"))
	if err == nil && kind == runs.KindBatch {
		err = fmt.Errorf("%s is a batch, not a run: %w", id, runs.ErrNotFound)
	}
	if err != nil {
		s.fail(w, storeCode(err), err)
		return
	}
	d, err := st.GetRun(ctx, id)
	if err != nil {
		s.fail(w, storeCode(err), err)
		return
	}
	stepID := r.PathValue("step")
	var rec *runs.Step
	for i := range d.Steps {
		if d.Steps[i].StepID == stepID {
			rec = &d.Steps[i]
		}
	}
	if rec == nil {
		s.fail(w, http.StatusNotFound, fmt.Errorf("run %s has no step %q that started (its steps: %s)", id, stepID, stepIDs(d)))
		return
	}
	ts, err := st.Transcripts(ctx, id)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	var attempts []attemptView
	for i := range ts {
		if ts[i].Step == stepID {
			attempts = append(attempts, attemptOf(&ts[i], rec.Permissions))
		}
	}
	v := map[string]any{
		"Title": "step " + stepID + " of run " + id, "Run": d.Run, "Step": rec, "Attempts": attempts,
		"Running": d.Run.Status.Live(),
		"Perms":   permViews(rec.Permissions), "Stderr": tail(rec.Stderr, stderrLines),
		"Duration": words.Duration(rec.DurationMS),
	}
	if err := s.watchStep(ctx, d, rec, v); err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	if sb := rec.Sandbox; sb != nil {
		b, _ := json.MarshalIndent(sb, "", "  ")
		v["Sandbox"], v["Denied"], v["DeniedMore"] = string(b), sb.Denied, sb.DeniedMore
		if sb.KernelDenials != steps.KernelDenialsAudit {
			v["KernelNotListed"] = sb.KernelDenials
		}
	}
	s.render(w, "step.html", v)
}

// watchStep adds to a step page's values what watching it needs: its
// elements in index order with their items and, while it runs, its elapsed
// time and the output its attempts have written so far.
func (s *Server) watchStep(ctx context.Context, d *runs.RunDetail, rec *runs.Step, v map[string]any) error {
	st, now := s.cfg.Store, time.Now()
	els, err := st.Elements(ctx, d.Run.ID)
	if err != nil {
		return err
	}
	evs, err := st.TimelineEvents(ctx, d.Run.ID)
	if err != nil {
		return err
	}
	running := d.Run.Status.Live() // waiting for a person too
	v["Elements"], v["ElementsWaiting"] = elementRows(evs, rec.StepID, els[rec.StepID], !running, now)
	if !running || rec.Status != engine.StatusRunning {
		return nil
	}
	live, err := s.liveViews(ctx, d.Run.ID, rec.StepID, now)
	if err != nil {
		return err
	}
	v["Live"], v["LiveMax"] = live, liveOutputMax>>10
	v["Since"], v["Duration"] = since(rec.StartedAt), elapsed(rec.StartedAt, now)
	return nil
}

func stepIDs(d *runs.RunDetail) string {
	var ids []string
	for _, s := range d.Steps {
		ids = append(ids, s.StepID)
	}
	if len(ids) == 0 {
		return "none yet"
	}
	return strings.Join(ids, ", ")
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// permView is one permission record as the page shows it.
type permView struct {
	runs.Permission
	Unasked   bool
	PolicyBy  string // "workflow policy", "outer policy FILE", ...
	Locations []string
}

func permViews(ps []runs.Permission) []permView {
	out := make([]permView, len(ps))
	for i, p := range ps {
		out[i] = permViewOf(p)
	}
	return out
}

func permViewOf(p runs.Permission) permView {
	v := permView{Permission: p, Unasked: p.Decision == string(policies.DecisionUnasked),
		PolicyBy: words.Policy(policies.Layer(p.Layer), policies.Source(p.Policy))}
	for _, l := range p.Locations {
		loc := l.Path
		if l.Line > 0 {
			loc += fmt.Sprintf(":%d", l.Line)
		}
		if !l.InWorkspace {
			loc += " (outside the workspace)"
		}
		v.Locations = append(v.Locations, loc)
	}
	return v
}

// attemptView is one attempt's transcript, turn by turn.
type attemptView struct {
	Label     string
	Agent     string
	Truncated bool
	Entries   []entry
	Messages  int
}

// entry is one thing in a transcript: the prompt, a stretch of the agent's
// text or thoughts, a tool call (with its updates, diffs and the decisions
// on it), a permission request, a plan, the turn's end; Kind says which.
type entry struct {
	Kind   string // prompt, message, thought, tool, permission, plan, end, error, other
	AtMS   int64
	Text   string
	Title  string
	Tool   *toolView
	Perms  []permView
	Method string
}

type toolView struct {
	ID, Kind, Title, Status string
	Command                 string
	Locations               []string
	Diffs                   []diffView
	Output                  string
}

type diffView struct {
	Path             string
	OldText, NewText string
	Lines            []diffLine
}

type diffLine struct {
	Op, Text string // "-", "+"
}

// rpcMsg is the part of a JSON-RPC message the transcript reads.
type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type contentBlock struct {
	Type    string        `json:"type"`
	Text    string        `json:"text"`
	Path    string        `json:"path"`
	OldText *string       `json:"oldText"`
	NewText string        `json:"newText"`
	Content *contentBlock `json:"content"`
}

type toolCall struct {
	ToolCallID string          `json:"toolCallId"`
	Title      string          `json:"title"`
	Kind       string          `json:"kind"`
	Status     string          `json:"status"`
	RawInput   json.RawMessage `json:"rawInput"`
	Locations  []struct {
		Path string `json:"path"`
		Line int    `json:"line"`
	} `json:"locations"`
}

type sessionUpdate struct {
	Update struct {
		SessionUpdate string `json:"sessionUpdate"`
		// Content is a chunk's block, or a tool call's list of them.
		Content json.RawMessage `json:"content"`
		toolCall
		Entries []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"entries"`
	} `json:"update"`
}

// attemptOf reads one attempt's messages into entries: text streamed in
// chunks is joined into one entry per stretch, a tool call's updates are
// folded into its entry, and the step's permission records are put with
// the tool call they decided (unasked ones too).
func attemptOf(t *transcript.Step, perms []runs.Permission) attemptView {
	label := t.Step
	if t.Index != nil {
		label += fmt.Sprintf("[%d]", *t.Index)
	}
	av := attemptView{Label: fmt.Sprintf("%s, attempt %d", label, t.Attempt), Agent: t.Agent, Truncated: t.Truncated, Messages: len(t.Messages)}
	es := &entries{byCall: map[string][]permView{}, toolIdx: map[string]int{}}
	for _, p := range perms {
		es.byCall[p.ToolCallID] = append(es.byCall[p.ToolCallID], permViewOf(p))
	}
	for _, m := range t.Messages {
		var r rpcMsg
		if err := json.Unmarshal(m.Msg, &r); err != nil {
			es.add(entry{Kind: "other", AtMS: m.AtMS, Text: "(not JSON-RPC) " + string(m.Msg)})
			es.last = nil
			continue
		}
		switch {
		case m.Dir == transcript.ToAgent && r.Method == "session/prompt":
			es.add(entry{Kind: "prompt", AtMS: m.AtMS, Text: promptText(r.Params)})
			es.last = nil
		case m.Dir == transcript.FromAgent && r.Method == "session/update":
			es.update(m.AtMS, r.Params)
		case m.Dir == transcript.FromAgent && r.Method == "session/request_permission":
			es.permission(m.AtMS, r.Params)
			es.last = nil
		case r.Method == "" && r.Error != nil:
			es.add(entry{Kind: "error", AtMS: m.AtMS, Text: fmt.Sprintf("error %d: %s", r.Error.Code, r.Error.Message)})
			es.last = nil
		case r.Method == "" && len(r.Result) > 0 && strings.Contains(string(r.Result), `"stopReason"`):
			var res struct {
				StopReason string `json:"stopReason"`
			}
			json.Unmarshal(r.Result, &res)
			es.add(entry{Kind: "end", AtMS: m.AtMS, Text: "turn ended: " + res.StopReason})
			es.last = nil
		case r.Method != "":
			es.add(entry{Kind: "other", AtMS: m.AtMS, Method: r.Method, Title: dirArrow(m.Dir) + " " + r.Method, Text: compact(r.Params)})
			es.last = nil
		}
	}
	// Decisions on calls the transcript does not show (it was cut short).
	for id, ps := range es.byCall {
		es.add(entry{Kind: "permission", Title: "tool call " + id, Perms: ps})
	}
	av.Entries = es.list
	return av
}

// entries are an attempt's entries as its messages are read.
type entries struct {
	list []entry
	last *entry // the stretch of text being joined
	// toolIdx is each tool call's entry; list is appended to, so pointers
	// into it are re-taken by index.
	toolIdx map[string]int
	byCall  map[string][]permView // permission records not yet shown with a call
}

func (es *entries) add(e entry) *entry {
	es.list = append(es.list, e)
	return &es.list[len(es.list)-1]
}

// promptText is a session/prompt's blocks as text, other blocks than text
// as [type path].
func promptText(params json.RawMessage) string {
	var p struct {
		Prompt []contentBlock `json:"prompt"`
	}
	json.Unmarshal(params, &p)
	var b strings.Builder
	for _, c := range p.Prompt {
		if c.Type == "text" {
			b.WriteString(c.Text)
		} else {
			fmt.Fprintf(&b, "[%s %s]", c.Type, c.Path)
		}
	}
	return b.String()
}

// update reads a session/update: a chunk of text joins the stretch of its
// kind, a tool call's update folds into the call's entry.
func (es *entries) update(at int64, params json.RawMessage) {
	var u sessionUpdate
	json.Unmarshal(params, &u)
	up := u.Update
	switch up.SessionUpdate {
	case "agent_message_chunk", "agent_thought_chunk":
		kind := "message"
		if up.SessionUpdate == "agent_thought_chunk" {
			kind = "thought"
		}
		var c contentBlock
		json.Unmarshal(up.Content, &c)
		if es.last != nil && es.last.Kind == kind {
			es.last.Text += c.Text
		} else {
			es.last = es.add(entry{Kind: kind, AtMS: at, Text: c.Text})
		}
		return
	case "tool_call", "tool_call_update":
		i, ok := es.toolIdx[up.ToolCallID]
		if !ok {
			es.add(entry{Kind: "tool", AtMS: at, Tool: &toolView{ID: up.ToolCallID}, Perms: es.byCall[up.ToolCallID]})
			i = len(es.list) - 1
			es.toolIdx[up.ToolCallID] = i
			delete(es.byCall, up.ToolCallID)
		}
		foldTool(es.list[i].Tool, &up.toolCall, up.Content)
	case "plan":
		var b strings.Builder
		for _, e := range up.Entries {
			fmt.Fprintf(&b, "[%s] %s\n", e.Status, e.Content)
		}
		es.add(entry{Kind: "plan", AtMS: at, Text: strings.TrimRight(b.String(), "\n")})
	default:
		es.add(entry{Kind: "other", AtMS: at, Title: up.SessionUpdate, Text: compact(params)})
	}
	es.last = nil
}

// permission reads a session/request_permission: its decisions go with
// the tool call when the call has an entry already, else here.
func (es *entries) permission(at int64, params json.RawMessage) {
	var p struct {
		ToolCall toolCall `json:"toolCall"`
	}
	json.Unmarshal(params, &p)
	e := entry{Kind: "permission", AtMS: at, Title: p.ToolCall.Title, Tool: &toolView{ID: p.ToolCall.ToolCallID, Kind: p.ToolCall.Kind, Title: p.ToolCall.Title}}
	if _, ok := es.toolIdx[p.ToolCall.ToolCallID]; ok {
		// The decisions are shown with the call they were on.
		e.Text = "see the tool call above"
	} else {
		e.Perms = es.byCall[p.ToolCall.ToolCallID]
		delete(es.byCall, p.ToolCall.ToolCallID)
	}
	es.add(e)
}

func dirArrow(dir string) string {
	if dir == transcript.ToAgent {
		return "→"
	}
	return "←"
}

// compact is a message's params, bounded for the page.
func compact(b json.RawMessage) string {
	const max = 2000
	s := string(b)
	if len(s) > max {
		s = s[:max] + " …"
	}
	return s
}

// foldTool applies a tool_call or tool_call_update to the call's entry.
func foldTool(t *toolView, u *toolCall, content json.RawMessage) {
	if u.Title != "" {
		t.Title = u.Title
	}
	if u.Kind != "" {
		t.Kind = u.Kind
	}
	if u.Status != "" {
		t.Status = u.Status
	}
	if len(u.RawInput) > 0 {
		var in struct {
			Command any `json:"command"`
		}
		if json.Unmarshal(u.RawInput, &in) == nil && in.Command != nil {
			switch c := in.Command.(type) {
			case string:
				t.Command = c
			case []any:
				var parts []string
				for _, p := range c {
					parts = append(parts, fmt.Sprint(p))
				}
				t.Command = strings.Join(parts, " ")
			}
		}
	}
	for _, l := range u.Locations {
		loc := l.Path
		if l.Line > 0 {
			loc += fmt.Sprintf(":%d", l.Line)
		}
		if !containsString(t.Locations, loc) {
			t.Locations = append(t.Locations, loc)
		}
	}
	var blocks []contentBlock
	json.Unmarshal(content, &blocks)
	for _, c := range blocks {
		switch c.Type {
		case "diff":
			d := diffView{Path: c.Path, NewText: c.NewText}
			if c.OldText != nil {
				d.OldText = *c.OldText
				for _, l := range strings.Split(strings.TrimRight(*c.OldText, "\n"), "\n") {
					d.Lines = append(d.Lines, diffLine{"-", l})
				}
			}
			for _, l := range strings.Split(strings.TrimRight(c.NewText, "\n"), "\n") {
				d.Lines = append(d.Lines, diffLine{"+", l})
			}
			t.Diffs = append(t.Diffs, d)
		case "content":
			if c.Content != nil && c.Content.Type == "text" {
				t.Output += c.Content.Text
			}
		}
	}
}
