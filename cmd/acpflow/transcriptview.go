package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/internal/bytesize"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
)

// transcriptView prints step attempts for a person (`acpflow show RUN
// --transcript`): one line per message, with its time offset and its
// direction (→ acpflow to the agent, ← the agent to acpflow). Streamed
// text (an agent's message, its thoughts) is joined into one entry per
// stretch; a permission request shows the decision acpflow made and the
// rule that made it; answers are named by the request they answer.
type transcriptView struct {
	w io.Writer

	// The methods of requests awaiting their answers, by direction and id
	// (per attempt), and the permission records not yet matched, by step
	// and tool call id: a step's records cover all its attempts.
	pending map[string]string
	records map[string][]policies.PermissionRecord
	stepID  string

	// A stretch of streamed text being joined.
	textKind string
	textAt   int64
	text     strings.Builder
}

// rpc is the part of a JSON-RPC message the view reads.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// file prints the attempts of f, only those of step when it is not "".
func (v *transcriptView) file(f *transcript.File, step string) {
	v.records = map[string][]policies.PermissionRecord{}
	for _, s := range f.Steps {
		for _, r := range s.Permissions {
			k := s.Step + "\x00" + r.ToolCallID
			v.records[k] = append(v.records[k], r)
		}
	}
	first := true
	for i := range f.Steps {
		if step != "" && f.Steps[i].Step != step {
			continue
		}
		if !first {
			fmt.Fprintln(v.w)
		}
		first = false
		v.step(&f.Steps[i])
	}
}

func (v *transcriptView) step(s *transcript.Step) {
	fmt.Fprintf(v.w, "step %s", s.Step)
	if s.Index != nil {
		fmt.Fprintf(v.w, "[%d]", *s.Index)
	}
	fmt.Fprintf(v.w, ", attempt %d", s.Attempt)
	if s.Agent != "" {
		fmt.Fprintf(v.w, ", agent %s", termtext.Line(s.Agent, idMax))
	}
	fmt.Fprintf(v.w, ": %d messages\n", len(s.Messages))
	v.pending = map[string]string{}
	v.stepID = s.Step
	var exchanges []transcript.Exchange
	if s.Model != nil {
		exchanges = s.Model.Exchanges
	}
	for _, m := range s.Messages {
		for len(exchanges) > 0 && exchanges[0].AtMS <= m.AtMS {
			v.exchange(&exchanges[0])
			exchanges = exchanges[1:]
		}
		v.message(m)
	}
	for i := range exchanges {
		v.exchange(&exchanges[i])
	}
	v.flush()
	if s.Truncated {
		fmt.Fprintf(v.w, "  … truncated: the transcript reached its size cap and later messages were not kept\n")
	}
	if s.Model != nil && s.Model.Truncated {
		fmt.Fprintf(v.w, "  … truncated: the model exchanges reached their size cap and later ones were not kept\n")
	}
}

// exchange prints one model request the agent made through its gateway
// (record: true) and how it was answered.
func (v *transcriptView) exchange(x *transcript.Exchange) {
	v.flush()
	what := fmt.Sprintf("model %s %s", termtext.Line(x.Method, idMax), termtext.Line(x.Path, commandMax))
	if x.Model != "" {
		what += " " + termtext.Line(x.Model, idMax)
	}
	switch {
	case x.Refused != "":
		what += fmt.Sprintf(" → %d, refused by the gateway (%s)", x.Status, termtext.Line(x.Refused, idMax))
	case x.Status == 0:
		what += " → no answer (the agent gave up on it)"
	default:
		what += fmt.Sprintf(" → %d", x.Status)
	}
	if len(x.Response) > 0 {
		what += fmt.Sprintf(" (%s, %s)", orWord(termtext.Line(x.ContentType, idMax), "no type"), bytesize.Format(int64(len(x.Response))))
	}
	if x.RequestTruncated || x.ResponseTruncated {
		what += ", cut at the record limit"
	}
	fmt.Fprintf(v.w, "  %s  %s\n", offset(x.AtMS), what)
}

