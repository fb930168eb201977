//go:build realagents

package realagents_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// Issue 14 on every agent that completes whole turns: a turn the real
// agent completed (a shell command its policy allowed, a file write, a
// final answer) is exported as a transcript file, and `builtin: replay`
// plays it back offline with the same result, permission records included;
// a stricter policy makes the replay fail in refusal, saying which
// permission left the recording. And `acpflow policy test` re-decides a
// recorded batch's permission requests, showing what a stricter policy
// would have changed without running anything.

// replayCommand is the scripted shell command: every agent asks about it
// (mkdir is on no agent's safe list, and it redirects).
const replayCommand = "mkdir -p made && echo recorded > made/shell.txt"

// recordPolicy allows the scripted command and edits in the workspace.
const recordPolicy = `permission:
  rules:
    - if: 'tool.kind == "execute" && any(commands(tool.command), # startsWith "mkdir -p made")'
      then: allow
      reason: the scripted command
    - if: tool.kind == "edit" && all(tool.locations, .in_workspace)
      then: allow
      reason: an edit in the workspace
  default: reject`

// strictPolicy rejects any command line with a mkdir in it; edits as
// recordPolicy.
const strictPolicy = `permission:
  rules:
    - if: 'any(commands(tool.command), # startsWith "mkdir ")'
      then: reject
      reason: no mkdir
    - if: tool.kind == "edit" && all(tool.locations, .in_workspace)
      then: allow
      reason: an edit in the workspace
  default: reject`

// replayPrompt is the step's prompt, recorded and replayed.
const replayPrompt = "Make the directory, then write the file."

// replayScript is the recorded turn: Bash, Write, a final answer in
// chunks (which the replay must join as the live turn did).
func replayScript(dir string) modelserver.Script {
	return modelserver.Script{
		{Say: "Step 1: Bash.", Shell: replayCommand},
		{Say: "Step 2: Write.", Write: &modelserver.Write{Path: filepath.Join(dir, "written.txt"), Content: "written for the replay\n"}},
		{Say: "FINAL done", Chunks: 3},
	}
}

// transcriptFile is an exported transcript as a user reads it
// (docs/transcripts.md).
type transcriptFile struct {
	Format   string `json:"format"`
	RunID    string `json:"run_id"`
	Workflow string `json:"workflow"`
	Steps    []struct {
		Step      string `json:"step"`
		Attempt   int    `json:"attempt"`
		Agent     string `json:"agent"`
		Truncated bool   `json:"truncated"`
		Messages  []struct {
			Dir string          `json:"dir"`
			Msg json.RawMessage `json:"msg"`
		} `json:"messages"`
		Permissions []map[string]any `json:"permissions"`
	} `json:"steps"`
}

// rpc is the part of a JSON-RPC message these tests read.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ToolCall struct {
			ToolCallID string `json:"toolCallId"`
			Title      string `json:"title"`
		} `json:"toolCall"`
	} `json:"params"`
	Result struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	} `json:"result"`
}

// writeReplayWorkflow writes the one-step workflow of turn on `builtin:
// replay` from `from`, with the same step id and prompt and the given
// policies, and returns its path. The replay agent carries the sandbox's
// mark, so that the orphan check finds it too.
func (s *sandbox) writeReplayWorkflow(from, policiesYAML string) string {
	s.t.Helper()
	return s.writeWorkflowFile(fmt.Sprintf(`name: turn
agents:
  a:
    builtin: replay
    from: %q
    env: {%s: %q}
policies:
%s
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: %q}
`, from, markVar, s.mark, indent(policiesYAML, "  "), replayPrompt))
}

// replayLeftNothing fails the test for a process left that plays a
// transcript of file (an acpflow agent replay, found by its command line,
// whatever its env), then runs the sandbox's orphan check.
func (s *sandbox) replayLeftNothing(file string) {
	s.t.Helper()
	for _, p := range survivors(func(p proc) bool { return p.mentions(file) }) {
		s.t.Errorf("a replay agent survived acpflow: %s", p)
	}
	s.assertNothingLeft()
}

