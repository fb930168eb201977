package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The agent is tested as acpflow meets it: built, spawned, spoken to in raw JSON lines over
// real pipes.
func TestTestAgent(t *testing.T) {
	bin := buildTestAgent(t)

	t.Run("with no flags it answers Hello, world and end_turn, then exits 0 on EOF", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "events.jsonl")
		a := startAgent(t, bin, "-record", rec)
		init := a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		var initResult struct {
			ProtocolVersion int            `json:"protocolVersion"`
			AuthMethods     []any          `json:"authMethods"`
			AgentInfo       map[string]any `json:"agentInfo"`
		}
		mustUnmarshal(t, init.Result, &initResult)
		if initResult.ProtocolVersion != 1 || initResult.AuthMethods == nil || len(initResult.AuthMethods) != 0 {
			t.Errorf("initialize = %s, want protocol version 1 and no auth methods", init.Result)
		}
		session := a.newSession(2)
		out, stop := a.prompt(3, session)
		if out != "Hello, world" || stop != "end_turn" {
			t.Errorf("prompt gave %q / %q, want %q / end_turn", out, stop, "Hello, world")
		}
		a.closeStdin()
		if code := a.wait(); code != 0 {
			t.Errorf("exit code %d after EOF, want 0", code)
		}
		if got, want := eventNames(t, rec), "start initialize session_new prompt eof flushed"; got != want {
			t.Errorf("recorded %q, want %q", got, want)
		}
		start := events(t, rec)[0]
		if start["pid"] != float64(a.cmd.Process.Pid) || start["env"] == nil || start["cwd"] == nil {
			t.Errorf("start event %v: want the agent's pid, env and cwd", start)
		}
	})

	t.Run("-answer answers the nth prompt with the nth text and the last one after", func(t *testing.T) {
		a := startAgent(t, bin, "-answer", "first", "-answer", "second")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		session := a.newSession(2)
		var got []string
		for id := 3; id <= 5; id++ {
			out, _ := a.prompt(id, session)
			got = append(got, out)
		}
		if strings.Join(got, "|") != "first|second|second" {
			t.Errorf("answers %q, want first, second, second", got)
		}
		a.closeStdin()
		if code := a.wait(); code != 0 {
			t.Errorf("exit code %d after EOF, want 0", code)
		}
	})

	t.Run("-crash-on initialize exits 3 with its reason on stderr and leaves no process", func(t *testing.T) {
		a := startAgent(t, bin, "-crash-on", "initialize")
		a.send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": 1}})
		if code := a.wait(); code != 3 {
			t.Errorf("exit code %d, want 3", code)
		}
		if stderr := a.stderrText(); !strings.Contains(stderr, "testagent: crashing on initialize") || !strings.Contains(stderr, "crash detail 3") {
			t.Errorf("stderr = %q, want the crash and its numbered lines", stderr)
		}
		if _, ok := a.next(); ok {
			t.Error("the crashing agent answered something")
		}
		if err := syscall.Kill(a.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("the agent's pid still exists after exit (kill 0: %v)", err)
		}
	})

	t.Run("-chunk, -stop, -noise and -garbage: only the chunks of the session are output", func(t *testing.T) {
		a := startAgent(t, bin, "-chunk", "a, b", "-chunk", "", "-chunk", "c\n", "-stop", "weird_reason", "-noise", "-garbage", "-session-id", "s-1")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		if session := a.newSession(2); session != "s-1" {
			t.Errorf("session id %q, want s-1", session)
		}
		out, stop := a.prompt(3, "s-1")
		if out != "a, bc\n" || stop != "weird_reason" {
			t.Errorf("prompt gave %q / %q, want %q / weird_reason", out, stop, "a, bc\n")
		}
		for _, kind := range []string{"agent_thought_chunk", "tool_call", "tool_call_update", "plan", "current_mode_update", "leak"} {
			if a.seen[kind] == 0 {
				t.Errorf("no %s noise was sent", kind)
			}
		}
		if a.garbageLines() == 0 {
			t.Error("no garbage line was written")
		}
	})

	t.Run("-permission asks for each tool call and reports the answers", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "events.jsonl")
		a := startAgent(t, bin, "-record", rec, "-permission", "execute:rm -rf /tmp/x", "-permission", "read:/etc/hosts",
			"-perm-options", "allow_once,reject_once")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		session := a.newSession(2)
		var asked []map[string]any
		a.onRequest = func(m message) any {
			var p map[string]any
			mustUnmarshal(t, m.Params, &p)
			asked = append(asked, p)
			if len(asked) == 1 {
				return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "opt-reject-once"}}
			}
			return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}
		}
		out, stop := a.prompt(3, session)
		want := "permission execute rm -rf /tmp/x: opt-reject-once\npermission read /etc/hosts: cancelled\nHello, world"
		if out != want || stop != "end_turn" {
			t.Errorf("prompt gave %q / %q, want %q / end_turn", out, stop, want)
		}
		if len(asked) != 2 {
			t.Fatalf("asked %d permissions, want 2", len(asked))
		}
		first, _ := json.Marshal(asked[0])
		for _, s := range []string{`"optionId":"opt-allow-once"`, `"optionId":"opt-reject-once"`, `"command":"rm -rf /tmp/x"`, `"kind":"execute"`} {
			if !bytes.Contains(first, []byte(s)) {
				t.Errorf("first request %s lacks %s", first, s)
			}
		}
		if second, _ := json.Marshal(asked[1]); !bytes.Contains(second, []byte(`"locations":[{"path":"/etc/hosts"}]`)) {
			t.Errorf("second request %s lacks its location", second)
		}
		a.closeStdin()
		a.wait()
		if got := eventNames(t, rec); strings.Count(got, "permission_answer") != 2 {
			t.Errorf("recorded %q, want two permission answers", got)
		}
	})

	t.Run("-prompt-hang ends with cancelled on session/cancel", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "events.jsonl")
		a := startAgent(t, bin, "-record", rec, "-prompt-hang")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		session := a.newSession(2)
		a.sendPrompt(3, session)
		waitForEvent(t, rec, "prompt") // the cancel comes once the prompt is the agent's, not after a sleep
		a.send(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": session}})
		if out, stop := a.collect(3, session); out != "" || stop != "cancelled" {
			t.Errorf("prompt gave %q / %q, want nothing / cancelled", out, stop)
		}
		a.closeStdin()
		a.wait()
		if got := eventNames(t, rec); !strings.Contains(got, "prompt cancel") {
			t.Errorf("recorded %q, want the cancel after the prompt", got)
		}
	})

	t.Run("-ignore-cancel keeps the turn going", func(t *testing.T) {
		a := startAgent(t, bin, "-prompt-delay", "300ms", "-ignore-cancel")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		session := a.newSession(2)
		a.sendPrompt(3, session)
		a.send(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": session}})
		if out, stop := a.collect(3, session); out != "Hello, world" || stop != "end_turn" {
			t.Errorf("prompt gave %q / %q, want Hello, world / end_turn", out, stop)
		}
	})

	t.Run("-ask-client reports the error code the client answered", func(t *testing.T) {
		a := startAgent(t, bin, "-ask-client", "fs/read_text_file", "-no-chunks")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		session := a.newSession(2)
		a.onRequest = func(m message) any { return &rpcError{Code: -32601, Message: "Method not found"} }
		if out, _ := a.prompt(3, session); out != "client said -32601\n" {
			t.Errorf("output %q, want %q", out, "client said -32601\n")
		}
	})

	t.Run("-try runs each action and says ok or the errno", func(t *testing.T) {
		dir := t.TempDir()
		readable := filepath.Join(dir, "readable")
		os.WriteFile(readable, []byte("12345"), 0o644)
		closed, _ := net.Listen("tcp", "127.0.0.1:0")
		closedAddr := closed.Addr().String()
		closed.Close()
		open, _ := net.Listen("tcp", "127.0.0.1:0")
		defer open.Close()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hi") }))
		defer srv.Close()
		sleeper := exec.Command("sleep", "60")
		sleeper.Env = []string{"TESTAGENT_TRY_SECRET=1"}
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
		pidFile := filepath.Join(dir, "pid")
		os.WriteFile(pidFile, []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"), 0o644)
		tries := []struct{ action, want string }{
			{"write:" + filepath.Join(dir, "new"), "ok\n"},
			{"write:" + filepath.Join(dir, "no", "such", "dir"), "ERR ENOENT ("},
			{"read:" + readable, "ok (5 bytes)\n"},
			{"read:" + filepath.Join(dir, "missing"), "ERR ENOENT ("},
			{"environ:@" + pidFile, "ok (1 variables)\n"},
			{"signal:" + strconv.Itoa(sleeper.Process.Pid) + ":CONT", "ok\n"},
			{"signal:999999999", "ERR ESRCH ("},
			{"connect:" + open.Addr().String(), "ok\n"},
			{"connect:" + closedAddr, "ERR ECONNREFUSED ("},
			{"get:" + srv.URL, "ok (200 OK)\n"},
			{"proxy:" + srv.Listener.Addr().String(), "ERR no proxy in the environment"},
		}
		args := []string{"-no-chunks"}
		for _, tr := range tries {
			args = append(args, "-try", tr.action)
		}
		for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
			t.Setenv(k, "")
		}
		a := startAgent(t, bin, args...)
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		session := a.newSession(2)
		out, _ := a.prompt(3, session)
		lines := strings.SplitAfter(out, "\n")
		if len(lines) != len(tries)+1 {
			t.Fatalf("output %q: want one line per action", out)
		}
		for i, tr := range tries {
			if want := "try " + tr.action + ": " + tr.want; !strings.HasPrefix(lines[i], want) {
				t.Errorf("line %d = %q, want it to start %q", i, lines[i], want)
			}
		}
		if b, err := os.ReadFile(filepath.Join(dir, "new")); err != nil || len(b) == 0 {
			t.Errorf("write: wrote %q, %v", b, err)
		}
	})

	t.Run("-try with an unknown action is refused at startup", func(t *testing.T) {
		out, err := exec.Command(bin, "-try", "format:/").CombinedOutput()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(string(out), `-try "format:/"`) {
			t.Errorf("exit %d, %q; want 2 and the action named", code, out)
		}
	})

	t.Run("-require-auth refuses session/new until authenticate", func(t *testing.T) {
		a := startAgent(t, bin, "-require-auth", "test-login")
		init := a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		if !bytes.Contains(init.Result, []byte(`"id":"test-login"`)) {
			t.Errorf("initialize = %s, want the auth method advertised", init.Result)
		}
		if resp := a.call(2, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}}); resp.Error == nil || resp.Error.Code != -32000 {
			t.Errorf("session/new before authenticate = %+v, want error -32000", resp)
		}
		if resp := a.call(3, "authenticate", map[string]any{"methodId": "other"}); resp.Error == nil {
			t.Error("authenticate with another method id succeeded")
		}
		if resp := a.call(4, "authenticate", map[string]any{"methodId": "test-login"}); resp.Error != nil {
			t.Errorf("authenticate: %+v", resp.Error)
		}
		if session := a.newSession(5); session == "" {
			t.Error("no session after authenticate")
		}
	})

	t.Run("-exit-mid-prompt sends partial then exits 1", func(t *testing.T) {
		a := startAgent(t, bin, "-exit-mid-prompt")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		session := a.newSession(2)
		a.sendPrompt(3, session)
		if out, stop := a.collect(3, session); out != "partial" || stop != "" {
			t.Errorf("prompt gave %q / %q, want partial and no answer", out, stop)
		}
		if code := a.wait(); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
	})

	t.Run("SIGTERM ends an agent that ignores EOF with 143", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "events.jsonl")
		a := startAgent(t, bin, "-record", rec, "-ignore-eof")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		a.closeStdin()
		waitForEvent(t, rec, "eof")
		if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := a.wait(); code != 143 {
			t.Errorf("exit code %d, want 143", code)
		}
		if got := eventNames(t, rec); !strings.HasSuffix(got, "eof sigterm") {
			t.Errorf("recorded %q, want eof then sigterm", got)
		}
	})

	t.Run("-trap-term survives SIGTERM until SIGKILL", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "events.jsonl")
		a := startAgent(t, bin, "-record", rec, "-ignore-eof", "-trap-term")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		a.closeStdin()
		waitForEvent(t, rec, "eof")
		if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitForEvent(t, rec, "sigterm")
		select {
		case <-a.exited:
			t.Fatal("the agent exited on SIGTERM")
		case <-time.After(200 * time.Millisecond):
		}
		_ = syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL)
		a.wait()
	})

	t.Run("-mcp-capabilities, -prompt-capabilities and -echo-request: it advertises what it is told and sums up what it was sent, env and header values left out", func(t *testing.T) {
		a := startAgent(t, bin, "-mcp-capabilities", "http", "-prompt-capabilities", "image,embeddedContext", "-echo-request", "-no-chunks")
		init := a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		var caps struct {
			AgentCapabilities struct {
				LoadSession        *bool           `json:"loadSession"`
				McpCapabilities    map[string]bool `json:"mcpCapabilities"`
				PromptCapabilities map[string]bool `json:"promptCapabilities"`
			} `json:"agentCapabilities"`
		}
		mustUnmarshal(t, init.Result, &caps)
		ac := caps.AgentCapabilities
		if ac.LoadSession == nil || !ac.McpCapabilities["http"] || ac.McpCapabilities["sse"] ||
			!ac.PromptCapabilities["image"] || !ac.PromptCapabilities["embeddedContext"] || ac.PromptCapabilities["audio"] {
			t.Errorf("initialize = %s, want the default capabilities with http, image and embeddedContext set", init.Result)
		}
		resp := a.call(2, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{
			map[string]any{"name": "gh", "command": "gh-mcp", "args": []any{"stdio"}, "env": []any{map[string]any{"name": "TOKEN", "value": "env-value"}}},
			map[string]any{"name": "docs", "type": "http", "url": "https://h/mcp", "headers": []any{map[string]any{"name": "Authorization", "value": "header-value"}}},
		}})
		var r struct {
			SessionID string `json:"sessionId"`
		}
		mustUnmarshal(t, resp.Result, &r)
		a.send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": map[string]any{
			"sessionId": r.SessionID, "prompt": []any{
				map[string]any{"type": "text", "text": "hello"},
				map[string]any{"type": "resource_link", "uri": "file:///ws/a.md", "name": "a.md", "mimeType": "text/markdown", "size": 7},
				map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///ws/b.md", "mimeType": "text/markdown", "text": "# b"}},
				map[string]any{"type": "image", "mimeType": "image/png", "data": "iVBORw0K", "uri": "file:///ws/c.png"},
			}}})
		out, stop := a.collect(3, r.SessionID)
		want := `{"mcpServers":[{"name":"gh","type":"stdio","command":"gh-mcp","args":["stdio"],"env":["TOKEN"]},` +
			`{"name":"docs","type":"http","url":"https://h/mcp","headers":["Authorization"]}],` +
			`"prompt":[{"type":"text","textBytes":5},{"type":"resource_link","uri":"file:///ws/a.md","name":"a.md","mimeType":"text/markdown","size":7},` +
			`{"type":"resource","uri":"file:///ws/b.md","mimeType":"text/markdown","textBytes":3},{"type":"image","uri":"file:///ws/c.png","mimeType":"image/png","dataBytes":8}]}` + "\n"
		if out != want || stop != "end_turn" {
			t.Errorf("answer %q (%s)\nwant %q", out, stop, want)
		}
		if strings.Contains(out, "env-value") || strings.Contains(out, "header-value") {
			t.Errorf("the answer carries a value of env or headers: %s", out)
		}
	})

	t.Run("descendants are recorded, each where its flag puts it", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "events.jsonl")
		a := startAgent(t, bin, "-record", rec, "-grandchild", "-setsid-grandchild", "-daemon-grandchild")
		a.call(1, "initialize", map[string]any{"protocolVersion": 1})
		agentPgid, err := syscall.Getpgid(a.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		hows := map[string]bool{}
		for _, e := range events(t, rec) {
			if e["event"] != "grandchild" {
				continue
			}
			pid, how := int(e["pid"].(float64)), e["how"].(string)
			hows[how] = true
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			pgid, err := syscall.Getpgid(pid)
			if err != nil {
				t.Errorf("%s grandchild %d is not running: %v", how, pid, err)
				continue
			}
			if inGroup := pgid == agentPgid; inGroup != (how == "child") {
				t.Errorf("%s grandchild %d has pgid %d, agent %d", how, pid, pgid, agentPgid)
			}
		}
		if len(hows) != 3 {
			t.Errorf("recorded grandchildren %v, want child, setsid and daemon", hows)
		}
	})
}

