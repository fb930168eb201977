package modelserver

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// openai serves the OpenAI Responses API as codex (codex-acp 0.16.0, which
// embeds codex 0.137.0) speaks it: POST /v1/responses with "stream": true,
// answered by SSE events. codex needs response.created, the output items (each output_item.added,
// its deltas, output_item.done) and response.completed; a stream that ends
// without response.completed is an error it retries.
//
// # Notes
//
// The tool result count is the number of *_call_output items in the
// request's input (function_call_output for the shell, custom_tool_call_output
// for the freeform apply_patch tool). A Reply with both Shell and Write
// makes two parallel calls, so the next request skips a Script entry.
//
// The shell tool is found in the request's tools, and its argument shape
// read from its JSON schema: codex 0.137.0 declares exec_command {cmd: string}
// (older versions and other models shell_command {command: string} or shell
// {command: [argv]}). apply_patch is a freeform (custom) tool for the models
// codex knows (gpt-5.4), a function with {input} for some; for a model it
// does not know it declares none, and the patch goes through the shell tool
// as `apply_patch <<'EOF' … EOF`, which codex intercepts and treats as an
// edit (it asks permission for an edit, not for a command).
func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	body, err := openaiBody(r)
	if err != nil {
		s.record(Request{API: "openai", Path: r.URL.Path, Body: body, Reply: -1})
		openaiError(w, err)
		return
	}
	var req openaiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.record(Request{API: "openai", Path: r.URL.Path, Body: body, Reply: -1})
		openaiError(w, fmt.Errorf("request is not JSON: %w", err))
		return
	}
	n := req.toolResults()
	reply, logged := Reply{Say: "ok"}, Request{Body: body, Reply: -1}
	if len(req.Tools) > 0 {
		reply, logged = s.replyTo(body, n)
	}
	logged.API, logged.Path = "openai", r.URL.Path
	s.record(logged)
	if !s.wait(r.Context(), reply) {
		return
	}
	if reply.Error != "" {
		openaiFailed(w, n, reply.Error)
		return
	}
	items, err := req.output(reply, n)
	if err != nil {
		openaiError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sse := &openaiStream{w: w}
	id := fmt.Sprintf("resp_%d", n)
	sse.event("response.created", map[string]any{"response": map[string]any{"id": id, "status": "in_progress", "output": []any{}}})
	done := make([]any, 0, len(items))
	for i, it := range items {
		done = append(done, it.stream(sse, i, reply.Chunks))
	}
	out := 1 + len(reply.Say)/4
	in := len(body) / 4
	cached := 0
	if u := reply.Usage; u != nil {
		// OpenAI counts cached tokens as part of the input.
		in, out, cached = u.Input+u.CacheRead, u.Output, u.CacheRead
	}
	sse.event("response.completed", map[string]any{"response": map[string]any{
		"id": id, "status": "completed", "output": done,
		"usage": map[string]any{
			"input_tokens":          in,
			"input_tokens_details":  map[string]any{"cached_tokens": cached},
			"output_tokens":         out,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens":          in + out,
		},
	}})
}

// openaiFailed answers a stream that fails: response.created, then
// response.failed with the error message (code "server_error").
//
// codex 0.166 shows a failed stream's message as the turn's agent message
// and reports the thread's status as systemError; for an HTTP 500 it shows
// its own "We're currently experiencing high demand, which may cause
// temporary errors." instead of the body's message.
func openaiFailed(w http.ResponseWriter, n int, message string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sse := &openaiStream{w: w}
	id := fmt.Sprintf("resp_%d", n)
	sse.event("response.created", map[string]any{"response": map[string]any{"id": id, "status": "in_progress", "output": []any{}}})
	sse.event("response.failed", map[string]any{"response": map[string]any{
		"id": id, "status": "failed", "output": []any{},
		"error": map[string]any{"code": "server_error", "message": message},
	}})
}

// openaiError answers 400 with the API's error shape, which codex shows.
func openaiError(w http.ResponseWriter, err error) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": "modelserver: " + err.Error(), "type": "invalid_request_error"}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(b)
}

// openaiBody reads the request body, undoing a gzip Content-Encoding.
func openaiBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = r.Body
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		rd = zr
	default:
		b, _ := io.ReadAll(r.Body)
		return b, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
	b, err := io.ReadAll(io.LimitReader(rd, maxRequestBody+1))
	if err == nil && len(b) > maxRequestBody {
		return nil, fmt.Errorf("request body over %d bytes decompressed", maxRequestBody)
	}
	return b, err
}

type openaiRequest struct {
	Input []struct {
		Type string `json:"type"`
	} `json:"input"`
	Tools []openaiTool `json:"tools"`
}

// openaiTool is one entry of a request's tools: {type: function, name,
// parameters} or {type: custom, name, format} (freeform), among others.
type openaiTool struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	Parameters struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	} `json:"parameters"`
}

// toolResults counts the tool outputs in the conversation.
func (q *openaiRequest) toolResults() int {
	n := 0
	for _, it := range q.Input {
		if strings.HasSuffix(it.Type, "call_output") {
			n++
		}
	}
	return n
}

func (q *openaiRequest) tool(name string) *openaiTool {
	for i := range q.Tools {
		if q.Tools[i].Name == name {
			return &q.Tools[i]
		}
	}
	return nil
}

