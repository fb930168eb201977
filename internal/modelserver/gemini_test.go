package modelserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// geminiTurnRequest is a request as gemini-cli sends it for a turn: the
// user's prompt, the model's earlier calls and n tool results, and its
// tool declarations.
func geminiTurnRequest(n int) string {
	contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Do the two steps."}}}}
	for i := 0; i < n; i++ {
		contents = append(contents,
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{"command": "true"}}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "run_shell_command", "response": map[string]any{"output": ""}}}}},
		)
	}
	b, _ := json.Marshal(map[string]any{
		"contents": contents,
		"tools": []any{map[string]any{"functionDeclarations": []any{
			map[string]any{"name": "read_file", "parametersJsonSchema": map[string]any{"type": "object", "properties": map[string]any{"file_path": map[string]any{"type": "string"}}}},
			map[string]any{"name": "run_shell_command", "parametersJsonSchema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}, "description": map[string]any{"type": "string"}}}},
			map[string]any{"name": "write_file", "parametersJsonSchema": map[string]any{"type": "object", "properties": map[string]any{"file_path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}},
		}}},
	})
	return string(b)
}

// geminiStream posts body to the stream method and decodes its events.
func geminiStream(t *testing.T, srv *Server, body string) []geminiResponse {
	t.Helper()
	resp, err := http.Post(srv.URL()+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var out []geminiResponse
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		var r geminiResponse
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		out = append(out, r)
	}
	return out
}

func TestGeminiStreamsTheScriptedReplyForTheNumberOfToolResults(t *testing.T) {
	script := Script{
		{Say: "Step 1: Bash.", Shell: "touch shell.txt"},
		{Say: "Step 2: Write.", Write: &Write{Path: "/ws/w.txt", Content: "hi\n"}},
		{Say: "FINAL done", Chunks: 3},
	}
	srv, err := Start(script)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		results int
		text    string
		call    *geminiFunctionCall
		events  int
	}{
		{"the first request gets a shell call", 0, "Step 1: Bash.", &geminiFunctionCall{Name: "run_shell_command", Args: map[string]any{"command": "touch shell.txt"}}, 2},
		{"one tool result gets a write call", 1, "Step 2: Write.", &geminiFunctionCall{Name: "write_file", Args: map[string]any{"file_path": "/ws/w.txt", "content": "hi\n"}}, 2},
		{"two tool results get the final answer in chunks", 2, "FINAL done", nil, 3},
		{"past the end the last reply repeats", 5, "FINAL done", nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := geminiStream(t, srv, geminiTurnRequest(tc.results))
			if len(events) != tc.events {
				t.Fatalf("%d events, want %d: %+v", len(events), tc.events, events)
			}
			var text string
			var call *geminiFunctionCall
			for i, e := range events {
				if len(e.Candidates) != 1 || e.Candidates[0].Content.Role != "model" {
					t.Fatalf("event %d: %+v", i, e)
				}
				last := i == len(events)-1
				if got := e.Candidates[0].FinishReason; (got == "STOP") != last {
					t.Errorf("event %d: finishReason %q", i, got)
				}
				if (e.UsageMetadata != nil) != last {
					t.Errorf("event %d: usageMetadata %+v", i, e.UsageMetadata)
				}
				for _, p := range e.Candidates[0].Content.Parts {
					text += p.Text
					if p.FunctionCall != nil {
						call = p.FunctionCall
					}
				}
			}
			if text != tc.text {
				t.Errorf("text %q, want %q", text, tc.text)
			}
			gotCall, _ := json.Marshal(call)
			wantCall, _ := json.Marshal(tc.call)
			if string(gotCall) != string(wantCall) {
				t.Errorf("call %s, want %s", gotCall, wantCall)
			}
		})
	}
	var replies []int
	for _, r := range srv.Requests() {
		replies = append(replies, r.Reply)
	}
	if got, want := replies, []int{0, 1, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("logged replies %v, want %v", got, want)
	}
}

func TestGeminiCallsTheToolsByTheNamesTheAgentDeclares(t *testing.T) {
	srv, err := Start(Script{{Shell: "ls"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	body := `{"contents":[{"role":"user","parts":[{"text":"go"}]}],"tools":[{"functionDeclarations":[
		{"name":"shell","parameters":{"type":"OBJECT","properties":{"cmd":{"type":"STRING"}}}}]}]}`
	events := geminiStream(t, srv, body)
	call := events[len(events)-1].Candidates[0].Content.Parts[0].FunctionCall
	if call == nil || call.Name != "shell" || call.Args["cmd"] != "ls" {
		t.Errorf("call %+v, want shell {cmd: ls}", call)
	}
}

func TestGeminiAnswersSideCallsOutsideTheScript(t *testing.T) {
	srv, err := Start(Script{{Say: "scripted", Shell: "rm -rf /"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		name string
		body string
		want string
	}{
		{"the router gets the first model choice", `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"reasoning":{"type":"string"},"model_choice":{"type":"string","enum":["flash","pro"]}},"required":["reasoning","model_choice"]}}}`,
			`{"model_choice":"flash","reasoning":"ok"}`},
		{"the next-speaker check hands over to the user", `{"contents":[],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"reasoning":{"type":"string"},"next_speaker":{"type":"string","enum":["user","model"]}}}}}`,
			`{"next_speaker":"user","reasoning":"ok"}`},
		{"a numerical classifier gets a number", `{"contents":[],"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT","properties":{"complexity_score":{"type":"INTEGER"}}}}}`,
			`{"complexity_score":1}`},
		{"a plain side call gets a short text", `{"contents":[{"role":"user","parts":[{"text":"title?"}]}]}`, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL()+"/v1beta/models/gemini-2.5-flash-lite:generateContent", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var r geminiResponse
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d: %v", resp.StatusCode, err)
			}
			c := r.Candidates[0]
			if c.FinishReason != "STOP" || len(c.Content.Parts) != 1 || c.Content.Parts[0].Text != tc.want {
				t.Errorf("answer %+v, want the text %s", c, tc.want)
			}
		})
	}
	for _, r := range srv.Requests() {
		if r.Reply != -1 {
			t.Errorf("side call %s logged as reply %d, want -1", r.Path, r.Reply)
		}
	}
}

func TestGeminiCountsTokens(t *testing.T) {
	srv, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Post(srv.URL()+"/v1beta/models/gemini-2.5-flash:countTokens", "application/json", strings.NewReader(`{"contents":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct{ TotalTokens int }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.TotalTokens <= 0 {
		t.Errorf("countTokens: %+v, %v", r, err)
	}
}

func TestGeminiRefusesWhatItDoesNotServe(t *testing.T) {
	srv, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"a path that is no model method", "/v1beta/files", `{}`, 404},
		{"an unknown model method", "/v1beta/models/gemini-2.5-flash:embedContent", `{}`, 404},
		{"a body that is not JSON", "/v1beta/models/gemini-2.5-flash:generateContent", `{`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL()+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

func TestGeminiHonoursDelayAndHang(t *testing.T) {
	srv, err := Start(Script{{Say: "late", Delay: 200 * time.Millisecond}, {Say: "never", Hang: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	begin := time.Now()
	events := geminiStream(t, srv, geminiTurnRequest(0))
	if d := time.Since(begin); d < 200*time.Millisecond || events[0].Candidates[0].Content.Parts[0].Text != "late" {
		t.Errorf("delayed reply after %s: %+v", d, events)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL()+"/v1beta/models/m:streamGenerateContent?alt=sse", strings.NewReader(geminiTurnRequest(1)))
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a hanging reply answered: %d", resp.StatusCode)
	}
	if ctx.Err() == nil {
		t.Errorf("the request failed before its deadline: %v", err)
	}
}