// agentProc is one testagent process and a raw JSON-RPC client for it.
type agentProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	msgs   chan message
	exited chan struct{}

	// onRequest answers the agent's requests: a result, or an *rpcError.
	onRequest func(message) any
	seen      map[string]int // kinds of updates seen, "leak" for another session's chunks

	mu      sync.Mutex
	garbage int
	stderr  bytes.Buffer
	errDone chan struct{}
}

func buildTestAgent(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "testagent")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func startAgent(t *testing.T, bin string, args ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(bin, append(args, "-lifetime", "2m")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Our own pipes, not cmd's: reading them to EOF must not race Wait, and descendants that
	// keep them open must not make Wait hang.
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	errW.Close()

	a := &agentProc{t: t, cmd: cmd, stdin: stdin, msgs: make(chan message, 1024), exited: make(chan struct{}),
		seen: map[string]int{}, errDone: make(chan struct{})}
	go func() {
		defer close(a.msgs)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m message
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				a.mu.Lock()
				a.garbage++
				a.mu.Unlock()
				continue
			}
			a.msgs <- m
		}
	}()
	go func() {
		defer close(a.errDone)
		defer errR.Close()
		var buf bytes.Buffer
		_, _ = io.Copy(&buf, errR)
		a.mu.Lock()
		a.stderr = buf
		a.mu.Unlock()
	}()
	go func() {
		_ = cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-a.exited
	})
	return a
}

