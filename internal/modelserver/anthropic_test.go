package modelserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// anthropicTools is the part of Claude Code's tool list the server looks at.
const anthropicTools = `[{"name":"Bash","input_schema":{}},{"name":"Read","input_schema":{}},{"name":"Write","input_schema":{}}]`

// messagesRequest is a Messages API request body as Claude Code sends one:
// a system prompt naming the working directory, the conversation so far
// with toolResults tool_result blocks, and tools (or none).
func messagesRequest(stream bool, toolResults int, tools string) string {
	msgs := []string{`{"role":"user","content":"Do the thing."}`}
	for i := range toolResults {
		id := `"toolu_acpflow_0` + string(rune('0'+i)) + `"`
		msgs = append(msgs,
			`{"role":"assistant","content":[{"type":"tool_use","id":`+id+`,"name":"Bash","input":{}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":`+id+`,"content":"ok"},{"type":"text","text":"go on"}]}`)
	}
	b, _ := json.Marshal(stream)
	return `{"model":"claude-test","max_tokens":100,"stream":` + string(b) +
		`,"system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":"Env:\nPrimary working directory: /ws/proj\nPlatform: linux"}]` +
		`,"messages":[` + strings.Join(msgs, ",") + `],"tools":` + tools + `}`
}

// anthropicEvent is one server-sent event: its name and its data, decoded.
type anthropicEvent struct {
	name string
	data map[string]any
}

func postMessages(t *testing.T, ctx context.Context, srv *Server, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL()+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

func streamMessages(t *testing.T, srv *Server, body string) []anthropicEvent {
	t.Helper()
	resp, err := postMessages(t, context.Background(), srv, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	var out []anthropicEvent
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			e := anthropicEvent{name: name}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.data); err != nil {
				t.Fatalf("data is not JSON: %q", line)
			}
			if e.data["type"] != name {
				t.Errorf("event %q carries type %v", name, e.data["type"])
			}
			out = append(out, e)
		case line != "":
			t.Errorf("unexpected line %q", line)
		}
	}
	return out
}

// anthropicMessage is a streamed reply put back together.
type anthropicMessage struct {
	events []string // names, in order
	texts  []string // text deltas
	tools  []anthropicToolUse
	stop   string
}

type anthropicToolUse struct {
	id, name string
	input    map[string]string
}

func assembleMessage(t *testing.T, es []anthropicEvent) anthropicMessage {
	t.Helper()
	var m anthropicMessage
	partial := map[int]string{}
	for _, e := range es {
		m.events = append(m.events, e.name)
		switch e.name {
		case "content_block_start":
			cb := e.data["content_block"].(map[string]any)
			if cb["type"] == "tool_use" {
				m.tools = append(m.tools, anthropicToolUse{id: cb["id"].(string), name: cb["name"].(string)})
			}
		case "content_block_delta":
			d := e.data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				m.texts = append(m.texts, d["text"].(string))
			case "input_json_delta":
				partial[int(e.data["index"].(float64))] += d["partial_json"].(string)
			}
		case "message_delta":
			m.stop = e.data["delta"].(map[string]any)["stop_reason"].(string)
		}
	}
	for i := range m.tools {
		for _, js := range partial {
			if err := json.Unmarshal([]byte(js), &m.tools[i].input); err != nil {
				t.Errorf("tool input %q: %v", js, err)
			}
		}
	}
	return m
}