// sameTurn checks that a replayed step's result is the recorded one's.
func sameTurn(t *testing.T, what string, got, want turnResult) {
	t.Helper()
	for _, f := range []struct{ name, got, want string }{
		{"status", got.Status, want.Status},
		{"stop_reason", got.StopReason, want.StopReason},
		{"output", got.Output, want.Output},
		{"final", got.Final, want.Final},
		{"error", got.Error, want.Error},
		{"session_id", got.SessionID, want.SessionID},
	} {
		if f.got != f.want {
			t.Errorf("%s: %s = %q, recorded %q", what, f.name, f.got, f.want)
		}
	}
	if len(got.Permissions) != len(want.Permissions) {
		t.Errorf("%s: %d permission records, recorded %d:\n%v\nrecorded\n%v", what, len(got.Permissions), len(want.Permissions), got.Permissions, want.Permissions)
		return
	}
	for i := range want.Permissions {
		g, w := got.Permissions[i], want.Permissions[i]
		for _, k := range []string{"tool_call_id", "decision", "outcome", "option_id", "policy", "rule", "reason", "command", "kind", "title"} {
			if !reflect.DeepEqual(g[k], w[k]) {
				t.Errorf("%s: permission %d: %s = %v, recorded %v", what, i, k, g[k], w[k])
			}
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: permission %d\n\t%v\nrecorded\n\t%v", what, i, g, w)
		}
	}
}

// checkTranscript checks that the exported file is the transcript of rec's
// step s, with its permission records beside the requests and answers
// they describe, and returns it.
func checkTranscript(t *testing.T, path string, rec flowResult) transcriptFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("export wrote no file: %v", err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm() != 0o600 {
		t.Errorf("the transcript file has mode %v, want 0600 (it is what an agent saw)", st.Mode().Perm())
	}
	var f transcriptFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("the exported file is not JSON: %v\n%.2000s", err, b)
	}
	if f.Format != "acpflow-transcript/1" || f.RunID != rec.RunID || f.Workflow != "turn" {
		t.Errorf("format %q, run %q, workflow %q; want acpflow-transcript/1, %s, turn", f.Format, f.RunID, f.Workflow, rec.RunID)
	}
	if len(f.Steps) != 1 {
		t.Fatalf("%d step attempts in the transcript, want step s's one", len(f.Steps))
	}
	st := f.Steps[0]
	if st.Step != "s" || st.Attempt != 1 || st.Agent != "a" || st.Truncated {
		t.Errorf("step %q attempt %d agent %q truncated %v; want s, 1, a, not truncated", st.Step, st.Attempt, st.Agent, st.Truncated)
	}
	want := rec.Steps["s"].Permissions
	if !reflect.DeepEqual(st.Permissions, want) {
		t.Errorf("the transcript's permission records\n\t%v\nthe run's\n\t%v", st.Permissions, want)
	}
	// What acpflow sent, and each permission request with the answer it got.
	sent := map[string]int{}
	asked := map[string]string{} // request id → tool call id
	answered := map[string]string{}
	for _, m := range st.Messages {
		var r rpc
		if err := json.Unmarshal(m.Msg, &r); err != nil {
			t.Errorf("a message that is not JSON-RPC: %s", m.Msg)
			continue
		}
		switch {
		case m.Dir == "to_agent" && r.Method != "":
			sent[r.Method]++
		case m.Dir == "from_agent" && r.Method == "session/request_permission":
			asked[string(r.ID)] = r.Params.ToolCall.ToolCallID
		case m.Dir == "to_agent" && r.Method == "" && r.Result.Outcome.Outcome != "":
			answered[string(r.ID)] = r.Result.Outcome.OptionID
		}
	}
	for _, m := range []string{"initialize", "session/new", "session/prompt"} {
		if sent[m] != 1 {
			t.Errorf("the transcript has %d %s sent to the agent, want 1 (sent: %v)", sent[m], m, sent)
		}
	}
	answers := map[string]string{} // tool call id → option sent
	for id, call := range asked {
		answers[call] = answered[id]
	}
	for _, p := range want {
		if got, ok := answers[p["tool_call_id"].(string)]; !ok || got != p["option_id"] {
			t.Errorf("permission %v %q: the transcript has its request %v, answered %q; want %v", p["tool_call_id"], p["title"], ok, got, p["option_id"])
		}
	}
	if len(asked) != len(want) {
		t.Errorf("%d permission requests in the transcript, %d records", len(asked), len(want))
	}
	return f
}

