package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript"
)

// recordHello runs the two-step demo workflow of the README (greet asks to
// read README.md, allowed by its shorthand; summarize continues from its
// output) into the store at state and returns the run id and its results.
func recordHello(t *testing.T, dir, state string) (runID string, steps map[string]map[string]any) {
	t.Helper()
	out := filepath.Join(dir, "hello.jsonl")
	wf := filepath.Join(repoRoot(t), "workflows", "examples", "hello.yaml")
	r := acpflow(t, dir, "run", wf, "--state", state, "--output", out)
	if r.code != 0 {
		t.Fatalf("hello: exit %d\n%s", r.code, r.stderr)
	}
	var res struct {
		RunID string                    `json:"run_id"`
		Steps map[string]map[string]any `json:"steps"`
	}
	if err := json.Unmarshal([]byte(readFile(t, out)), &res); err != nil {
		t.Fatal(err)
	}
	return res.RunID, res.Steps
}

func TestShowTranscriptPrintsTheConversationWithItsDecisions(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	id, _ := recordHello(t, dir, state)

	r := acpflow(t, dir, "show", id, "--transcript", "--state", state)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"step greet, attempt 1, agent demo:",
		"→ initialize",
		"← initialized: acpflow-demo",
		"→ session/new in " + dir,
		"→ prompt:\n             Say hello to world.\n             tool: read README.md\n", // a prompt of two lines
		"← thought: Reading the prompt: 1 tool request",
		"← plan:",
		`← tool call call_1 read "README.md" (pending)`,
		// The request, with the decision acpflow made and what made it.
		`← permission for read "README.md" [allow-once, allow-always, reject-once, reject-always]: allow → allow-once (step policy, rule shorthand)`,
		"→ answer: selected allow-once",
		// The message chunks joined into one entry.
		"← agent:\n             demo agent received: Say hello to world.\n             permission read README.md: allow-once",
		"← end of turn: end_turn",
		"step summarize, attempt 1, agent demo:",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the transcript lacks %q\n%s", want, r.stdout)
		}
	}

	// --step: that step's attempts only.
	r = acpflow(t, dir, "show", id, "--transcript", "--step", "summarize", "--state", state)
	if r.code != 0 || strings.Contains(r.stdout, "step greet") || !strings.Contains(r.stdout, "step summarize") {
		t.Errorf("--step summarize: exit %d\n%s", r.code, r.stdout)
	}
	r = acpflow(t, dir, "show", id, "--transcript", "--step", "greeet", "--state", state)
	if r.code != 2 || !strings.Contains(r.stderr, `no transcript of a step "greeet" (did you mean greet?)`) {
		t.Errorf("an unknown step: exit %d\n%s", r.code, r.stderr)
	}
	r = acpflow(t, dir, "show", id, "--step", "greet", "--state", state)
	if r.code != 2 || !strings.Contains(r.stderr, "--step is for --transcript") {
		t.Errorf("--step without --transcript: exit %d\n%s", r.code, r.stderr)
	}
}

