package modelserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
)

// anthropicRequest is what the server reads of a Messages API request.
type anthropicRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"` // a string or a list of text blocks
	Messages []struct {
		Content json.RawMessage `json:"content"` // a string or a list of blocks
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// toolResults counts the tool_result blocks in the conversation: the
// Script index of the reply.
func (q *anthropicRequest) toolResults() int {
	n := 0
	for _, m := range q.Messages {
		var blocks []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string
		}
		for _, b := range blocks {
			if b.Type == "tool_result" && !strings.HasPrefix(b.ToolUseID, searchID) {
				n++
			}
		}
	}
	return n
}

// searchID starts the id of a ToolSearch call the server makes to load a
// deferred tool.
const searchID = "toolu_acpflow_search_"

// searched counts the ToolSearch calls the server made for tool in the
// conversation so far.
func (q *anthropicRequest) searched(tool string) int {
	n := 0
	for _, m := range q.Messages {
		var blocks []struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Input json.RawMessage `json:"input"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_use" && strings.HasPrefix(b.ID, searchID) && strings.Contains(string(b.Input), `"select:`+tool+`"`) {
				n++
			}
		}
	}
	return n
}

// tool returns the name of the offered tool called want ("Bash", "Write"),
// else of the first one whose name contains one of the alternatives.
func (q *anthropicRequest) tool(want string, alts ...string) string {
	for _, t := range q.Tools {
		if t.Name == want {
			return t.Name
		}
	}
	for _, t := range q.Tools {
		for _, a := range alts {
			if strings.Contains(strings.ToLower(t.Name), a) {
				return t.Name
			}
		}
	}
	return ""
}

// cwd is the agent's working directory as Claude Code states it
// ("Primary working directory: /path"), or "": in the system prompt, or
// (2.1.318) in a message of the conversation.
func (q *anthropicRequest) cwd() string {
	text := texts(q.System)
	for _, m := range q.Messages {
		text += texts(m.Content)
	}
	for _, prefix := range []string{"Primary working directory: ", "Working directory: "} {
		if _, rest, ok := strings.Cut(text, prefix); ok {
			line, _, _ := strings.Cut(rest, "\n")
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// texts is the text of content that is a string or a list of blocks, one
// line per block.
func texts(content json.RawMessage) string {
	var text string
	if json.Unmarshal(content, &text) == nil {
		return text + "\n"
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(content, &blocks)
	for _, b := range blocks {
		text += b.Text + "\n"
	}
	return text
}

// anthropicBlock is one content block of a reply: text (in chunks) or a
// tool call.
type anthropicBlock struct {
	text  []string
	id    string
	name  string
	input json.RawMessage
}

// anthropic serves POST /v1/messages. A request that offers tools is part
// of the agent's turn and gets Script[n] (n = tool results so far); one
// without tools is a side request of Claude Code's (a title, a summary, a
// quota check) and gets a short text.
func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var q anthropicRequest
	if err == nil {
		err = json.Unmarshal(body, &q)
	}
	if err != nil {
		s.record(Request{API: "anthropic", Path: r.URL.Path, Body: body, Reply: -1})
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "modelserver: "+err.Error())
		return
	}
	if len(q.Tools) == 0 {
		s.record(Request{API: "anthropic", Path: r.URL.Path, Body: body, Reply: -1})
		s.anthropicReply(w, &q, []anthropicBlock{{text: []string{"OK"}}}, "end_turn", nil)
		return
	}
	n := q.toolResults()
	reply, logged := s.replyTo(body, n)
	logged.API, logged.Path = "anthropic", r.URL.Path
	s.record(logged)
	if !s.wait(r.Context(), reply) {
		return
	}
	var blocks []anthropicBlock
	if reply.Say != "" {
		blocks = append(blocks, anthropicBlock{text: chunks(reply.Say, reply.Chunks)})
	}
	// deferred is the tool to load with ToolSearch when the request does
	// not offer it.
	call, input, missing, deferred := "", any(nil), "", ""
	switch {
	case reply.Shell != "":
		call = q.tool("Bash", "bash", "shell")
		input = map[string]string{"command": reply.Shell, "description": "Run a command for the script"}
		missing = "shell"
	case reply.Write != nil:
		call = q.tool("Write", "write")
		path := reply.Write.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(q.cwd(), path)
		}
		input = map[string]string{"file_path": path, "content": reply.Write.Content}
		missing = "write"
	case reply.Plan != "":
		call = q.tool("ExitPlanMode", "exitplan")
		input = map[string]string{"plan": reply.Plan}
		missing, deferred = "ExitPlanMode", "ExitPlanMode"
	}
	stop := "end_turn"
	if deferred != "" && call == "" && q.tool("ToolSearch") != "" && q.searched(deferred) == 0 {
		// Claude Code 2.1.318 defers tools it rarely needs (ExitPlanMode,
		// NotebookEdit, Monitor, …): the request lists only their names,
		// and the model loads one with ToolSearch first. That call's
		// result does not count as a script step (toolResults), and Say
		// waits for the call it precedes.
		raw, _ := json.Marshal(map[string]string{"query": "select:" + deferred})
		search := anthropicBlock{id: fmt.Sprintf("%s%02d", searchID, n), name: "ToolSearch", input: raw}
		s.anthropicReply(w, &q, []anthropicBlock{search}, "tool_use", reply.Usage)
		return
	}
	switch {
	case input == nil:
	case call == "":
		// Say so in the answer: the test then fails on the output, not on a hang.
		blocks = append(blocks, anthropicBlock{text: []string{fmt.Sprintf("modelserver: the request offers no %s tool", missing)}})
	default:
		raw, _ := json.Marshal(input)
		blocks = append(blocks, anthropicBlock{id: fmt.Sprintf("toolu_acpflow_%02d", n), name: call, input: raw})
		stop = "tool_use"
	}
	s.anthropicReply(w, &q, blocks, stop, reply.Usage)
}

// anthropicReply answers as a stream of server-sent events when the
// request asked for one, else as one JSON message.
func (s *Server) anthropicReply(w http.ResponseWriter, q *anthropicRequest, blocks []anthropicBlock, stop string, u *Usage) {
	model := q.Model
	if model == "" {
		model = "claude-modelserver"
	}
	usage := map[string]int{"input_tokens": 10, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if u != nil {
		usage = map[string]int{"input_tokens": u.Input, "output_tokens": u.Output, "cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.CacheRead}
	}
	// message_start carries the input side and a first output count, as
	// the API sends it; message_delta the whole.
	start := map[string]int{"input_tokens": usage["input_tokens"], "output_tokens": 1,
		"cache_creation_input_tokens": usage["cache_creation_input_tokens"], "cache_read_input_tokens": usage["cache_read_input_tokens"]}
	id := uniqueID("msg_acpflow_")
	if !q.Stream {
		content := []map[string]any{}
		for _, b := range blocks {
			if b.name != "" {
				content = append(content, map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
			} else {
				content = append(content, map[string]any{"type": "text", "text": strings.Join(b.text, "")})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data map[string]any) {
		data["type"] = event
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send("message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": start,
	}})
	for i, b := range blocks {
		if b.name != "" {
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{
				"type": "tool_use", "id": b.id, "name": b.name, "input": map[string]any{}}})
			// Two deltas, as the API splits a tool's input JSON anywhere.
			for _, part := range chunks(string(b.input), 2) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{
					"type": "input_json_delta", "partial_json": part}})
			}
		} else {
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, t := range b.text {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": t}})
			}
		}
		send("content_block_stop", map[string]any{"index": i})
	}
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": usage})
	send("message_stop", map[string]any{})
}

func anthropicError(w http.ResponseWriter, code int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}})
	w.Write(bytes.TrimSpace(b))
}