// requestTitle is the title of the transcript's permission request for a
// tool call (its id when it has none): what a replay names it by.
func requestTitle(f transcriptFile, toolCallID string) string {
	for _, m := range f.Steps[0].Messages {
		var r rpc
		if json.Unmarshal(m.Msg, &r) == nil && r.Method == "session/request_permission" && r.Params.ToolCall.ToolCallID == toolCallID {
			if r.Params.ToolCall.Title != "" {
				return r.Params.ToolCall.Title
			}
			return toolCallID
		}
	}
	return toolCallID
}

func TestARecordedTurnReplaysIdenticallyOffline(t *testing.T) {
	forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
		state := filepath.Join(s.dir, "state.db")
		srv := startServer(t, replayScript(s.dir))

		// 1. Record: the real agent runs the command (allowed by rule 1),
		// writes the file (rule 2) and answers.
		rec, _, r := s.flowOne("run", s.writeTurnWorkflow(ta, srv, replayPrompt, recordPolicy, ""), "--workspace", s.dir)
		recorded := rec.Steps["s"]
		t.Logf("record: exit %d in %s; step %s/%s; output %q", r.code, r.elapsed.Round(time.Millisecond), recorded.Status, recorded.StopReason, recorded.Output)
		if r.code != 0 || rec.Status != "succeeded" || recorded.Status != "succeeded" || recorded.StopReason != "completed" {
			t.Fatalf("record: exit %d, run %s, step %s/%s: %s\nstderr:\n%s", r.code, rec.Status, recorded.Status, recorded.StopReason, recorded.Error, r.stderr)
		}
		if !strings.Contains(recorded.Output, "FINAL done") || recorded.Final != "FINAL done" {
			t.Errorf("record: output %q, final %q; want the scripted answer", recorded.Output, recorded.Final)
		}
		for name, want := range map[string]string{"made/shell.txt": "recorded\n", "written.txt": "written for the replay\n"} {
			if b, err := os.ReadFile(filepath.Join(s.dir, name)); err != nil || string(b) != want {
				t.Errorf("record: %s = %q, %v; want %q: the tool did not run", name, b, err, want)
			}
		}
		var rules []string
		for _, p := range recorded.Permissions {
			t.Logf("record: permission %v %v %q command %q → %v/%v option %v rule %v", p["tool_call_id"], p["kind"], p["title"], p["command"], p["decision"], p["outcome"], p["option_id"], p["rule"])
			rules = append(rules, fmt.Sprintf("%v:%v:%v", p["kind"], p["decision"], p["rule"]))
		}
		if want := []string{"execute:allow:1", "edit:allow:2"}; !slices.Equal(rules, want) {
			t.Fatalf("record: permissions %v, want %v", rules, want)
		}
		exec := recorded.Permissions[0]
		if exec["command"] != replayCommand {
			t.Errorf("record: the execute record's command = %q, want %q", exec["command"], replayCommand)
		}

		// 2. Export, to a file and to stdout.
		file := filepath.Join(s.dir, "recorded.transcript.json")
		if r := s.acpflow(time.Minute, "export", rec.RunID, "-o", file, "--state", state); r.code != 0 || r.stdout != "" {
			t.Fatalf("export -o: exit %d, stdout %q\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		tf := checkTranscript(t, file, rec)
		r = s.acpflow(time.Minute, "export", rec.RunID, "--state", state)
		if b, _ := os.ReadFile(file); r.code != 0 || r.stdout != string(b) {
			t.Errorf("export to stdout: exit %d, %d bytes; want 0 and the file's %d bytes\nstderr:\n%s", r.code, len(r.stdout), len(b), r.stderr)
		}

		// 3. Replay, from the file, with the model server still listening
		// but nothing pointed at it, and the files the turn made gone: a
		// replay runs no tool.
		for _, f := range []string{"made/shell.txt", "written.txt"} {
			os.Remove(filepath.Join(s.dir, f))
		}
		served := len(srv.Requests())
		replay := func(what, from, policy string) (turnResult, run) {
			t.Helper()
			res, es, r := s.flowOne("run", s.writeReplayWorkflow(from, policy), "--workspace", s.dir)
			st := res.Steps["s"]
			perms := 0
			for _, e := range es {
				if e["type"] == "permission" {
					perms++
				}
			}
			t.Logf("%s: exit %d in %s; step %s/%s in %d ms; %d permission events; final %q", what, r.code, r.elapsed.Round(time.Millisecond), st.Status, st.StopReason, st.DurationMS, perms, st.Final)
			if perms != len(st.Permissions) {
				t.Errorf("%s: %d permission events, %d records", what, perms, len(st.Permissions))
			}
			if n := len(srv.Requests()); n != served {
				t.Errorf("%s: the model server got %d requests during the replay, want none", what, n-served)
			}
			for _, f := range []string{"made/shell.txt", "written.txt"} {
				if _, err := os.Stat(filepath.Join(s.dir, f)); err == nil {
					t.Errorf("%s: %s exists again: a tool ran", what, f)
				}
			}
			s.replayLeftNothing(file)
			return st, r
		}

		got, r := replay("replay", "recorded.transcript.json", recordPolicy)
		if r.code != 0 {
			t.Errorf("replay: exit %d, want 0\nstderr:\n%s", r.code, r.stderr)
		}
		sameTurn(t, "replay", got, recorded)

		// The same from the run store (from: RUN/STEP): the same turn.
		got, r = replay("replay from the run store", rec.RunID+"/s", recordPolicy)
		if r.code != 0 {
			t.Errorf("replay from the run store: exit %d, want 0\nstderr:\n%s", r.code, r.stderr)
		}
		sameTurn(t, "replay from the run store", got, recorded)

		// 4. Under a policy that rejects the command, the replay cannot go
		// on: refusal, and the error names the permission and the
		// recording.
		got, r = replay("strict replay", "recorded.transcript.json", strictPolicy)
		if r.code != 1 || got.Status != "failed" || got.StopReason != "refusal" {
			t.Errorf("strict replay: exit %d, step %s/%s; want 1, failed/refusal\nstderr:\n%s", r.code, got.Status, got.StopReason, r.stderr)
		}
		if len(got.Permissions) != 1 {
			t.Fatalf("strict replay: permissions %v, want the command's alone, rejected", got.Permissions)
		}
		p := got.Permissions[0]
		if p["tool_call_id"] != exec["tool_call_id"] || p["command"] != replayCommand || p["decision"] != "reject" || p["rule"] != "1" || p["reason"] != "no mkdir" {
			t.Errorf("strict replay: permission %v\nwant the recorded %v %q rejected by rule 1 (no mkdir)", p, exec["tool_call_id"], replayCommand)
		}
		divergence := fmt.Sprintf("replay: permission for %q was answered %v, the recording has %v: the recording ends here",
			requestTitle(tf, exec["tool_call_id"].(string)), p["option_id"], exec["option_id"])
		t.Logf("strict replay: error %q", got.Error)
		if !strings.Contains(got.Error, divergence) {
			t.Errorf("strict replay: error %q\nwant it to hold %q", got.Error, divergence)
		}
		// docs/transcripts.md: the divergence is "the turn's last agent
		// message", and final is it, also where the recording streamed a
		// message right before the permission request with no update
		// between them (codex's shell calls, gemini's every call): the
		// replay reports the refused tool call failed first.
		if got.Final != divergence {
			t.Errorf("strict replay: final %q, want %q", got.Final, divergence)
		}
		t.Logf("strict replay: output %q", got.Output)
		if !strings.HasSuffix(got.Output, "\n\n"+divergence) || !strings.HasPrefix(got.Output, "Step 1: Bash.") || strings.Contains(got.Output, "Step 2: Write.") {
			t.Errorf("strict replay: output %q; want the recording up to the command, then the divergence", got.Output)
		}
		if title, _ := exec["title"].(string); !strings.Contains(got.Error, title) && !strings.Contains(got.Error, replayCommand) {
			t.Errorf("strict replay: the error %q names neither the command nor the recorded title %q", got.Error, title)
		}
	})
}

