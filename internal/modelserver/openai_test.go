package modelserver

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The tools codex 0.137.0 (codex-acp 0.16.0) declares, cut to what the
// server reads.
const (
	oaiShellCommand = `{"type":"function","name":"shell_command","parameters":{"type":"object","properties":{"command":{"type":"string"},"workdir":{"type":"string"}}}}`
	oaiExecCommand  = `{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}`
	oaiShellArgv    = `{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}}`
	oaiPatchCustom  = `{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"openaiStart: begin_patch hunk+ end_patch"}}`
	oaiPatchFunc    = `{"type":"function","name":"apply_patch","parameters":{"type":"object","properties":{"input":{"type":"string"}}}}`
)

// openaiEvent is one decoded event of a response stream.
type openaiEvent struct {
	name string
	data map[string]any
}

// openaiPost sends a Responses request with these tools and input items and
// decodes the event stream.
func openaiPost(t *testing.T, srv *Server, tools []string, input ...string) (int, []openaiEvent) {
	t.Helper()
	body := `{"model":"scripted","stream":true,"tools":[` + strings.Join(tools, ",") + `],"input":[` + strings.Join(input, ",") + `]}`
	resp, err := http.Post(srv.URL()+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, openaiReadSSE(t, resp)
}

func openaiReadSSE(t *testing.T, resp *http.Response) []openaiEvent {
	t.Helper()
	var out []openaiEvent
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data is not JSON: %q", line)
			}
			if d["type"] != name {
				t.Errorf("event %q carries type %v", name, d["type"])
			}
			out = append(out, openaiEvent{name, d})
		}
	}
	return out
}

func openaiNames(es []openaiEvent) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return out
}

// openaiDoneItems are the items of the stream's output_item.done events.
func openaiDoneItems(es []openaiEvent) []map[string]any {
	var out []map[string]any
	for _, e := range es {
		if e.name == "response.output_item.done" {
			out = append(out, e.data["item"].(map[string]any))
		}
	}
	return out
}

func openaiStart(t *testing.T, script Script) *Server {
	t.Helper()
	srv, err := Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

const (
	oaiUserMsg    = `{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}`
	oaiShellOut   = `{"type":"function_call_output","call_id":"call_0_shell","output":"ok"}`
	oaiPatchOut   = `{"type":"custom_tool_call_output","call_id":"call_1_write","output":"ok"}`
	oaiShellCall0 = `{"type":"function_call","name":"shell_command","call_id":"call_0_shell","arguments":"{}"}`
)

func TestOpenAIStreamsATextAnswerInChunksAndCompletes(t *testing.T) {
	srv := openaiStart(t, Script{{Say: "FINAL done", Chunks: 3}})
	code, es := openaiPost(t, srv, []string{oaiShellCommand}, oaiUserMsg)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	got := strings.Join(openaiNames(es), " ")
	want := "response.created response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	var text string
	for _, e := range es {
		if e.name == "response.output_text.delta" {
			text += e.data["delta"].(string)
		}
	}
	if text != "FINAL done" {
		t.Errorf("deltas join to %q", text)
	}
	items := openaiDoneItems(es)
	if len(items) != 1 || items[0]["type"] != "message" || items[0]["role"] != "assistant" {
		t.Fatalf("items %v", items)
	}
	if c := items[0]["content"].([]any)[0].(map[string]any); c["type"] != "output_text" || c["text"] != "FINAL done" {
		t.Errorf("content %v", c)
	}
	last := es[len(es)-1].data["response"].(map[string]any)
	usage := last["usage"].(map[string]any)
	if usage["input_tokens"].(float64) <= 0 || usage["output_tokens"].(float64) <= 0 ||
		usage["total_tokens"] != usage["input_tokens"].(float64)+usage["output_tokens"].(float64) {
		t.Errorf("usage %v", usage)
	}
	for i, e := range es {
		if e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d has sequence_number %v", i, e.data["sequence_number"])
		}
	}
}