func (a *agentProc) send(v any) {
	a.t.Helper()
	line, err := json.Marshal(v)
	if err != nil {
		a.t.Fatal(err)
	}
	if _, err := a.stdin.Write(append(line, '\n')); err != nil {
		a.t.Fatalf("writing to the agent: %v", err)
	}
}

func (a *agentProc) closeStdin() { _ = a.stdin.Close() }

// next is the agent's next message; false when its stdout closed or nothing
// came for 30s (a hang guard: it answers in milliseconds idle).
func (a *agentProc) next() (message, bool) {
	select {
	case m, ok := <-a.msgs:
		return m, ok
	case <-time.After(30 * time.Second):
		a.t.Error("the agent sent nothing for 30s")
		return message{}, false
	}
}

// call sends a request and returns its response, answering what the agent asks meanwhile.
func (a *agentProc) call(id int, method string, params any) message {
	a.t.Helper()
	a.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	resp, ok := a.until(id, func(message) {})
	if !ok {
		a.t.Fatalf("%s: no answer", method)
	}
	return resp
}

func (a *agentProc) newSession(id int) string {
	a.t.Helper()
	resp := a.call(id, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}})
	if resp.Error != nil {
		a.t.Fatalf("session/new: %+v", resp.Error)
	}
	var r struct {
		SessionID string `json:"sessionId"`
	}
	mustUnmarshal(a.t, resp.Result, &r)
	return r.SessionID
}

