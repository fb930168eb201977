package modelserver

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The tools opencode 1.18.33 and Qwen Code 0.24.4 declare, cut to what the
// server reads.
const (
	chatBash      = `{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"},"description":{"type":"string"}},"required":["command","description"]}}}`
	chatWrite     = `{"type":"function","function":{"name":"write","parameters":{"type":"object","properties":{"content":{"type":"string"},"filePath":{"type":"string"}},"required":["content","filePath"]}}}`
	chatQwenShell = `{"type":"function","function":{"name":"run_shell_command","parameters":{"type":"object","properties":{"command":{"type":"string"},"is_background":{"type":"boolean"},"description":{"type":"string"}},"required":["command"]}}}`
	chatQwenWrite = `{"type":"function","function":{"name":"write_file","parameters":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}}}`
	chatUser      = `{"role":"user","content":"go"}`
	chatToolMsg   = `{"role":"tool","tool_call_id":"call_0_shell","content":"ok"}`
)

// chatPost sends a streaming Chat Completions request and decodes its
// chunks; done says whether the stream ended with [DONE].
func chatPost(t *testing.T, srv *Server, extra string, tools []string, msgs ...string) (code int, chunks []map[string]any, done bool) {
	t.Helper()
	body := `{"model":"m","stream":true,` + extra + `"tools":[` + strings.Join(tools, ",") + `],"messages":[` + strings.Join(msgs, ",") + `]}`
	resp, err := http.Post(srv.URL()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("chunk is not JSON: %q", line)
		}
		chunks = append(chunks, c)
	}
	return resp.StatusCode, chunks, done
}

// chatJoin is what the chunks say: the text, the tool calls (name →
// arguments) and the finish reason.
func chatJoin(chunks []map[string]any) (text string, calls map[string]string, finish string, usage map[string]any) {
	calls = map[string]string{}
	names := map[float64]string{}
	for _, c := range chunks {
		if u, ok := c["usage"].(map[string]any); ok {
			usage = u
		}
		for _, ch := range c["choices"].([]any) {
			ch := ch.(map[string]any)
			if f, ok := ch["finish_reason"].(string); ok {
				finish = f
			}
			d := ch["delta"].(map[string]any)
			if s, ok := d["content"].(string); ok {
				text += s
			}
			tcs, _ := d["tool_calls"].([]any)
			for _, tc := range tcs {
				tc := tc.(map[string]any)
				i := tc["index"].(float64)
				fn := tc["function"].(map[string]any)
				if n, ok := fn["name"].(string); ok {
					names[i] = n
				}
				calls[names[i]] += fn["arguments"].(string)
			}
		}
	}
	return text, calls, finish, usage
}

func TestChatStreamsATextAnswer(t *testing.T) {
	srv := openaiStart(t, Script{{Say: "FINAL done", Chunks: 3}})
	code, chunks, done := chatPost(t, srv, "", []string{chatBash}, chatUser)
	if code != 200 || !done {
		t.Fatalf("status %d, [DONE] %v", code, done)
	}
	text, calls, finish, usage := chatJoin(chunks)
	if text != "FINAL done" || len(calls) != 0 || finish != "stop" {
		t.Errorf("text %q calls %v finish %q", text, calls, finish)
	}
	if usage == nil || usage["prompt_tokens"].(float64) <= 0 || usage["total_tokens"].(float64) <= usage["prompt_tokens"].(float64) {
		t.Errorf("usage %v", usage)
	}
	if r := srv.Requests(); len(r) != 1 || r[0].API != "chat" || r[0].Reply != 0 {
		t.Errorf("logged %+v", r)
	}
}

func TestChatCallsEachAgentsShellAndWriteTools(t *testing.T) {
	w := &Write{Path: "/w/x.txt", Content: "x\n"}
	for _, tc := range []struct {
		name                string
		tools               []string
		shell, write        string
		shellArgs, wrteArgs string
	}{
		{"opencode", []string{chatWrite, chatBash}, "bash", "write",
			`{"command":"ls","description":"scripted description"}`, `{"content":"x\n","filePath":"/w/x.txt"}`},
		{"qwen", []string{chatQwenWrite, chatQwenShell}, "run_shell_command", "write_file",
			`{"command":"ls"}`, `{"content":"x\n","file_path":"/w/x.txt"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := openaiStart(t, Script{{Say: "Both.", Shell: "ls", Write: w}, {Say: "FINAL"}})
			_, chunks, _ := chatPost(t, srv, "", tc.tools, chatUser)
			text, calls, finish, _ := chatJoin(chunks)
			if text != "Both." || finish != "tool_calls" {
				t.Errorf("text %q finish %q", text, finish)
			}
			if calls[tc.shell] != tc.shellArgs || calls[tc.write] != tc.wrteArgs || len(calls) != 2 {
				t.Errorf("calls %v", calls)
			}
		})
	}
}

func TestChatChoosesTheReplyByToolMessages(t *testing.T) {
	srv := openaiStart(t, Script{{Shell: "a"}, {Say: "one"}})
	if _, c, _ := chatPost(t, srv, "", []string{chatBash}, chatUser); func() string { _, calls, _, _ := chatJoin(c); return calls["bash"] }() == "" {
		t.Error("no results: want the shell call")
	}
	asst := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0_shell","type":"function","function":{"name":"bash","arguments":"{}"}}]}`
	if _, c, _ := chatPost(t, srv, "", []string{chatBash}, chatUser, asst, chatToolMsg); func() string { s, _, _, _ := chatJoin(c); return s }() != "one" {
		t.Error("one result: want the second reply")
	}
	// No tools (a title request): a plain answer that does not move the script.
	if _, c, _ := chatPost(t, srv, "", nil, chatUser); func() string { s, _, _, _ := chatJoin(c); return s }() != "ok" {
		t.Error("side request: want ok")
	}
	// A request for JSON gets an instance of its schema.
	rf := `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"next":{"type":"string","enum":["user","model"]}}}}},`
	if _, c, _ := chatPost(t, srv, rf, []string{chatBash}, chatUser); func() string { s, _, _, _ := chatJoin(c); return s }() != `{"next":"user"}` {
		t.Errorf("JSON request: %v", c)
	}
	var replies []int
	for _, r := range srv.Requests() {
		replies = append(replies, r.Reply)
	}
	if len(replies) != 4 || replies[0] != 0 || replies[1] != 1 || replies[2] != -1 || replies[3] != -1 {
		t.Errorf("logged replies %v", replies)
	}
}

func TestChatAnswersWithoutStream(t *testing.T) {
	srv := openaiStart(t, Script{{Say: "plain"}})
	resp, err := http.Post(srv.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","tools":[`+chatBash+`],"messages":[`+chatUser+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 ||
		out.Choices[0].Message.Content != "plain" || out.Choices[0].FinishReason != "stop" {
		t.Errorf("%v %+v", err, out)
	}
}

func TestChatRefusesWhatItCannotAnswer(t *testing.T) {
	srv := openaiStart(t, Script{{Shell: "ls"}})
	if code, _, _ := chatPost(t, srv, "", []string{chatWrite}, chatUser); code != http.StatusBadRequest {
		t.Errorf("a shell reply without a shell tool: status %d", code)
	}
}