func TestOpenAICallsTheShellToolInTheShapeItDeclares(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools []string
		tool  string
		args  string
	}{
		{"shell_command takes a string", []string{oaiShellCommand, oaiPatchCustom}, "shell_command", `{"command":"touch a b"}`},
		{"exec_command takes cmd", []string{oaiExecCommand}, "exec_command", `{"cmd":"touch a b"}`},
		{"shell takes an argv", []string{oaiShellArgv}, "shell", `{"command":["bash","-lc","touch a b"]}`},
		{"shell_command is preferred to shell", []string{oaiShellArgv, oaiShellCommand}, "shell_command", `{"command":"touch a b"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := openaiStart(t, Script{{Say: "Step 1: Bash.", Shell: "touch a b"}, {Say: "FINAL"}})
			_, es := openaiPost(t, srv, tc.tools, oaiUserMsg)
			items := openaiDoneItems(es)
			if len(items) != 2 || items[0]["type"] != "message" {
				t.Fatalf("items %v", items)
			}
			fc := items[1]
			if fc["type"] != "function_call" || fc["name"] != tc.tool || fc["arguments"] != tc.args || fc["call_id"] != "call_0_shell" {
				t.Errorf("call %v, want %s %s", fc, tc.tool, tc.args)
			}
			var delta string
			for _, e := range es {
				if e.name == "response.function_call_arguments.delta" {
					delta += e.data["delta"].(string)
				}
			}
			if delta != tc.args {
				t.Errorf("argument deltas %q", delta)
			}
		})
	}
}

func TestOpenAIWritesAFileWithApplyPatch(t *testing.T) {
	const patch = "*** Begin Patch\n*** Add File: out/x.txt\n+one\n+two\n*** End Patch\n"
	w := &Write{Path: "out/x.txt", Content: "one\ntwo\n"}
	t.Run("as a freeform tool", func(t *testing.T) {
		srv := openaiStart(t, Script{{Shell: "true"}, {Write: w}})
		_, es := openaiPost(t, srv, []string{oaiShellCommand, oaiPatchCustom}, oaiUserMsg, oaiShellCall0, oaiShellOut)
		items := openaiDoneItems(es)
		if len(items) != 1 || items[0]["type"] != "custom_tool_call" || items[0]["name"] != "apply_patch" ||
			items[0]["input"] != patch || items[0]["call_id"] != "call_1_write" {
			t.Fatalf("items %v", items)
		}
		if !strings.Contains(strings.Join(openaiNames(es), " "), "response.custom_tool_call_input.delta") {
			t.Errorf("no input delta: %v", openaiNames(es))
		}
	})
	t.Run("as a function", func(t *testing.T) {
		srv := openaiStart(t, Script{{Shell: "true"}, {Write: w}})
		_, es := openaiPost(t, srv, []string{oaiPatchFunc}, oaiUserMsg, oaiShellCall0, oaiShellOut)
		items := openaiDoneItems(es)
		b, _ := json.Marshal(map[string]string{"input": patch})
		if len(items) != 1 || items[0]["type"] != "function_call" || items[0]["arguments"] != string(b) {
			t.Fatalf("items %v", items)
		}
	})
	t.Run("through the shell when there is no apply_patch tool", func(t *testing.T) {
		srv := openaiStart(t, Script{{Shell: "true"}, {Write: w}})
		_, es := openaiPost(t, srv, []string{oaiShellCommand}, oaiUserMsg, oaiShellCall0, oaiShellOut)
		items := openaiDoneItems(es)
		b, _ := json.Marshal(map[string]string{"command": "apply_patch <<'EOF'\n" + patch + "EOF\n"})
		if len(items) != 1 || items[0]["name"] != "shell_command" || items[0]["arguments"] != string(b) {
			t.Fatalf("items %v", items)
		}
	})
}

func TestAddFilePatchKeepsEveryLine(t *testing.T) {
	for content, want := range map[string]string{
		"":             "+\n",
		"a":            "+a\n",
		"a\n":          "+a\n",
		"a\n\nb":       "+a\n+\n+b\n",
		"  indented\n": "+  indented\n",
	} {
		got := addFilePatch("f", content)
		if got != "*** Begin Patch\n*** Add File: f\n"+want+"*** End Patch\n" {
			t.Errorf("content %q: patch %q", content, got)
		}
	}
}

func TestOpenAIChoosesTheReplyByToolResults(t *testing.T) {
	srv := openaiStart(t, Script{{Say: "zero", Shell: "a"}, {Say: "one", Shell: "b"}, {Say: "two"}})
	say := func(es []openaiEvent) string {
		for _, it := range openaiDoneItems(es) {
			if it["type"] == "message" {
				return it["content"].([]any)[0].(map[string]any)["text"].(string)
			}
		}
		return ""
	}
	tools := []string{oaiShellCommand, oaiPatchCustom}
	if _, es := openaiPost(t, srv, tools, oaiUserMsg); say(es) != "zero" {
		t.Errorf("no results: %q", say(es))
	}
	if _, es := openaiPost(t, srv, tools, oaiUserMsg, oaiShellCall0, oaiShellOut); say(es) != "one" {
		t.Errorf("one result: %q", say(es))
	}
	if _, es := openaiPost(t, srv, tools, oaiUserMsg, oaiShellOut, oaiPatchOut); say(es) != "two" {
		t.Errorf("two results: %q", say(es))
	}
	if _, es := openaiPost(t, srv, tools, oaiUserMsg, oaiShellOut, oaiPatchOut, oaiShellOut); say(es) != "two" {
		t.Errorf("past the end: %q", say(es))
	}
	// A side request (no tools: a title, a summary) gets a plain answer
	// and does not move the script.
	if _, es := openaiPost(t, srv, nil, oaiUserMsg); say(es) != "ok" {
		t.Errorf("side request: %q", say(es))
	}
	var replies []int
	for _, r := range srv.Requests() {
		if r.API != "openai" || r.Path != "/v1/responses" {
			t.Errorf("logged %s %s", r.API, r.Path)
		}
		replies = append(replies, r.Reply)
	}
	if got := replies; len(got) != 5 || got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 2 || got[4] != -1 {
		t.Errorf("logged replies %v", got)
	}
}

func TestOpenAIReadsAGzipBody(t *testing.T) {
	srv := openaiStart(t, Script{{Say: "zipped"}})
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(`{"tools":[` + oaiShellCommand + `],"input":[` + oaiUserMsg + `]}`))
	zw.Close()
	req, _ := http.NewRequest("POST", srv.URL()+"/v1/responses", &b)
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if items := openaiDoneItems(openaiReadSSE(t, resp)); len(items) != 1 {
		t.Fatalf("items %v", items)
	}
	if r := srv.Requests(); len(r) != 1 || !bytes.HasPrefix(r[0].Body, []byte(`{"tools"`)) {
		t.Errorf("logged %v", r)
	}
}

// A small body that inflates past the bound is refused, not read whole.
func TestOpenAIRefusesAGzipBodyThatInflatesPastTheBound(t *testing.T) {
	srv := openaiStart(t, Script{{Say: "zipped"}})
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(make([]byte, maxRequestBody+1))
	zw.Close()
	req, _ := http.NewRequest("POST", srv.URL()+"/v1/responses", &b)
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if msg, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(msg, []byte("decompressed")) {
		t.Errorf("%d %s, want 400 naming the bound", resp.StatusCode, msg)
	}
}

func TestOpenAIRefusesWhatItCannotAnswer(t *testing.T) {
	srv := openaiStart(t, Script{{Shell: "ls"}})
	if code, _ := openaiPost(t, srv, []string{oaiPatchCustom}, oaiUserMsg); code != http.StatusBadRequest {
		t.Errorf("a shell reply without a shell tool: status %d", code)
	}
	resp, err := http.Post(srv.URL()+"/v1/responses", "application/json", strings.NewReader("{"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body that is not JSON: status %d", resp.StatusCode)
	}
}

func TestOpenAIHonoursDelayAndHang(t *testing.T) {
	srv := openaiStart(t, Script{{Say: "late", Delay: 150 * time.Millisecond}})
	begin := time.Now()
	openaiPost(t, srv, []string{oaiShellCommand}, oaiUserMsg)
	if d := time.Since(begin); d < 150*time.Millisecond {
		t.Errorf("answered after %s", d)
	}

	hang := openaiStart(t, Script{{Hang: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", hang.URL()+"/v1/responses",
		strings.NewReader(`{"tools":[`+oaiShellCommand+`],"input":[]}`))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a hanging reply answered: %s", resp.Status)
	}
	// Close releases a hanging reply.
	done := make(chan struct{})
	go func() {
		req, _ := http.NewRequest("POST", hang.URL()+"/v1/responses", strings.NewReader(`{"tools":[`+oaiShellCommand+`],"input":[]}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		close(done)
	}()
	time.Sleep(50 * time.Millisecond)
	hang.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Error("Close did not release a hanging reply")
	}
}
