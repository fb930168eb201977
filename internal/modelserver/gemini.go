package modelserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The Gemini API as gemini-cli 0.61 calls it:
//
//   - POST /v1beta/models/MODEL:streamGenerateContent?alt=sse: the turn,
//     answered as server-sent events, one GenerateContentResponse per
//     `data:` line; the last carries finishReason and usageMetadata.
//     gemini-cli retries a stream that ends without a finishReason or
//     without any text or function call, so every reply has both.
//   - POST /v1beta/models/MODEL:generateContent: side calls, one JSON
//     object. The router (ClassifierStrategy) and the next-speaker check
//     ask for JSON (responseMimeType application/json with a
//     responseJsonSchema) and retry up to 5 times, with backoff, on an
//     answer that does not parse; they get an instance of the schema whose
//     enums take their first value ("flash", "user").
//   - POST /v1beta/models/MODEL:countTokens: {"totalTokens": N}.
//
// Any other path or method is not found: gemini-cli does not retry a 404.

// geminiRequest is the part of a GenerateContentRequest the server reads.
type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []geminiFunction `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string         `json:"responseMimeType"`
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		ResponseSchema     map[string]any `json:"responseSchema"`
	} `json:"generationConfig"`
}

type geminiPart struct {
	Text             string              `json:"text,omitempty"`
	FunctionCall     *geminiFunctionCall `json:"functionCall,omitempty"`
	FunctionResponse json.RawMessage     `json:"functionResponse,omitempty"`
}

type geminiFunctionCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

type geminiFunction struct {
	Name                 string         `json:"name"`
	Parameters           map[string]any `json:"parameters"`
	ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
}

// params returns the names of the function's parameters.
func (f geminiFunction) params() map[string]bool {
	out := map[string]bool{}
	for _, schema := range []map[string]any{f.Parameters, f.ParametersJSONSchema} {
		props, _ := schema["properties"].(map[string]any)
		for k := range props {
			out[k] = true
		}
	}
	return out
}

// geminiTools is what the server needs to know of the agent's tools: the
// names of its shell and write tools and of their arguments.
type geminiTools struct {
	shell, shellCommand         string
	write, writePath, writeBody string
}

// geminiToolsOf finds the shell and write tools among the declarations,
// falling back to gemini-cli's names (run_shell_command {command},
// write_file {file_path, content}) where it offers nothing that fits, so
// that a missing tool shows up as the agent's own "tool not found" error.
func geminiToolsOf(req *geminiRequest) geminiTools {
	t := geminiTools{shell: "run_shell_command", shellCommand: "command", write: "write_file", writePath: "file_path", writeBody: "content"}
	var shell, write *geminiFunction
	for i := range req.Tools {
		for j := range req.Tools[i].FunctionDeclarations {
			f := &req.Tools[i].FunctionDeclarations[j]
			switch {
			case f.Name == "run_shell_command", shell == nil && strings.Contains(f.Name, "shell"):
				shell = f
			case f.Name == "write_file", write == nil && strings.Contains(f.Name, "write"):
				write = f
			}
		}
	}
	if shell != nil {
		t.shell = shell.Name
		t.shellCommand = geminiPick(shell.params(), "command", "cmd")
	}
	if write != nil {
		t.write = write.Name
		p := write.params()
		t.writePath = geminiPick(p, "file_path", "path", "absolute_path")
		t.writeBody = geminiPick(p, "content", "contents", "text")
	}
	return t
}

// geminiPick returns the first of names that params has, else the first name.
func geminiPick(params map[string]bool, names ...string) string {
	for _, n := range names {
		if params[n] {
			return n
		}
	}
	return names[0]
}

func (req *geminiRequest) hasTools() bool {
	for _, t := range req.Tools {
		if len(t.FunctionDeclarations) > 0 {
			return true
		}
	}
	return false
}

// toolResults counts the functionResponse parts in the conversation.
func (req *geminiRequest) toolResults() int {
	n := 0
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if len(p.FunctionResponse) > 0 && string(p.FunctionResponse) != "null" {
				n++
			}
		}
	}
	return n
}

// geminiResponse is one GenerateContentResponse.
type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata *geminiUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string            `json:"modelVersion,omitempty"`
	ResponseID    string            `json:"responseId,omitempty"`
}

type geminiCandidate struct {
	Content      geminiContent `json:"content"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	if !isGemini(r.URL.Path) {
		s.notFound(w, r)
		return
	}
	model, method, _ := strings.Cut(r.URL.Path[strings.LastIndex(r.URL.Path, "/models/")+len("/models/"):], ":")
	switch method {
	case "streamGenerateContent", "generateContent", "countTokens":
	default:
		s.notFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	path := r.URL.Path
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}
	logged := Request{API: "gemini", Path: path, Body: body, Reply: -1}
	var req geminiRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		s.record(logged)
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "invalid request: "+err.Error())
		return
	}
	promptTokens := len(body)/4 + 1
	if method == "countTokens" {
		s.record(logged)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int{"totalTokens": promptTokens})
		return
	}

	var reply Reply
	var parts []geminiPart
	if req.hasTools() {
		var turn Request
		reply, turn = s.replyTo(body, req.toolResults())
		logged.Reply, logged.Cue = turn.Reply, turn.Cue
		parts = geminiParts(reply, geminiToolsOf(&req))
	} else {
		// A side call (router, next speaker, title): not part of the script.
		reply = Reply{Say: geminiSideAnswer(&req)}
		parts = []geminiPart{{Text: reply.Say}}
	}
	s.record(logged)
	if !s.wait(r.Context(), reply) {
		return
	}

	usage := &geminiUsage{PromptTokenCount: promptTokens, CandidatesTokenCount: len(reply.Say)/4 + 1}
	if u := reply.Usage; u != nil {
		// Gemini counts cached tokens as part of the prompt.
		usage = &geminiUsage{PromptTokenCount: u.Input + u.CacheRead, CandidatesTokenCount: u.Output, CachedContentTokenCount: u.CacheRead}
	}
	usage.TotalTokenCount = usage.PromptTokenCount + usage.CandidatesTokenCount
	respond := func(parts []geminiPart, last bool) geminiResponse {
		resp := geminiResponse{
			Candidates:   []geminiCandidate{{Content: geminiContent{Role: "model", Parts: parts}}},
			ModelVersion: model,
			ResponseID:   fmt.Sprintf("modelserver-%d", len(s.Requests())),
		}
		if last {
			resp.Candidates[0].FinishReason = "STOP"
			resp.UsageMetadata = usage
		}
		return resp
	}

	if method == "generateContent" {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(respond(parts, true))
		return
	}
	writeGeminiStream(w, parts, reply.Chunks, respond)
}