func (v *transcriptView) message(m transcript.Message) {
	var r rpc
	if err := json.Unmarshal(m.Msg, &r); err != nil {
		v.line(m, "(not JSON-RPC: %s)", termtext.Line(string(m.Msg), 120))
		return
	}
	arrow := "←"
	if m.Dir == transcript.ToAgent {
		arrow = "→"
	}
	key := m.Dir + string(r.ID)
	switch {
	case r.Method != "" && len(r.ID) > 0: // a request
		v.pending[key] = r.Method
		v.request(m, arrow, &r)
	case r.Method != "": // a notification
		v.notification(m, arrow, &r)
	default: // an answer to the other side's request
		other := transcript.FromAgent
		if m.Dir == transcript.FromAgent {
			other = transcript.ToAgent
		}
		method := v.pending[other+string(r.ID)]
		delete(v.pending, other+string(r.ID))
		v.answer(m, arrow, method, &r)
	}
}

func (v *transcriptView) request(m transcript.Message, arrow string, r *rpc) {
	switch r.Method {
	case "session/new", "session/load", "session/resume", "session/fork":
		var p struct {
			Cwd       string `json:"cwd"`
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(r.Params, &p)
		what := r.Method + " in " + termtext.Line(p.Cwd, commandMax)
		if p.SessionID != "" {
			what = r.Method + " " + termtext.Line(p.SessionID, idMax) + " in " + termtext.Line(p.Cwd, commandMax)
		}
		v.line(m, "%s %s", arrow, what)
	case "session/prompt":
		var p struct {
			Prompt []struct {
				Type string `json:"type"`
				Text string `json:"text"`
				URI  string `json:"uri"`
			} `json:"prompt"`
		}
		json.Unmarshal(r.Params, &p)
		var parts []string
		for _, b := range p.Prompt {
			switch {
			case b.Type == "text":
				parts = append(parts, b.Text)
			case b.URI != "":
				parts = append(parts, "["+termtext.Line(b.Type, kindMax)+" "+termtext.Line(b.URI, commandMax)+"]")
			default:
				parts = append(parts, "["+termtext.Line(b.Type, kindMax)+"]")
			}
		}
		v.block(m, arrow+" prompt", strings.Join(parts, "\n"))
	case "session/request_permission":
		v.permission(m, arrow, r)
	default:
		v.line(m, "%s %s", arrow, termtext.Line(r.Method, idMax))
	}
}

// permission shows a request with the decision acpflow recorded for its
// tool call (in the order the requests came), or, without a record, the
// option the answer selected (shown with the answer).
func (v *transcriptView) permission(m transcript.Message, arrow string, r *rpc) {
	var p struct {
		ToolCall struct {
			ToolCallID string `json:"toolCallId"`
			Title      string `json:"title"`
			Kind       string `json:"kind"`
		} `json:"toolCall"`
		Options []struct {
			OptionID string `json:"optionId"`
		} `json:"options"`
	}
	json.Unmarshal(r.Params, &p)
	var opts []string
	for _, o := range p.Options {
		opts = append(opts, termtext.Line(o.OptionID, idMax))
	}
	tc := p.ToolCall
	head := fmt.Sprintf("%s permission for %s %s [%s]", arrow, termtext.Line(orWord(tc.Kind, "tool"), kindMax), termtext.Quote(tc.Title, titleMax), strings.Join(opts, ", "))
	k := v.stepID + "\x00" + tc.ToolCallID
	recs := v.records[k]
	if len(recs) == 0 {
		v.line(m, "%s", head)
		return
	}
	rec := recs[0]
	v.records[k] = recs[1:]
	answer := termtext.Line(rec.OptionID, idMax)
	if rec.Outcome != "selected" {
		answer = "cancelled"
	}
	by := words.Policy(rec.Layer, rec.Policy)
	if rec.Rule != "" {
		by += ", rule " + rec.Rule
	}
	by += cli.ReasonSuffix(rec.Reason)
	v.line(m, "%s: %s → %s (%s)", head, rec.Decision, answer, by)
	if rec.Command != "" && rec.Command != tc.Title {
		fmt.Fprintf(v.w, "           command: %s\n", termtext.Quote(rec.Command, commandMax))
	}
}

// unasked shows, under a tool call that completed, the record of it as a
// call that ran without asking, if it is one (policies.md#unasked-tool-calls).
func (v *transcriptView) unasked(toolCallID string) {
	k := v.stepID + "\x00" + toolCallID
	recs := v.records[k]
	if len(recs) == 0 || recs[0].Decision != policies.DecisionUnasked {
		return
	}
	rec := recs[0]
	v.records[k] = recs[1:]
	by := words.Policy(rec.Layer, rec.Policy)
	if rec.Rule != "" {
		by += ", rule " + rec.Rule
	}
	by += cli.ReasonSuffix(rec.Reason)
	fmt.Fprintf(v.w, "           unasked: ran without asking; the policy would %s (%s)\n", rec.Would, by)
}

func (v *transcriptView) answer(m transcript.Message, arrow, method string, r *rpc) {
	if method == "" {
		method = "request " + termtext.Line(string(r.ID), idMax)
	}
	if r.Error != nil {
		v.line(m, "%s error to %s: %s (%d)", arrow, termtext.Line(method, idMax), termtext.Line(r.Error.Message, reasonMax), r.Error.Code)
		return
	}
	switch method {
	case "initialize":
		var res struct {
			ProtocolVersion int `json:"protocolVersion"`
			AgentInfo       *struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"agentInfo"`
		}
		json.Unmarshal(r.Result, &res)
		who := "an agent"
		if res.AgentInfo != nil {
			who = strings.TrimSpace(termtext.Line(res.AgentInfo.Name, idMax) + " " + termtext.Line(res.AgentInfo.Version, idMax))
		}
		v.line(m, "%s initialized: %s, protocol %d", arrow, who, res.ProtocolVersion)
	case "session/new", "session/fork":
		var res struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(r.Result, &res)
		v.line(m, "%s session %s", arrow, termtext.Line(res.SessionID, idMax))
	case "session/prompt":
		var res struct {
			StopReason string `json:"stopReason"`
		}
		json.Unmarshal(r.Result, &res)
		v.line(m, "%s end of turn: %s", arrow, termtext.Line(res.StopReason, kindMax))
	case "session/request_permission":
		var res struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		json.Unmarshal(r.Result, &res)
		answer := termtext.Line(res.Outcome.Outcome, kindMax)
		if res.Outcome.OptionID != "" {
			answer += " " + termtext.Line(res.Outcome.OptionID, idMax)
		}
		v.line(m, "%s answer: %s", arrow, answer)
	default:
		v.line(m, "%s answer to %s", arrow, termtext.Line(method, idMax))
	}
}

// notification shows a session/update by its kind; other notifications
// (session/cancel) by their method.
func (v *transcriptView) notification(m transcript.Message, arrow string, r *rpc) {
	if r.Method != "session/update" {
		v.line(m, "%s %s", arrow, termtext.Line(r.Method, idMax))
		return
	}
	var p struct {
		Update struct {
			Kind       string       `json:"sessionUpdate"`
			Content    *textContent `json:"content"`
			ToolCallID string       `json:"toolCallId"`
			Title      *string      `json:"title"`
			ToolKind   string       `json:"kind"`
			Status     string       `json:"status"`
			// notice and compaction_update (ACP's, newer than the SDK)
			Severity     string  `json:"severity"`
			Description  *string `json:"description"`
			CompactionID string  `json:"compactionId"`
			Error        *string `json:"error"`
			Entries      []struct {
				Content string `json:"content"`
				Status  string `json:"status"`
			} `json:"entries"`
		} `json:"update"`
	}
	json.Unmarshal(r.Params, &p)
	u := p.Update
	switch u.Kind {
	case "agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "compaction_summary_chunk":
		if u.Content == nil || u.Content.Type != "text" {
			v.line(m, "%s %s (%s)", arrow, u.Kind, termtext.Line(contentType(u.Content), kindMax))
			return
		}
		if v.textKind != u.Kind {
			v.flush()
			v.textKind, v.textAt = u.Kind, m.AtMS
		}
		v.text.WriteString(u.Content.Text)
		return
	case "tool_call", "tool_call_update":
		what := "tool call " + termtext.Line(u.ToolCallID, idMax)
		if u.ToolKind != "" {
			what += " " + termtext.Line(u.ToolKind, kindMax)
		}
		if u.Title != nil {
			what += " " + termtext.Quote(*u.Title, titleMax)
		}
		if u.Status != "" {
			what += " (" + termtext.Line(u.Status, kindMax) + ")"
		}
		v.line(m, "%s %s", arrow, what)
		if u.Status == "completed" {
			v.unasked(u.ToolCallID)
		}
	case "plan":
		var items []string
		for _, e := range u.Entries {
			// One line per entry: an entry's line break cannot add one.
			items = append(items, "["+termtext.Line(e.Status, kindMax)+"] "+termtext.Line(e.Content, reasonMax))
		}
		v.block(m, arrow+" plan", strings.Join(items, "\n"))
	case "notice":
		v.block(m, arrow+" notice ("+termtext.Line(u.Severity, kindMax)+")", joinDetail(u.Title, u.Description))
	case "compaction_update":
		what := "compaction " + termtext.Line(u.CompactionID, idMax) + " " + termtext.Line(u.Status, kindMax)
		if u.Error != nil {
			what += ": " + termtext.Quote(*u.Error, reasonMax)
		}
		v.line(m, "%s %s", arrow, what)
	default:
		v.line(m, "%s update: %s", arrow, termtext.Line(u.Kind, kindMax))
	}
}

// joinDetail is a notice's title with its description, if any, on the
// lines below.
func joinDetail(title, description *string) string {
	var lines []string
	for _, s := range []*string{title, description} {
		if s != nil && *s != "" {
			lines = append(lines, *s)
		}
	}
	return strings.Join(lines, "\n")
}

// textContent is an update's content block, as far as the view reads it.
type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func contentType(c *textContent) string {
	if c == nil {
		return "no content"
	}
	return c.Type
}

// flush prints the stretch of streamed text being joined, if any.
func (v *transcriptView) flush() {
	if v.textKind == "" {
		return
	}
	label := map[string]string{
		"agent_message_chunk":      "← agent",
		"agent_thought_chunk":      "← thought",
		"user_message_chunk":       "← user message (replayed)",
		"compaction_summary_chunk": "← compaction summary",
	}[v.textKind]
	at, text := v.textAt, v.text.String()
	v.textKind = ""
	v.text.Reset()
	v.entry(at, label, text)
}

// line prints one entry: the time offset, then the text.
func (v *transcriptView) line(m transcript.Message, format string, a ...any) {
	v.flush()
	fmt.Fprintf(v.w, "  %s  %s\n", offset(m.AtMS), fmt.Sprintf(format, a...))
}

// block prints an entry whose text may span lines.
func (v *transcriptView) block(m transcript.Message, label, text string) {
	v.flush()
	v.entry(m.AtMS, label, text)
}

// entry prints label: text, the lines of a longer text indented under it.
// The text is made safe first, so that a carriage return turned newline
// is indented like any other line break.
func (v *transcriptView) entry(at int64, label, text string) {
	text = strings.TrimRight(termtext.Sanitize(text), "\n")
	if !strings.Contains(text, "\n") {
		fmt.Fprintf(v.w, "  %s  %s: %s\n", offset(at), label, text)
		return
	}
	fmt.Fprintf(v.w, "  %s  %s:\n", offset(at), label)
	for _, l := range strings.Split(text, "\n") {
		fmt.Fprintf(v.w, "             %s\n", l)
	}
}

// offset is a message's time since the attempt began, in seconds.
func offset(ms int64) string {
	return fmt.Sprintf("%+8.3fs", float64(ms)/1000)
}

func orWord(s, word string) string {
	if s == "" {
		return word
	}
	return s
}