func TestPolicyTestShowsWhatAStricterPolicyWouldChangeInARecordedBatch(t *testing.T) {
	const lines = 3
	// Every agent: measured, the batch takes about 2 s on codex and 20 s on
	// claude and gemini (2 CPUs, in parallel).
	for _, name := range turnAgentNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			ta := needTurnAgent(t, name)
			state := filepath.Join(s.dir, "state.db")
			srv := startServer(t, modelserver.Script{
				{Say: "Making the directory.", Shell: replayCommand},
				{Say: "FINAL done"},
			})
			path := s.writeWorkflowFile("name: batch\ninputs:\n  n: {type: string}\nagents:\n" + s.turnAgentYAML(ta, srv, "") + "\npolicies:\n" + indent(recordPolicy, "  ") + `
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: "Make the directory for line ${{ inputs.n }}."}}
`)
			var in strings.Builder
			for i := range lines {
				fmt.Fprintf(&in, "{\"n\": \"%d\"}\n", i+1)
			}
			inputs := filepath.Join(s.dir, "inputs.jsonl")
			mustWrite(t, inputs, in.String())
			// Three agents start at once: codex's and opencode's first
			// starts race on a fresh HOME (firstStartRaces).
			s.warm(ta, srv)
			res, _, r := s.flow("run", path, "--workspace", s.dir, "--inputs", inputs, "--concurrency", fmt.Sprint(lines))
			t.Logf("batch: exit %d in %s; %d runs", r.code, r.elapsed.Round(time.Millisecond), len(res))
			for _, fr := range res {
				if st := fr.Steps["s"]; fr.Status != "succeeded" {
					t.Logf("run %s: %s, step %s: %s", fr.RunID, fr.Status, st.Status, st.Error)
				}
			}
			if r.code != 0 || len(res) != lines {
				t.Fatalf("batch: exit %d, %d results; want 0 and %d\nstderr:\n%s", r.code, len(res), lines, r.stderr)
			}
			// Each run's one request: the command, allowed by rule 1.
			callOf := map[string]string{} // run id → tool call id
			for _, fr := range res {
				st := fr.Steps["s"]
				if fr.Status != "succeeded" || len(st.Permissions) != 1 {
					t.Fatalf("run %s: %s, step %s: %s; permissions %v; want succeeded with one request", fr.RunID, fr.Status, st.Status, st.Error, st.Permissions)
				}
				p := st.Permissions[0]
				if p["command"] != replayCommand || p["decision"] != "allow" || p["rule"] != "1" {
					t.Fatalf("run %s: permission %v, want %q allowed by rule 1", fr.RunID, p, replayCommand)
				}
				callOf[fr.RunID] = p["tool_call_id"].(string)
			}

			// The batch's id, as acpflow runs --json shows it.
			r = s.acpflow(time.Minute, "runs", "--json", "--state", state)
			batch := ""
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				var m struct {
					RunID   string `json:"run_id"`
					BatchID string `json:"batch_id"`
				}
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("runs --json: %v\n%s", err, r.stdout)
				}
				if _, ok := callOf[m.RunID]; !ok || (batch != "" && m.BatchID != batch) || m.BatchID == "" {
					t.Fatalf("runs --json: run %s of batch %q; want the batch's %d runs, of one batch\n%s", m.RunID, m.BatchID, lines, r.stdout)
				}
				batch = m.BatchID
			}

			// A run outside the batch, with a request of its own: one of
			// the batch's replayed from the run store. --runs batch=ID
			// must leave it out.
			var first string
			for id := range callOf {
				first = id
				break
			}
			rp, _, r := s.flowOne("run", s.writeReplayWorkflow(first, "permission: allow"), "--workspace", s.dir)
			if st := rp.Steps["s"]; r.code != 0 || st.Status != "succeeded" || len(st.Permissions) != 1 {
				t.Fatalf("replay of %s: exit %d, step %s: %s; permissions %v\nstderr:\n%s", first, r.code, st.Status, st.Error, st.Permissions, r.stderr)
			}
			s.assertNothingLeft()

			loose := filepath.Join(s.dir, "loose.yaml")
			mustWrite(t, loose, "permission: allow\n")
			strict := filepath.Join(s.dir, "strict.yaml")
			mustWrite(t, strict, strictPolicy+"\n")

			// A policy that decides as recorded (by another rule): no change.
			r = s.acpflow(time.Minute, "policy", "test", loose, "--runs", "batch="+batch, "--state", state)
			t.Logf("policy test loose: exit %d\n%s", r.code, r.stdout)
			wantTotals := fmt.Sprintf("%d requests in %d runs: 0 changed, %d unchanged\n  allow → allow: %d\n", lines, lines, lines, lines)
			if r.code != 0 || r.stdout != wantTotals {
				t.Errorf("policy test %s: exit %d, printed\n%s\nwant 0 and\n%s\nstderr:\n%s", loose, r.code, r.stdout, wantTotals, r.stderr)
			}

			// The stricter policy: every request changes, allow → reject.
			r = s.acpflow(time.Minute, "policy", "test", strict, "--runs", "batch="+batch, "--state", state, "--json")
			t.Logf("policy test strict: exit %d\n%s", r.code, r.stdout)
			if r.code != 1 {
				t.Errorf("policy test %s: exit %d, want 1 (decisions changed)\nstderr:\n%s", strict, r.code, r.stderr)
			}
			reqs, totals := policyTestLines(t, r.stdout)
			seen := map[string]bool{}
			for _, q := range reqs {
				run, _ := q["run_id"].(string)
				old, _ := q["old"].(map[string]any)
				now, _ := q["new"].(map[string]any)
				call, inBatch := callOf[run]
				if !inBatch || seen[run] {
					t.Errorf("a request of run %s: want one per run of the batch %v", run, callOf)
				}
				seen[run] = true
				if q["step"] != "s" || q["tool_call_id"] != call || q["kind"] != "execute" || q["command"] != replayCommand || q["changed"] != true {
					t.Errorf("request %v\nwant step s, the recorded tool call %s, execute %q, changed", q, call, replayCommand)
				}
				if old["decision"] != "allow" || old["policy"] != "workflow" || old["rule"] != "1" || old["reason"] != "the scripted command" || old["from"] != "record" {
					t.Errorf("run %s: old %v, want the recorded allow by workflow rule 1", run, old)
				}
				if now["decision"] != "reject" || now["policy"] != "workflow" || now["rule"] != "1" || now["reason"] != "no mkdir" {
					t.Errorf("run %s: new %v, want reject by workflow rule 1 (no mkdir)", run, now)
				}
			}
			if len(seen) != lines {
				t.Errorf("%d of the batch's %d runs reported", len(seen), lines)
			}
			wantPairs := []any{map[string]any{"old": "allow", "new": "reject", "count": float64(lines)}}
			if totals["runs"] != float64(lines) || totals["requests"] != float64(lines) || totals["changed"] != float64(lines) ||
				totals["unchanged"] != 0.0 || totals["skipped"] != 0.0 || !reflect.DeepEqual(totals["pairs"], wantPairs) {
				t.Errorf("totals %v\nwant %d runs, %d requests, all changed allow → reject", totals, lines, lines)
			}

			// Without the filter, the replayed run counts too.
			r = s.acpflow(time.Minute, "policy", "test", strict, "--runs", "all", "--state", state)
			if want := fmt.Sprintf("%d requests in %d runs: %d changed, 0 unchanged\n", lines+1, lines+1, lines+1); r.code != 1 || !strings.Contains(r.stdout, want) {
				t.Errorf("policy test --runs all: exit %d, printed\n%s\nwant 1 and %q", r.code, r.stdout, want)
			}
		})
	}
}

// policyTestLines decodes policy test --json: one object per request, then
// the totals, last.
func policyTestLines(t *testing.T, out string) (requests []map[string]any, totals map[string]any) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("policy test --json: line %d is not JSON: %v\n%s", i+1, err, line)
		}
		switch {
		case m["type"] == "request" && totals == nil:
			requests = append(requests, m)
		case m["type"] == "totals" && i == len(lines)-1:
			totals = m
		default:
			t.Fatalf("policy test --json: line %d: want requests, then the totals last; got %s", i+1, line)
		}
	}
	if totals == nil {
		t.Fatalf("policy test --json printed no totals:\n%s", out)
	}
	return requests, totals
}
