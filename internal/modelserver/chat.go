package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// chat serves the OpenAI Chat Completions API as opencode (1.18, through
// its openai-compatible provider) and Qwen Code (0.24, auth type openai)
// speak it: POST /v1/chat/completions with "stream": true, answered by SSE
// `data:` lines, each a chat.completion.chunk, then `data: [DONE]`. A
// request without "stream" gets one chat.completion object.
//
// # Notes
//
// The tool result count is the number of role "tool" messages in the
// request's conversation. A request that declares no tools (opencode's
// title, qwen's side queries) gets a plain answer and does not move the
// script; one that asks for JSON (response_format json_object or
// json_schema) gets "{}" or an instance of its schema.
//
// The shell and write tools are found by name in the request's tools
// (opencode: bash {command, description}, write {filePath, content}; qwen:
// run_shell_command {command, description, is_background}, write_file
// {file_path, content}; Copilot: bash {command, description}, create
// {path, file_text}), their argument names read from the JSON schema,
// and every other required argument filled with a placeholder of its type
// (opencode's bash refuses a call without description).
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := openaiBody(r)
	if err != nil {
		s.record(Request{API: "chat", Path: r.URL.Path, Body: body, Reply: -1})
		openaiError(w, err)
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.record(Request{API: "chat", Path: r.URL.Path, Body: body, Reply: -1})
		openaiError(w, fmt.Errorf("request is not JSON: %w", err))
		return
	}
	n := req.toolResults()
	reply, logged := Reply{Say: "ok"}, Request{Body: body, Reply: -1}
	side := len(req.Tools) == 0 || req.wantsJSON()
	if !side {
		reply, logged = s.replyTo(body, n)
	} else if req.wantsJSON() {
		reply = Reply{Say: req.jsonAnswer()}
	}
	logged.API, logged.Path = "chat", r.URL.Path
	s.record(logged)
	if !s.wait(r.Context(), reply) {
		return
	}
	calls, err := req.calls(reply, n)
	if err != nil {
		openaiError(w, err)
		return
	}
	in, out, cached := len(body)/4, 1+len(reply.Say)/4, 0
	if u := reply.Usage; u != nil {
		// Chat Completions counts cached tokens as part of the prompt.
		in, out, cached = u.Input+u.CacheRead, u.Output, u.CacheRead
	}
	usage := map[string]any{
		"prompt_tokens":             in,
		"completion_tokens":         out,
		"total_tokens":              in + out,
		"prompt_tokens_details":     map[string]any{"cached_tokens": cached},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0},
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	id := uniqueID(fmt.Sprintf("chatcmpl-%d-", n))
	model := req.Model
	if model == "" {
		model = "scripted"
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": reply.Say}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion", "created": 0, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage,
		})
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
		return
	}
	writeChatStream(w, id, model, reply, calls, finish, usage)
}