func startAnthropic(t *testing.T, script Script) *Server {
	t.Helper()
	srv, err := Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

var anthropicScript = Script{
	{Say: "Step 1: Bash.", Shell: "echo hi > shell.txt", Chunks: 3},
	{Say: "Step 2: Write.", Write: &Write{Path: "note.txt", Content: "written ✓\n"}},
	{Say: "FINAL done"},
}

func TestAnthropicStreamsTheScriptByToolResults(t *testing.T) {
	srv := startAnthropic(t, anthropicScript)
	for _, tc := range []struct {
		name        string
		toolResults int
		texts       []string
		tool        anthropicToolUse // name "" for none
		stop        string
	}{
		{"the first request calls Bash after three chunks of text", 0,
			[]string{"Step", " 1: ", "Bash."},
			anthropicToolUse{id: "toolu_acpflow_00", name: "Bash", input: map[string]string{"command": "echo hi > shell.txt", "description": "Run a command for the script"}},
			"tool_use"},
		{"one tool result calls Write with the path under the working directory", 1,
			[]string{"Step 2: Write."},
			anthropicToolUse{id: "toolu_acpflow_01", name: "Write", input: map[string]string{"file_path": "/ws/proj/note.txt", "content": "written ✓\n"}},
			"tool_use"},
		{"two tool results end the turn", 2, []string{"FINAL done"}, anthropicToolUse{}, "end_turn"},
		{"past the end the last reply repeats", 5, []string{"FINAL done"}, anthropicToolUse{}, "end_turn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := assembleMessage(t, streamMessages(t, srv, messagesRequest(true, tc.toolResults, anthropicTools)))
			if !slices.Equal(m.texts, tc.texts) {
				t.Errorf("text deltas %q, want %q", m.texts, tc.texts)
			}
			if m.stop != tc.stop {
				t.Errorf("stop_reason %q, want %q", m.stop, tc.stop)
			}
			want := []string{"message_start", "content_block_start"}
			for range tc.texts {
				want = append(want, "content_block_delta")
			}
			want = append(want, "content_block_stop")
			if tc.tool.name == "" {
				if len(m.tools) != 0 {
					t.Errorf("tool calls %v, want none", m.tools)
				}
			} else {
				want = append(want, "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop")
				if len(m.tools) != 1 || m.tools[0].id != tc.tool.id || m.tools[0].name != tc.tool.name || !maps.Equal(m.tools[0].input, tc.tool.input) {
					t.Errorf("tool calls %+v, want %+v", m.tools, tc.tool)
				}
			}
			want = append(want, "message_delta", "message_stop")
			if !slices.Equal(m.events, want) {
				t.Errorf("events %v\nwant   %v", m.events, want)
			}
		})
	}
	var replies []int
	for _, r := range srv.Requests() {
		replies = append(replies, r.Reply)
	}
	if !slices.Equal(replies, []int{0, 1, 2, 2}) {
		t.Errorf("logged replies %v, want [0 1 2 2]", replies)
	}
}

func TestAnthropicAnswersARequestWithoutToolsAsASideRequest(t *testing.T) {
	srv := startAnthropic(t, anthropicScript)
	m := assembleMessage(t, streamMessages(t, srv, messagesRequest(true, 1, "[]")))
	if strings.Join(m.texts, "") != "OK" || m.stop != "end_turn" || len(m.tools) != 0 {
		t.Errorf("side answer %+v", m)
	}
	if rs := srv.Requests(); len(rs) != 1 || rs[0].Reply != -1 || rs[0].API != "anthropic" || rs[0].Path != "/v1/messages" {
		t.Errorf("log %+v, want one anthropic request with reply -1", rs)
	}
}

