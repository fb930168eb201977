package demoagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/demoagent"
)

// TestMain keeps the sessions this package's tests save out of the shared default directory;
// the tests about saved sessions set their own directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "demoagent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(demoagent.StateEnv, dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func (d *demo) initialize(t *testing.T) acp.InitializeResponse {
	t.Helper()
	resp, err := d.conn.Initialize(testContext(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return resp
}

// answer is the text of the agent_message_chunk updates the client got since from, and the
// index to pass next time.
func (c *testClient) answerSince(from int) (string, int) {
	chunks := c.chunks()
	return strings.Join(chunks[from:], ""), len(chunks)
}

// stateDir gives the test its own directory of saved sessions, shared by every demo it starts.
func stateDir(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv(demoagent.StateEnv, dir)
	return dir
}

// wantInvalidParams fails unless err is an invalid-params error whose data mentions want.
func wantInvalidParams(t *testing.T, what string, err error, want string) {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32602 {
		t.Errorf("%s: %v, want an invalid-params error", what, err)
		return
	}
	if data, _ := json.Marshal(re.Data); !strings.Contains(string(data), want) {
		t.Errorf("%s: error data %s, want it to mention %q", what, data, want)
	}
}

func TestServeAdvertisesLoadResumeForkAndClose(t *testing.T) {
	d := startDemo(t, context.Background(), &testClient{})
	caps := d.initialize(t).AgentCapabilities
	if !caps.LoadSession {
		t.Error("loadSession = false, want true")
	}
	sc := caps.SessionCapabilities
	if sc.Close == nil || sc.Resume == nil || sc.Fork == nil {
		t.Errorf("sessionCapabilities = %+v, want close, resume and fork", sc)
	}
}

func TestServeASessionRemembersItsEarlierPrompts(t *testing.T) {
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	session := d.newSession(t, "/work")

	var answers []string
	next := 0
	for _, prompt := range []string{"\nFirst question\nmore", "Second\ntool: execute make", "Third"} {
		if stop := d.prompt(t, session, prompt); stop != acp.StopReasonEndTurn {
			t.Fatalf("stop reason = %q, want end_turn", stop)
		}
		var answer string
		answer, next = client.answerSince(next)
		answers = append(answers, answer)
	}

	want := []string{
		"demo agent received: First question\n" +
			"demo agent: end of turn (0 tool requests).\n",
		"demo agent received: Second\n" +
			"permission execute make: allow-once\n" +
			"demo agent remembers 1 earlier prompt: First question\n" +
			"demo agent: end of turn (1 tool request).\n",
		"demo agent received: Third\n" +
			"demo agent remembers 2 earlier prompts: First question | Second\n" +
			"demo agent: end of turn (0 tool requests).\n",
	}
	for i := range want {
		if answers[i] != want[i] {
			t.Errorf("answer %d = %q, want %q", i+1, answers[i], want[i])
		}
	}

	// Another session of the same process starts with no history.
	other := d.newSession(t, "/work")
	d.prompt(t, other, "Alone")
	if answer, _ := client.answerSince(next); strings.Contains(answer, "remembers") {
		t.Errorf("a new session's first answer %q remembers something", answer)
	}
}

func TestServeACancelledTurnIsNotRemembered(t *testing.T) {
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	session := d.newSession(t, "/work")
	client.answer = func(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		if err := d.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: req.SessionId}); err != nil {
			t.Errorf("session/cancel: %v", err)
		}
		<-ctx.Done()
		return acp.RequestPermissionResponse{}, ctx.Err()
	}
	if stop := d.prompt(t, session, "Cancelled\ntool: execute sleep 100"); stop != acp.StopReasonCancelled {
		t.Fatalf("stop reason = %q, want cancelled", stop)
	}
	client.answer = nil
	d.prompt(t, session, "Again")
	if answer, _ := client.answerSince(0); strings.Contains(answer, "remembers") {
		t.Errorf("answer after a cancelled turn %q remembers it", answer)
	}
}