func (a *agentProc) sendPrompt(id int, session string) {
	a.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": map[string]any{
		"sessionId": session, "prompt": []any{map[string]any{"type": "text", "text": "hi"}},
	}})
}

func (a *agentProc) prompt(id int, session string) (output, stopReason string) {
	a.sendPrompt(id, session)
	return a.collect(id, session)
}

// collect reads the prompt's updates until its answer, as acpflow should: the message chunks
// of the session, concatenated, and the stop reason ("" when the agent died first).
func (a *agentProc) collect(id int, session string) (output, stopReason string) {
	a.t.Helper()
	var out strings.Builder
	resp, ok := a.until(id, func(m message) {
		if m.Method != "session/update" {
			return
		}
		var p struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				Kind    string          `json:"sessionUpdate"`
				Content json.RawMessage `json:"content"`
			} `json:"update"`
		}
		mustUnmarshal(a.t, m.Params, &p)
		switch {
		case p.SessionID != session:
			a.seen["leak"]++
		case p.Update.Kind == "agent_message_chunk":
			var text struct {
				Text string `json:"text"`
			}
			mustUnmarshal(a.t, p.Update.Content, &text)
			out.WriteString(text.Text)
		default:
			a.seen[p.Update.Kind]++
		}
	})
	if !ok {
		return out.String(), ""
	}
	var r struct {
		StopReason string `json:"stopReason"`
	}
	mustUnmarshal(a.t, resp.Result, &r)
	return out.String(), r.StopReason
}