func TestAnthropicAnswersWithoutStreamAsOneMessage(t *testing.T) {
	srv := startAnthropic(t, anthropicScript)
	resp, err := postMessages(t, context.Background(), srv, messagesRequest(false, 0, anthropicTools))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Type       string `json:"type"`
		Role       string `json:"role"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string            `json:"type"`
			Text  string            `json:"text"`
			ID    string            `json:"id"`
			Name  string            `json:"name"`
			Input map[string]string `json:"input"`
		} `json:"content"`
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || m.Role != "assistant" || m.StopReason != "tool_use" || len(m.Content) != 2 {
		t.Fatalf("message %+v", m)
	}
	if c := m.Content[0]; c.Type != "text" || c.Text != "Step 1: Bash." {
		t.Errorf("first block %+v", c)
	}
	if c := m.Content[1]; c.Type != "tool_use" || c.Name != "Bash" || c.ID != "toolu_acpflow_00" || c.Input["command"] != "echo hi > shell.txt" {
		t.Errorf("second block %+v", c)
	}
}

func TestAnthropicSaysSoWhenTheToolIsNotOffered(t *testing.T) {
	srv := startAnthropic(t, anthropicScript)
	m := assembleMessage(t, streamMessages(t, srv, messagesRequest(true, 0, `[{"name":"Read"}]`)))
	if got := strings.Join(m.texts, ""); got != "Step 1: Bash.modelserver: the request offers no shell tool" || m.stop != "end_turn" {
		t.Errorf("texts %q, stop %q", got, m.stop)
	}
}

func TestAnthropicRefusesABodyThatIsNotJSON(t *testing.T) {
	srv := startAnthropic(t, anthropicScript)
	resp, err := postMessages(t, context.Background(), srv, "{")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d, want 400", resp.StatusCode)
	}
}

func TestAnthropicHonoursDelayAndHang(t *testing.T) {
	t.Run("a delayed reply comes after the delay", func(t *testing.T) {
		srv := startAnthropic(t, Script{{Say: "late", Delay: 200 * time.Millisecond}})
		begin := time.Now()
		m := assembleMessage(t, streamMessages(t, srv, messagesRequest(true, 0, anthropicTools)))
		if d := time.Since(begin); d < 200*time.Millisecond || strings.Join(m.texts, "") != "late" {
			t.Errorf("%q after %s", m.texts, d)
		}
	})
	t.Run("a hanging reply holds until the client gives up", func(t *testing.T) {
		srv := startAnthropic(t, Script{{Say: "never", Hang: true}})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		resp, err := postMessages(t, ctx, srv, messagesRequest(true, 0, anthropicTools))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("a hanging reply answered: status %d", resp.StatusCode)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the client's deadline", err)
		}
	})
	t.Run("a hanging reply gives up when the server closes", func(t *testing.T) {
		srv := startAnthropic(t, Script{{Say: "never", Hang: true}})
		done := make(chan error, 1)
		go func() {
			resp, err := postMessages(t, context.Background(), srv, messagesRequest(true, 0, anthropicTools))
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		time.Sleep(100 * time.Millisecond)
		srv.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the hanging request outlived Close by 30 s")
		}
	})
}

func TestACueAnswersTheRequestsThatCarryItsText(t *testing.T) {
	srv, err := StartCued(Script{{Say: "Looks fine."}}, Cue{Carries: "did not match", Script: Script{{Say: `{"ok": true}`}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	first := messagesRequest(true, 0, anthropicTools)
	followUp := strings.Replace(first, `"content":"Do the thing."}`,
		`"content":"Do the thing."},{"role":"assistant","content":"Looks fine."},{"role":"user","content":"Your answer did not match."}`, 1)
	for _, c := range []struct{ body, want, cue string }{{first, "Looks fine.", ""}, {followUp, `{"ok": true}`, "did not match"}} {
		m := assembleMessage(t, streamMessages(t, srv, c.body))
		if got := strings.Join(m.texts, ""); got != c.want || m.stop != "end_turn" {
			t.Errorf("answered %q (%s), want %q", got, m.stop, c.want)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Cue != "" || reqs[1].Cue != "did not match" || reqs[1].Reply != 0 {
		t.Errorf("log %+v: want the Script's then the cue's reply 0", reqs)
	}
}

// Claude Code 2.1.318 lists ExitPlanMode among its deferred tools: the
// server loads it with a ToolSearch call first, whose result does not move
// the script along, then calls it.
func TestAnthropicLoadsADeferredToolWithToolSearch(t *testing.T) {
	srv := startAnthropic(t, Script{{Say: "The plan.", Plan: "1. do it"}, {Say: "FINAL done"}})
	deferred := `[{"name":"Bash","input_schema":{}},{"name":"ToolSearch","input_schema":{}}]`
	m := assembleMessage(t, streamMessages(t, srv, messagesRequest(true, 0, deferred)))
	if len(m.tools) != 1 || m.tools[0].name != "ToolSearch" || m.tools[0].input["query"] != "select:ExitPlanMode" || len(m.texts) != 0 || m.stop != "tool_use" {
		t.Fatalf("tools %+v, texts %q, stop %q; want one ToolSearch for ExitPlanMode and no text", m.tools, m.texts, m.stop)
	}
	search := `{"role":"assistant","content":[{"type":"tool_use","id":"` + m.tools[0].id + `","name":"ToolSearch","input":{"query":"select:ExitPlanMode"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + m.tools[0].id + `","content":[{"type":"tool_reference","tool_name":"ExitPlanMode"}]}]}`
	loaded := strings.Replace(messagesRequest(true, 0, `[{"name":"Bash"},{"name":"ToolSearch"},{"name":"ExitPlanMode"}]`),
		`"content":"Do the thing."}`, `"content":"Do the thing."},`+search, 1)
	m = assembleMessage(t, streamMessages(t, srv, loaded))
	if got := strings.Join(m.texts, ""); got != "The plan." || len(m.tools) != 1 || m.tools[0].name != "ExitPlanMode" || m.tools[0].input["plan"] != "1. do it" {
		t.Errorf("texts %q, tools %+v; want the plan's text and an ExitPlanMode call (the search result is not a script step)", got, m.tools)
	}
	// Without ToolSearch (or once searched in vain) it says so.
	m = assembleMessage(t, streamMessages(t, srv, messagesRequest(true, 0, `[{"name":"Bash"}]`)))
	if got := strings.Join(m.texts, ""); got != "The plan.modelserver: the request offers no ExitPlanMode tool" {
		t.Errorf("texts %q", got)
	}
}

// Claude Code 2.1.318 states its working directory in a message of the
// conversation, not in the system prompt: a relative Write path resolves
// against it.
func TestAnthropicFindsTheWorkingDirectoryInAMessage(t *testing.T) {
	srv := startAnthropic(t, Script{{Write: &Write{Path: "note.txt", Content: "x"}}})
	body := `{"model":"m","stream":true,"system":"You are Claude Code.","messages":[` +
		`{"role":"user","content":"Do it."},{"role":"system","content":"# Environment\n - Primary working directory: /ws/msg\n - Platform: linux"}],` +
		`"tools":[{"name":"Write"}]}`
	m := assembleMessage(t, streamMessages(t, srv, body))
	if len(m.tools) != 1 || m.tools[0].input["file_path"] != "/ws/msg/note.txt" {
		t.Errorf("tools %+v; want a Write of /ws/msg/note.txt", m.tools)
	}
}