func TestServeAFreshProcessContinuesASavedSession(t *testing.T) {
	dir := stateDir(t)

	first := startDemo(t, context.Background(), &testClient{})
	session := first.newSession(t, "/work")
	first.prompt(t, session, "Plan the release")
	first.prompt(t, session, "Write the notes")
	first.closeStdin()
	<-first.served

	t.Run("session/resume answers without replaying the history", func(t *testing.T) {
		client := &testClient{}
		d := startDemo(t, context.Background(), client)
		d.initialize(t)
		if _, err := d.conn.ResumeSession(testContext(t), acp.ResumeSessionRequest{SessionId: session, Cwd: "/work"}); err != nil {
			t.Fatalf("session/resume: %v", err)
		}
		if updates, _ := client.snapshot(); len(updates) != 0 {
			t.Errorf("session/resume sent %d updates, want none", len(updates))
		}
		d.prompt(t, session, "Ship it")
		answer, _ := client.answerSince(0)
		if want := "demo agent remembers 2 earlier prompts: Plan the release | Write the notes\n"; !strings.Contains(answer, want) {
			t.Errorf("answer %q lacks %q", answer, want)
		}
	})

	t.Run("session/load replays the history before it answers", func(t *testing.T) {
		client := &testClient{}
		d := startDemo(t, context.Background(), client)
		d.initialize(t)
		if _, err := d.conn.LoadSession(testContext(t), acp.LoadSessionRequest{SessionId: session, Cwd: "/work", McpServers: []acp.McpServer{}}); err != nil {
			t.Fatalf("session/load: %v", err)
		}
		// The resumed session's turn above was saved too.
		var got []string
		updates, _ := client.snapshot()
		for _, u := range updates {
			switch {
			case u.UserMessageChunk != nil:
				got = append(got, "user: "+u.UserMessageChunk.Content.Text.Text)
			case u.AgentMessageChunk != nil:
				got = append(got, "agent: "+u.AgentMessageChunk.Content.Text.Text)
			default:
				t.Errorf("session/load replayed %+v, want only message chunks", u)
			}
		}
		want := []string{
			"user: Plan the release", "agent: demo agent received: Plan the release\n",
			"user: Write the notes", "agent: demo agent received: Write the notes\n",
			"user: Ship it", "agent: demo agent received: Ship it\n",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("replay before the answer:\n got %q\nwant %q", got, want)
		}

		before := len(client.chunks())
		d.prompt(t, session, "Announce it")
		answer, _ := client.answerSince(before)
		if want := "demo agent remembers 3 earlier prompts: Plan the release | Write the notes | Ship it\n"; !strings.Contains(answer, want) {
			t.Errorf("answer %q lacks %q", answer, want)
		}
	})

	t.Run("the file is private and holds the prompts' first lines", func(t *testing.T) {
		path := filepath.Join(dir, string(session)+".json")
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
		}
		data, _ := os.ReadFile(path)
		if !strings.Contains(string(data), `"Plan the release","Write the notes","Ship it","Announce it"`) {
			t.Errorf("%s = %s, want the four first lines in order", path, data)
		}
	})
}

func TestServeCreatesItsStateDirectoryPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "state")
	t.Setenv(demoagent.StateEnv, dir)
	d := startDemo(t, context.Background(), &testClient{})
	d.newSession(t, "/work")
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("session/new did not create the state directory: %v", err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("%s has mode %v, want 0700", dir, fi.Mode().Perm())
	}
}

func TestServeForkCopiesTheHistoryAndThenGoesItsOwnWay(t *testing.T) {
	stateDir(t)
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	source := d.newSession(t, "/work")
	d.prompt(t, source, "Base")

	fork, err := d.conn.UnstableForkSession(testContext(t), acp.UnstableForkSessionRequest{SessionId: source, Cwd: "/elsewhere"})
	if err != nil {
		t.Fatalf("session/fork: %v", err)
	}
	if fork.SessionId == source || !strings.HasPrefix(string(fork.SessionId), "demo-") {
		t.Fatalf("fork id %q, want a new demo-… id (source %q)", fork.SessionId, source)
	}

	next := len(client.chunks())
	d.prompt(t, fork.SessionId, "On the fork\ntool: read notes.md")
	answer, next := client.answerSince(next)
	if want := "demo agent remembers 1 earlier prompt: Base\n"; !strings.Contains(answer, want) {
		t.Errorf("fork's answer %q lacks %q", answer, want)
	}
	_, permissions := client.snapshot()
	if locs := permissions[len(permissions)-1].ToolCall.Locations; len(locs) != 1 || locs[0].Path != "/elsewhere/notes.md" {
		t.Errorf("fork's tool call locations %+v, want /elsewhere/notes.md (the fork's cwd)", locs)
	}

	d.prompt(t, source, "On the source")
	answer, _ = client.answerSince(next)
	if want := "demo agent remembers 1 earlier prompt: Base\n"; !strings.Contains(answer, want) {
		t.Errorf("source's answer %q lacks %q: the fork's turn must not change the source", answer, want)
	}

	t.Run("a fresh process forks a saved session", func(t *testing.T) {
		client := &testClient{}
		fresh := startDemo(t, context.Background(), client)
		fresh.initialize(t)
		fork2, err := fresh.conn.UnstableForkSession(testContext(t), acp.UnstableForkSessionRequest{SessionId: fork.SessionId, Cwd: "/work"})
		if err != nil {
			t.Fatalf("session/fork: %v", err)
		}
		fresh.prompt(t, fork2.SessionId, "Fork of the fork")
		answer, _ := client.answerSince(0)
		if want := "demo agent remembers 2 earlier prompts: Base | On the fork\n"; !strings.Contains(answer, want) {
			t.Errorf("answer %q lacks %q", answer, want)
		}
	})
}