// shellCall is a function call of the request's shell tool running cmd.
// Where the tool takes sandbox_permissions (codex 0.166's exec_command),
// the call asks to run outside codex's sandbox, with a justification, as a
// model does for a command that writes; unless sandboxed.
func (q *openaiRequest) shellCall(cmd, callID string, sandboxed bool) (openaiItem, error) {
	for _, name := range []string{"shell_command", "exec_command", "shell"} {
		t := q.tool(name)
		if t == nil || t.Type != "function" {
			continue
		}
		props := t.Parameters.Properties
		var args map[string]any
		switch {
		case props["command"].Type == "string":
			args = map[string]any{"command": cmd}
		case props["command"].Type == "array":
			args = map[string]any{"command": []string{"bash", "-lc", cmd}}
		case props["cmd"].Type == "string":
			args = map[string]any{"cmd": cmd}
		default:
			continue
		}
		if _, ok := props["sandbox_permissions"]; ok && !sandboxed {
			args["sandbox_permissions"] = "require_escalated"
			args["justification"] = "Do you allow this command to run?"
		}
		b, _ := json.Marshal(args)
		return openaiItem{kind: "function_call", name: name, callID: callID, input: string(b)}, nil
	}
	return openaiItem{}, fmt.Errorf("no shell tool among %s", q.toolNames())
}

// patchCall is a call of the request's apply_patch tool adding w.Path.
func (q *openaiRequest) patchCall(w *Write, callID string) (openaiItem, error) {
	patch := addFilePatch(w.Path, w.Content)
	if t := q.tool("apply_patch"); t != nil {
		switch t.Type {
		case "custom":
			return openaiItem{kind: "custom_tool_call", name: t.Name, callID: callID, input: patch}, nil
		case "function":
			b, _ := json.Marshal(map[string]string{"input": patch})
			return openaiItem{kind: "function_call", name: t.Name, callID: callID, input: string(b)}, nil
		}
	}
	it, err := q.shellCall("apply_patch <<'EOF'\n"+patch+"EOF\n", callID, true)
	if err != nil {
		return it, fmt.Errorf("no apply_patch tool and %w", err)
	}
	return it, nil
}

func (q *openaiRequest) toolNames() string {
	var names []string
	for _, t := range q.Tools {
		names = append(names, t.Type+":"+t.Name)
	}
	return "[" + strings.Join(names, " ") + "]"
}

// output is what the model says for reply: a message, then its tool calls.
func (q *openaiRequest) output(reply Reply, n int) ([]openaiItem, error) {
	var items []openaiItem
	if reply.Say != "" || (reply.Shell == "" && reply.Write == nil) {
		items = append(items, openaiItem{kind: "message", input: reply.Say})
	}
	if reply.Shell != "" {
		it, err := q.shellCall(reply.Shell, fmt.Sprintf("call_%d_shell", n), reply.Sandboxed)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	if reply.Write != nil {
		it, err := q.patchCall(reply.Write, fmt.Sprintf("call_%d_write", n))
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

// addFilePatch is an apply_patch patch that creates path with content.
func addFilePatch(path, content string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	lines := strings.Split(content, "\n")
	if len(lines) > 1 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// openaiItem is one output item: an assistant message (input is its text),
// a function call (input is its JSON arguments) or a custom tool call
// (input is its freeform input).
type openaiItem struct {
	kind   string // message, function_call, custom_tool_call
	name   string
	callID string
	input  string
}

// stream writes the item's added, delta and done events and returns the
// finished item.
func (it openaiItem) stream(sse *openaiStream, index, nChunks int) map[string]any {
	id := uniqueID(fmt.Sprintf("%s_%d_", map[string]string{"message": "msg", "function_call": "fc", "custom_tool_call": "ctc"}[it.kind], index))
	if it.callID != "" {
		id = "item_" + it.callID
	}
	item := map[string]any{"type": it.kind, "id": id, "status": "in_progress"}
	switch it.kind {
	case "message":
		item["role"] = "assistant"
		item["content"] = []any{}
	case "function_call":
		item["name"], item["call_id"], item["arguments"] = it.name, it.callID, ""
	case "custom_tool_call":
		item["name"], item["call_id"], item["input"] = it.name, it.callID, ""
	}
	sse.event("response.output_item.added", map[string]any{"output_index": index, "item": item})
	switch it.kind {
	case "message":
		part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
		sse.event("response.content_part.added", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "part": part})
		for _, c := range chunks(it.input, nChunks) {
			sse.event("response.output_text.delta", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "delta": c})
		}
		sse.event("response.output_text.done", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "text": it.input})
		part = map[string]any{"type": "output_text", "text": it.input, "annotations": []any{}}
		sse.event("response.content_part.done", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "part": part})
		item["content"] = []any{part}
	case "function_call":
		sse.event("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": index, "delta": it.input})
		sse.event("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": index, "arguments": it.input})
		item["arguments"] = it.input
	case "custom_tool_call":
		sse.event("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": index, "delta": it.input})
		sse.event("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": index, "input": it.input})
		item["input"] = it.input
	}
	item["status"] = "completed"
	sse.event("response.output_item.done", map[string]any{"output_index": index, "item": item})
	return item
}

// openaiStream writes SSE events, each with a sequence number, flushed as
// it goes so that the agent sees the deltas arrive one by one.
type openaiStream struct {
	w   http.ResponseWriter
	seq int
}

func (s *openaiStream) event(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	b, _ := json.Marshal(fields)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}