// until reads messages up to the response to id, answering the agent's requests with
// onRequest (or -32601) and passing notifications to notified.
func (a *agentProc) until(id int, notified func(message)) (message, bool) {
	want, _ := json.Marshal(id)
	for {
		m, ok := a.next()
		if !ok {
			return message{}, false
		}
		switch {
		case m.Method == "" && bytes.Equal(m.ID, want):
			return m, true
		case m.Method != "" && len(m.ID) > 0:
			var answer any = &rpcError{Code: -32601, Message: "Method not found"}
			if a.onRequest != nil {
				answer = a.onRequest(m)
			}
			if e, isErr := answer.(*rpcError); isErr {
				a.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": e})
			} else {
				a.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": answer})
			}
		case m.Method != "":
			notified(m)
		}
	}
}

// wait is the agent's exit code, -1 when a signal ended it.
func (a *agentProc) wait() int {
	a.t.Helper()
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		a.t.Fatal("the agent did not exit within 30s")
	}
	return a.cmd.ProcessState.ExitCode()
}

func (a *agentProc) stderrText() string {
	<-a.errDone
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stderr.String()
}

func (a *agentProc) garbageLines() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.garbage
}

func events(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for line := range strings.Lines(string(data)) {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("record line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

func eventNames(t *testing.T, path string) string {
	t.Helper()
	var names []string
	for _, e := range events(t, path) {
		names = append(names, e["event"].(string))
	}
	return strings.Join(names, " ")
}

func waitForEvent(t *testing.T, path, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(" "+eventNames(t, path)+" ", " "+name+" ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %q event recorded within 30s", name)
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("unmarshal %s: %v", data, err)
	}
}