func TestServeCloseForgetsTheLiveSessionButKeepsItsFile(t *testing.T) {
	stateDir(t)
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	session := d.newSession(t, "/work")
	d.prompt(t, session, "Before closing")

	if _, err := d.conn.CloseSession(testContext(t), acp.CloseSessionRequest{SessionId: session}); err != nil {
		t.Fatalf("session/close: %v", err)
	}
	_, err := d.conn.Prompt(testContext(t), acp.PromptRequest{SessionId: session, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	wantInvalidParams(t, "prompt after session/close", err, "unknown session")
	_, err = d.conn.CloseSession(testContext(t), acp.CloseSessionRequest{SessionId: session})
	wantInvalidParams(t, "a second session/close", err, "unknown session")

	if _, err := d.conn.ResumeSession(testContext(t), acp.ResumeSessionRequest{SessionId: session, Cwd: "/work"}); err != nil {
		t.Fatalf("session/resume after session/close: %v", err)
	}
	next := len(client.chunks())
	d.prompt(t, session, "After")
	if answer, _ := client.answerSince(next); !strings.Contains(answer, "remembers 1 earlier prompt: Before closing\n") {
		t.Errorf("answer after resuming a closed session %q lacks its history", answer)
	}
}

func TestServeRefusesToContinueWhatItCannot(t *testing.T) {
	dir := stateDir(t)
	d := startDemo(t, context.Background(), &testClient{})
	live := d.newSession(t, "/work")
	// A file that a hostile id would reach if it were used in a path.
	outside := filepath.Join(filepath.Dir(dir), "x.json")

	type continuation func(id acp.SessionId, cwd string) error
	methods := map[string]continuation{
		"session/load": func(id acp.SessionId, cwd string) error {
			_, err := d.conn.LoadSession(testContext(t), acp.LoadSessionRequest{SessionId: id, Cwd: cwd, McpServers: []acp.McpServer{}})
			return err
		},
		"session/resume": func(id acp.SessionId, cwd string) error {
			_, err := d.conn.ResumeSession(testContext(t), acp.ResumeSessionRequest{SessionId: id, Cwd: cwd})
			return err
		},
		"session/fork": func(id acp.SessionId, cwd string) error {
			_, err := d.conn.UnstableForkSession(testContext(t), acp.UnstableForkSessionRequest{SessionId: id, Cwd: cwd})
			return err
		},
	}
	tests := []struct {
		name string
		id   acp.SessionId
		cwd  string
		want string
	}{
		{"an unknown session is an error", "demo-0123456789abcdef", "/work", "unknown session demo-0123456789abcdef"},
		{"an id that climbs out of the directory is refused", "demo-../../x", "/work", "not a session id of the demo agent"},
		{"an id with a path separator is refused", "demo-ab/cd", "/work", "not a session id of the demo agent"},
		{"an id without hex digits is refused", "demo-", "/work", "not a session id of the demo agent"},
		{"an id of another agent is refused", "../x", "/work", "not a session id of the demo agent"},
		{"a relative cwd is refused", live, "work", "cwd must be an absolute path"},
	}
	for _, tt := range tests {
		for method, call := range methods {
			t.Run(tt.name+" by "+method, func(t *testing.T) {
				wantInvalidParams(t, method, call(tt.id, tt.cwd), tt.want)
			})
		}
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %v, want no such file", outside, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != string(live)+".json" {
		t.Errorf("state directory holds %v, want only the live session's file", entries)
	}
}

func TestAnswerWithHistoryListsTheLastTwentyPrompts(t *testing.T) {
	var history []string
	for i := 1; i <= 25; i++ {
		history = append(history, fmt.Sprintf("p%d", i))
	}
	got := demoagent.AnswerWithHistory(history, "now", nil, nil)
	want := "demo agent received: now\n" +
		"demo agent remembers 25 earlier prompts: " + strings.Join(history[5:], " | ") + "\n" +
		"demo agent: end of turn (0 tool requests).\n"
	if got != want {
		t.Errorf("AnswerWithHistory = %q, want %q", got, want)
	}
	if got, want := demoagent.AnswerWithHistory(nil, "now", nil, nil), demoagent.Answer("now", nil, nil); got != want {
		t.Errorf("AnswerWithHistory without history = %q, want Answer's %q", got, want)
	}
}