// writeGeminiStream answers streamGenerateContent: one event per text
// delta (a text in n chunks); the last event carries the tool call (if
// any), the finish reason and the usage (respond's last).
func writeGeminiStream(w http.ResponseWriter, parts []geminiPart, n int, respond func(parts []geminiPart, last bool) geminiResponse) {
	var events [][]geminiPart
	for _, p := range parts {
		if p.Text != "" && n > 1 {
			for _, c := range chunks(p.Text, n) {
				events = append(events, []geminiPart{{Text: c}})
			}
			continue
		}
		events = append(events, []geminiPart{p})
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	for i, parts := range events {
		b, _ := json.Marshal(respond(parts, i == len(events)-1))
		if _, err := fmt.Fprintf(w, "data: %s\r\n\r\n", b); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// geminiParts is a scripted reply as the model's parts: its text, then its
// tool call.
func geminiParts(reply Reply, tools geminiTools) []geminiPart {
	var parts []geminiPart
	if reply.Say != "" {
		parts = append(parts, geminiPart{Text: reply.Say})
	}
	switch {
	case reply.Shell != "":
		parts = append(parts, geminiPart{FunctionCall: &geminiFunctionCall{
			Name: tools.shell,
			Args: map[string]any{tools.shellCommand: reply.Shell},
		}})
	case reply.Write != nil:
		parts = append(parts, geminiPart{FunctionCall: &geminiFunctionCall{
			Name: tools.write,
			Args: map[string]any{tools.writePath: reply.Write.Path, tools.writeBody: reply.Write.Content},
		}})
	}
	if len(parts) == 0 {
		// gemini-cli retries an answer with neither text nor a call.
		parts = []geminiPart{{Text: "ok"}}
	}
	return parts
}

// geminiSideAnswer answers a request without tools: an instance of the
// response schema when it asks for JSON, else a short text.
func geminiSideAnswer(req *geminiRequest) string {
	schema := req.GenerationConfig.ResponseJSONSchema
	if schema == nil {
		schema = req.GenerationConfig.ResponseSchema
	}
	if schema == nil && req.GenerationConfig.ResponseMimeType != "application/json" {
		return "ok"
	}
	b, _ := json.Marshal(geminiInstance(schema))
	return string(b)
}

// geminiInstance is a value that satisfies a JSON schema (or a Gemini
// Schema, whose types are upper case): enums take their first value,
// objects get every property, numbers their minimum or 1.
func geminiInstance(schema map[string]any) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := schema["type"].(string)
	if typ == "" {
		if types, ok := schema["type"].([]any); ok && len(types) > 0 {
			typ, _ = types[0].(string)
		}
	}
	switch strings.ToLower(typ) {
	case "string":
		return "ok"
	case "integer", "number":
		if m, ok := schema["minimum"].(float64); ok {
			return m
		}
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	}
	props, _ := schema["properties"].(map[string]any)
	out := map[string]any{}
	for k, v := range props {
		sub, _ := v.(map[string]any)
		out[k] = geminiInstance(sub)
	}
	return out
}

// geminiError writes an error the way the Gemini API does.
func geminiError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}