func TestShowTranscriptJSONIsTheRawMessages(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	id, _ := recordHello(t, dir, state)
	r := acpflow(t, dir, "show", id, "--transcript", "--json", "--state", state)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	exported := filepath.Join(dir, "run.json")
	if e := acpflow(t, dir, "export", id, "-o", exported, "--state", state); e.code != 0 {
		t.Fatalf("export: exit %d\n%s", e.code, e.stderr)
	}
	f, err := transcript.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	// One line per message, each the message as it went over the wire,
	// in the order of the file.
	var want []transcript.Message
	for _, s := range f.Steps {
		want = append(want, s.Messages...)
	}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n := 0
	for ; sc.Scan(); n++ {
		var line struct {
			Step    string          `json:"step"`
			Attempt int             `json:"attempt"`
			Dir     string          `json:"dir"`
			AtMS    int64           `json:"at_ms"`
			Msg     json.RawMessage `json:"msg"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", n+1, err, sc.Text())
		}
		if n >= len(want) {
			continue
		}
		var got, exp any
		json.Unmarshal(line.Msg, &got)
		json.Unmarshal(want[n].Msg, &exp)
		if line.Dir != want[n].Dir || line.AtMS != want[n].AtMS || !reflect.DeepEqual(got, exp) || line.Step == "" || line.Attempt != 1 {
			t.Errorf("line %d = %s, want the message %s", n+1, sc.Text(), want[n].Msg)
		}
	}
	if n != len(want) || n < 20 {
		t.Errorf("%d lines, want the %d messages", n, len(want))
	}
}

func TestShowTranscriptNeutralisesWhatAnAgentSent(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	talk, _ := hostileWorkflows(t, dir, filepath.Join(dir, "record.jsonl"))
	out := filepath.Join(dir, "talk.jsonl")
	if r := acpflow(t, dir, "run", talk, "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var res oneResult
	json.Unmarshal([]byte(readFile(t, out)), &res)
	r := acpflow(t, dir, "show", res.RunID, "--transcript", "--state", state)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if where := terminalUnsafe(r.stdout); where != "" {
		t.Errorf("show --transcript wrote what a terminal acts on: %s", where)
	}
	if !strings.Contains(r.stdout, "🎉 tab\tend") || !strings.Contains(r.stdout, "← permission for execute") {
		t.Errorf("the text around the sequences was lost:\n%s", r.stdout)
	}
}

func TestExportWritesAFileThatReplayPlaysFromTheStoreOrTheFile(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where acpflow puts the runs it exports for replay
	state := filepath.Join(dir, "state.db")
	id, recorded := recordHello(t, dir, state)

	// To standard output and to a file: the same document, the file private.
	file := filepath.Join(dir, "hello.transcript.json")
	stdout := acpflow(t, dir, "export", id, "--state", state)
	if r := acpflow(t, dir, "export", id[:10], "-o", file, "--state", state); r.code != 0 || stdout.code != 0 {
		t.Fatalf("export: exit %d / %d\n%s%s", r.code, stdout.code, r.stderr, stdout.stderr)
	}
	if stdout.stdout != readFile(t, file) {
		t.Error("export to standard output differs from export -o")
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the exported file's mode = %v, %v; want 0600", st.Mode(), err)
	}
	f, err := transcript.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if f.RunID != id || f.Workflow != "hello" || len(f.Steps) != 2 || f.Steps[0].Step != "greet" {
		t.Fatalf("exported %s %s with %d steps", f.RunID, f.Workflow, len(f.Steps))
	}
	if p := f.Steps[0].Permissions; len(p) != 1 || p[0].OptionID != "allow-once" || p[0].Rule != "shorthand" {
		t.Errorf("greet's permission records = %+v, want the recorded allow-once", p)
	}

	// The same two steps played back, from the run id (and a step of it)
	// and from the file: each step's output is what the real one said.
	for _, from := range []string{id, file} {
		wf := writeWorkflow(t, dir, `name: again
agents:
  r: {builtin: replay, from: `+from+`}
  s: {builtin: replay, from: `+from+`/summarize}
steps:
  - id: greet
    uses: acp-subagent
    with: {agent: r, prompt: "Say hello to world."}
    policies: {permission: allow}
  - id: other
    needs: [greet]
    uses: acp-subagent
    with: {agent: s, prompt: "${{ steps.greet.output }}"}
`)
		out := filepath.Join(dir, "again.jsonl")
		os.Remove(out)
		r := acpflow(t, dir, "run", wf, "--state", state, "--output", out)
		if r.code != 0 {
			t.Fatalf("from: %s: exit %d\n%s", from, r.code, r.stderr)
		}
		var res struct {
			Steps map[string]map[string]any `json:"steps"`
		}
		json.Unmarshal([]byte(readFile(t, out)), &res)
		if res.Steps["greet"]["output"] != recorded["greet"]["output"] || res.Steps["other"]["output"] != recorded["summarize"]["output"] {
			t.Errorf("from: %s: outputs %q, %q; want the recorded %q, %q", from,
				res.Steps["greet"]["output"], res.Steps["other"]["output"], recorded["greet"]["output"], recorded["summarize"]["output"])
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "acpflow-replay-*")); len(left) > 0 {
		t.Errorf("the exported runs were left behind: %v", left)
	}

	// A from: that names neither a file nor a run starts nothing.
	wf := writeWorkflow(t, dir, `name: none
agents:
  r: {builtin: replay, from: 20991231T000000-nothing}
steps:
  - {id: greet, uses: acp-subagent, with: {agent: r, prompt: hi}}
`)
	r := acpflow(t, dir, "run", wf, "--state", state)
	if r.code != 2 || !strings.Contains(r.stderr, "agent r: from: 20991231T000000-nothing: not a transcript file, nor a recorded run") {
		t.Errorf("an unknown run: exit %d\n%s", r.code, r.stderr)
	}
	if r := acpflow(t, dir, "export", "20991231T000000-nothing", "--state", state); r.code != 2 {
		t.Errorf("export of an unknown run: exit %d\n%s", r.code, r.stderr)
	}
}