// writeChatStream answers as a stream of chat.completion.chunk events:
// the role, the text in chunks, each tool call (its name, then its
// arguments), the finish reason, the usage, then [DONE].
func writeChatStream(w http.ResponseWriter, id, model string, reply Reply, calls []map[string]any, finish string, usage map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	chunk := func(delta map[string]any, finish any, usage any) {
		c := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
		if delta == nil {
			c["choices"] = []any{}
		}
		if usage != nil {
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if reply.Say != "" {
		for _, c := range chunks(reply.Say, reply.Chunks) {
			chunk(map[string]any{"content": c}, nil, nil)
		}
	}
	for i, c := range calls {
		fn := c["function"].(map[string]any)
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": ""},
		}}}, nil, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "function": map[string]any{"arguments": fn["arguments"]},
		}}}, nil, nil)
	}
	chunk(map[string]any{}, finish, nil)
	// The usage chunk, as stream_options.include_usage asks: no choices.
	chunk(nil, nil, usage)
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools          []chatTool `json:"tools"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// chatTool is one entry of a request's tools: {type: function, function:
// {name, parameters}}.
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string `json:"name"`
		Parameters struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
			Required []string `json:"required"`
		} `json:"parameters"`
	} `json:"function"`
}

// toolResults counts the tool messages in the conversation.
func (q *chatRequest) toolResults() int {
	n := 0
	for _, m := range q.Messages {
		if m.Role == "tool" {
			n++
		}
	}
	return n
}

func (q *chatRequest) wantsJSON() bool {
	return q.ResponseFormat != nil && strings.HasPrefix(q.ResponseFormat.Type, "json")
}

// jsonAnswer is an answer to a request for JSON: an instance of its schema,
// or {}.
func (q *chatRequest) jsonAnswer() string {
	if s := q.ResponseFormat.JSONSchema.Schema; s != nil {
		b, _ := json.Marshal(geminiInstance(s))
		return string(b)
	}
	return "{}"
}

func (q *chatRequest) tool(names ...string) *chatTool {
	for _, name := range names {
		for i := range q.Tools {
			if q.Tools[i].Function.Name == name {
				return &q.Tools[i]
			}
		}
	}
	return nil
}

func (q *chatRequest) toolNames() string {
	var names []string
	for _, t := range q.Tools {
		names = append(names, t.Function.Name)
	}
	return "[" + strings.Join(names, " ") + "]"
}

// args are the arguments of a call of t: the given ones under the first
// of each list of names the tool declares, then a placeholder for every
// other required argument.
func (t *chatTool) args(given ...chatArg) (string, error) {
	props := t.Function.Parameters.Properties
	args := map[string]any{}
	for _, g := range given {
		found := false
		for _, name := range g.names {
			if _, ok := props[name]; ok {
				args[name], found = g.value, true
				break
			}
		}
		if !found {
			return "", fmt.Errorf("tool %s has none of the arguments %v", t.Function.Name, g.names)
		}
	}
	req := append([]string(nil), t.Function.Parameters.Required...)
	sort.Strings(req)
	for _, name := range req {
		if _, ok := args[name]; ok {
			continue
		}
		switch typ := fmt.Sprint(props[name].Type); {
		case strings.Contains(typ, "boolean"):
			args[name] = false
		case strings.Contains(typ, "integer"), strings.Contains(typ, "number"):
			args[name] = 0
		default:
			args[name] = "scripted " + name
		}
	}
	b, err := json.Marshal(args)
	return string(b), err
}

type chatArg struct {
	names []string
	value any
}

// The agents' shell and write tools, by name, and their arguments.
var (
	chatShellTools = []string{"bash", "run_shell_command", "shell", "shell_command"}
	chatWriteTools = []string{"write", "write_file", "create"}
	chatPathArgs   = []string{"filePath", "file_path", "path", "absolute_path"}
)

// calls are the tool calls the model makes for reply: the shell, then the
// write.
func (q *chatRequest) calls(reply Reply, n int) ([]map[string]any, error) {
	var out []map[string]any
	call := func(t *chatTool, id string, given ...chatArg) error {
		args, err := t.args(given...)
		if err != nil {
			return err
		}
		out = append(out, map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": t.Function.Name, "arguments": args}})
		return nil
	}
	if reply.Shell != "" {
		t := q.tool(chatShellTools...)
		if t == nil {
			return nil, fmt.Errorf("no shell tool among %s", q.toolNames())
		}
		if err := call(t, fmt.Sprintf("call_%d_shell", n), chatArg{[]string{"command", "cmd"}, reply.Shell}); err != nil {
			return nil, err
		}
	}
	if reply.Write != nil {
		t := q.tool(chatWriteTools...)
		if t == nil {
			return nil, fmt.Errorf("no write tool among %s", q.toolNames())
		}
		if err := call(t, fmt.Sprintf("call_%d_write", n),
			chatArg{chatPathArgs, reply.Write.Path}, chatArg{[]string{"content", "file_text"}, reply.Write.Content}); err != nil {
			return nil, err
		}
	}
	return out, nil
}
