package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/steps"
)

// What a hostile agent prints: a clipboard write (OSC 52), a window title,
// a clear screen, cursor moves, a carriage return that overwrites a line,
// an 8-bit CSI, bells, DEL; and text that must survive (emoji, tab, newline).
const (
	hostileOutput = "before\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x1b\\ \x1b[2J\x1b[H \x1b[5A safe\rEVIL \u009b2J ding\x07 del\x7f 🎉 tab\tend"
	hostileStderr = "stderr \x1b]52;c;aGk=\x07 \x1b[31mred\x1b[0m\roverwritten\n"
	hostileTitle  = "rm \x1b]0;t\x07 x"
)

// terminalUnsafe says where s holds something a terminal would act on: ESC,
// BEL, CR, another C0 control but newline and tab, DEL, a C1 control, or
// invalid UTF-8.
func terminalUnsafe(s string) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Sprintf("invalid UTF-8 at %d", i)
		case (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f):
			return fmt.Sprintf("%U at %d in %q", r, i, s[max(0, i-20):min(len(s), i+20)])
		}
	}
	return ""
}

// yamlString quotes s for YAML: JSON quoting, with DEL and the C1 controls
// escaped too (YAML does not allow them raw).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return terminalJSON(b)
}

// hostileWorkflows writes two workflows on the test agent: talk.yaml, whose
// step prints the hostile text, asks permission for a hostile title and
// succeeds; crash.yaml, whose step writes the hostile stderr and crashes.
func hostileWorkflows(t *testing.T, dir, record string) (talk, crash string) {
	t.Helper()
	args := func(a ...string) string {
		q := make([]string, len(a))
		for i, s := range a {
			q[i] = yamlString(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	talk = write("talk.yaml", fmt.Sprintf(`name: talk
agents:
  talker: {command: %s, args: %s}
steps:
  - id: talk
    uses: acp-subagent
    with: {agent: talker, prompt: hi}
    policies: {permission: allow}
outputs:
  text: ${{ steps.talk.output }}
`, testAgent, args("-record", record, "-chunk", hostileOutput, "-stderr", hostileStderr, "-permission", "execute:"+hostileTitle)))
	crash = write("crash.yaml", fmt.Sprintf(`name: crash
agents:
  crasher: {command: %s, args: %s}
steps:
  - id: crash
    uses: acp-subagent
    with: {agent: crasher, prompt: hi}
`, testAgent, args("-record", record, "-stderr", hostileStderr, "-crash-on", "session/prompt")))
	return talk, crash
}

// oneResult reads the single result line --output wrote.
type oneResult struct {
	RunID   string         `json:"run_id"`
	Outputs map[string]any `json:"outputs"`
	Steps   map[string]struct {
		Output      string `json:"output"`
		Error       string `json:"error"`
		Permissions []struct {
			Title string `json:"title"`
		} `json:"permissions"`
	} `json:"steps"`
}

func runHostile(t *testing.T, dir, wf string, code int) (result, oneResult) {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(wf)+".out.jsonl")
	r := acpflow(t, dir, "run", wf, "--output", out)
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", wf, r.code, code, r.stdout, r.stderr)
	}
	var res oneResult
	if err := json.Unmarshal([]byte(readFile(t, out)), &res); err != nil {
		t.Fatal(err)
	}
	return r, res
}

func assertTerminalSafe(t *testing.T, what string, r result, visible ...string) {
	t.Helper()
	for name, s := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
		if where := terminalUnsafe(s); where != "" {
			t.Errorf("%s's %s: %s\n%s", what, name, where, s)
		}
	}
	for _, want := range visible {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("%s lost %q:\n%s%s", what, want, r.stdout, r.stderr)
		}
	}
}

func TestAgentTextReachesTheTerminalNeutralisedAndTheRecordsExact(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	talkWF, crashWF := hostileWorkflows(t, dir, record)
	talkRun, talk := runHostile(t, dir, talkWF, 0)
	crashRun, crash := runHostile(t, dir, crashWF, 1)

	t.Run("run's plain view holds no escape or control", func(t *testing.T) {
		assertTerminalSafe(t, "run (succeeded)", talkRun, "permission execute", "EVIL", "🎉 tab\tend")
		assertTerminalSafe(t, "run (crashed)", crashRun, "red", "overwritten", "crashing on session/prompt")
	})
	t.Run("--output keeps the agent's text exact", func(t *testing.T) {
		out := talk.Steps["talk"].Output
		if !strings.HasSuffix(out, hostileOutput) || !strings.Contains(out, hostileTitle) {
			t.Errorf("output = %q, want it to end with %q and hold %q", out, hostileOutput, hostileTitle)
		}
		if got := talk.Outputs["text"]; got != out {
			t.Errorf("outputs.text = %q, want the step's output %q", got, out)
		}
		if p := talk.Steps["talk"].Permissions; len(p) != 1 || p[0].Title != hostileTitle {
			t.Errorf("permissions = %+v, want the title %q", p, hostileTitle)
		}
		if !strings.Contains(crash.Steps["crash"].Error, "overwritten") {
			t.Errorf("the crash's error lacks the agent's stderr: %q", crash.Steps["crash"].Error)
		}
	})
	t.Run("show's human view holds no escape or control", func(t *testing.T) {
		r := acpflow(t, dir, "show", talk.RunID)
		if r.code != 0 {
			t.Fatalf("show: exit %d\n%s", r.code, r.stderr)
		}
		assertTerminalSafe(t, "show (succeeded)", r, "safe", "EVIL", "🎉 tab\tend", "permission execute", "red", "overwritten")
		r = acpflow(t, dir, "show", crash.RunID)
		assertTerminalSafe(t, "show (crashed)", r, "red", "overwritten", "crashing on session/prompt")
	})
	t.Run("show --json keeps the agent's text exact", func(t *testing.T) {
		for _, c := range []struct{ run, step, field, want string }{
			{talk.RunID, "talk", "output", talk.Steps["talk"].Output},
			{talk.RunID, "talk", "stderr", hostileStderr},
			{crash.RunID, "crash", "stderr", hostileStderr},
		} {
			r := acpflow(t, dir, "show", c.run, "--json")
			var d struct {
				Steps map[string]map[string]any `json:"steps"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
				t.Fatalf("show --json: %v\n%s", err, r.stdout)
			}
			if got, _ := d.Steps[c.step][c.field].(string); !strings.Contains(got, c.want) {
				t.Errorf("steps.%s.%s = %q, want it to hold %q", c.step, c.field, got, c.want)
			}
		}
	})
	t.Run("runs holds no escape or control", func(t *testing.T) {
		assertTerminalSafe(t, "runs", acpflow(t, dir, "runs"))
	})
	t.Run("run --json keeps the agent's chunk exact", func(t *testing.T) {
		r := acpflow(t, dir, "run", talkWF, "--json")
		found := false
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var e map[string]any
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("not a JSON line: %q", line)
			}
			if e["type"] == "step_update" && e["kind"] == "agent_message_chunk" && e["text"] == hostileOutput {
				found = true
			}
		}
		if !found {
			t.Errorf("no agent_message_chunk event with the exact text:\n%s", r.stdout)
		}
	})
	t.Run("a batch's plain lines hold no escape or control", func(t *testing.T) {
		inputs := filepath.Join(dir, "inputs.jsonl")
		if err := os.WriteFile(inputs, []byte("{}\n{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := acpflow(t, dir, "run", crashWF, "--inputs", inputs)
		if r.code != 1 {
			t.Errorf("batch: exit %d, want 1", r.code)
		}
		assertTerminalSafe(t, "batch", r, "failed")
	})
	assertAgentsGone(t, record)
}

func TestProbeTellsTheTruth(t *testing.T) {
	// --timeout bounds spawn, initialize and session/new together. A case
	// that is not about it gets a minute, so that on a loaded machine the
	// crash or the refusal, not the bound, ends the probe; a case about it
	// gets 5 s, in which a loaded machine still starts the agent and
	// answers initialize (the session/new case needs that much). The
	// messages say which ended it: no time is asserted.
	for _, tc := range []struct {
		name       string
		args       []string
		timeout    string
		code       int
		stderr     string // in acpflow's stderr
		sessionErr string
	}{
		{"an agent that crashes at initialize exits 1", []string{"-crash-on", "initialize"}, "60s", 1, "initialize: the agent exited without answering (exit status 3)", ""},
		{"an agent that crashes at session/new exits 1", []string{"-crash-on", "session/new"}, "60s", 1, "session/new: the agent exited without answering (exit status 3)", ""},
		{"an agent that refuses session/new with a JSON-RPC error exits 0 and says why", []string{"-require-auth", "key"}, "60s", 0, "", "Authentication required (code -32000)"},
		{"an agent that never answers initialize exits 1 after --timeout", []string{"-hang-on", "initialize"}, "5s", 1, "initialize: the agent did not answer within 5s", ""},
		{"an agent that never answers session/new exits 1 after --timeout", []string{"-hang-on", "session/new"}, "5s", 1, "session/new: the agent did not answer within 5s", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "record.jsonl")
			r := acpflow(t, dir, append([]string{"probe", "--timeout", tc.timeout, "--", testAgent, "-record", record}, tc.args...)...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr = %q, want it to say %q", r.stderr, tc.stderr)
			}
			var info map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
				t.Fatalf("probe printed no JSON: %v\n%s", err, r.stdout)
			}
			if got, _ := info["session_error"].(string); got != tc.sessionErr {
				t.Errorf("session_error = %q, want %q", got, tc.sessionErr)
			}
			assertAgentsGone(t, record)
		})
	}
}

func TestProbePrintsTheCapabilitiesTheAgentSent(t *testing.T) {
	for _, tc := range []struct{ name, caps string }{
		{"the test agent's defaults", `{"loadSession":false,"promptCapabilities":{"image":false,"audio":false,"embeddedContext":false}}`},
		{"only loadSession, as gemini sends no auth or sessionCapabilities", `{"loadSession":true}`},
		{"an empty object", `{}`},
		{"unknown and _meta keys, and a C1 control in a string", `{"loadSession":true,"_meta":{"x":[1,"` + "\u009b2J" + `"]},"future":{"a":null}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := acpflow(t, dir, "probe", "--", testAgent, "-capabilities", tc.caps)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			if where := terminalUnsafe(r.stdout); where != "" {
				t.Errorf("probe printed %s", where)
			}
			var info struct {
				Caps json.RawMessage `json:"agent_capabilities"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
				t.Fatalf("probe printed no JSON: %v\n%s", err, r.stdout)
			}
			var got, want any
			json.Unmarshal(info.Caps, &got)
			json.Unmarshal([]byte(tc.caps), &want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("agent_capabilities = %s, want what the agent sent: %s", info.Caps, tc.caps)
			}
		})
	}
}

// evilID hides fake lines of show's own behind each way of breaking or
// rewriting a line: LF, CR, CR LF, U+2028, U+2029, NEL, VT, FF, a CSI
// cursor move and erase, a bidi override.
const evilID = "id\n  FAKE lf\r  FAKE cr\r\n  FAKE crlf\u2028FAKE ls\u2029FAKE ps\u0085FAKE nel\vFAKE vt\fFAKE ff\x1b[1A\x1b[2KFAKE csi\u202eFAKE bidi"

// assertNoFakeLine checks that no line of what acpflow printed begins
// with the agent's FAKE where a line of acpflow's own would (indented by
// less than four: the lines of a block of text, an output or an error,
// are indented under it by four or more), and that nothing in it could
// break or reorder a line on a terminal.
func assertNoFakeLine(t *testing.T, what, s string) {
	t.Helper()
	if m := regexp.MustCompile(`(?m)^ {0,3}FAKE.*$`).FindString(s); m != "" {
		t.Errorf("%s has a line of the agent's: %q\n%s", what, m, s)
	}
	if where := terminalUnsafe(s); where != "" {
		t.Errorf("%s: %s", what, where)
	}
	if strings.ContainsAny(s, "\u2028\u2029\u202e") {
		t.Errorf("%s holds a line separator or a bidi override:\n%s", what, s)
	}
}

// What show prints of an agent's own strings stays on the one line show
// gives it, escaped: its session id, its name and version, the stop
// reason it sent, a tool's kind and title, the option ids it offered and
// the one picked. Classes of input covered: the line breaks and
// rewrites of evilID in each of those places, in `show`, in `show
// --transcript`, and in the plain lines of `run`.
func TestShowPrintsAnAgentsStringsEachOnItsOneLine(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	record := filepath.Join(dir, "record.jsonl")
	info, _ := json.Marshal(map[string]string{"name": "agent" + evilID, "version": "1.0" + evilID})
	perm, _ := json.Marshal(map[string]any{
		"toolCall": map[string]any{"toolCallId": "call" + evilID, "kind": "execute" + evilID, "title": "make" + evilID, "rawInput": map[string]any{"command": "make"}},
		// The agent echoes the option picked in its answer: that one is plain.
		"options": []map[string]string{{"optionId": "yes", "name": "Allow", "kind": "allow_once"}, {"optionId": "no" + evilID, "name": "Reject", "kind": "reject_once"}},
	})
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: evil
agents:
  evil: {command: %s, args: %s}
  stopper: {command: %s, args: %s}
policies: {permission: allow}
steps:
  - {id: talk, uses: acp-subagent, with: {agent: evil, prompt: hi}}
  - {id: stop, uses: acp-subagent, with: {agent: stopper, prompt: hi}, continue-on-error: true}
`, testAgent, agentArgs("-record", record, "-session-id", "sess"+evilID, "-agent-info", string(info), "-permission-json", string(perm)),
		testAgent, agentArgs("-record", record, "-stop", "end_turn"+evilID)))
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--state", state, "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertNoFakeLine(t, "run's plain lines", r.stdout+r.stderr)
	var res struct {
		RunID string `json:"run_id"`
		Steps map[string]struct {
			SessionID string `json:"session_id"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(readFile(t, out)), &res); err != nil {
		t.Fatal(err)
	}
	if res.Steps["talk"].SessionID != "sess"+evilID {
		t.Errorf("the result's session_id is %q, want the agent's exact", res.Steps["talk"].SessionID)
	}
	show := acpflow(t, dir, "show", res.RunID, "--state", state)
	assertNoFakeLine(t, "show", show.stdout)
	escaped := `id\n  FAKE lf\r  FAKE cr\r\n  FAKE crlf\u2028FAKE ls\u2029FAKE ps\u0085FAKE nel\vFAKE vt\fFAKE ff\x1b[1A\x1b[2KFAKE csi\u202eFAKE bidi`
	for _, want := range []string{
		"  session: sess" + escaped + "\n",
		`  permission execute` + escaped[:20],
		`"make` + escaped + `": allow -> yes (workflow policy`,
	} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("show does not print %q:\n%s", want, show.stdout)
		}
	}
	tr := acpflow(t, dir, "show", res.RunID, "--transcript", "--state", state)
	if tr.code != 0 {
		t.Fatalf("show --transcript: exit %d\n%s", tr.code, tr.stderr)
	}
	assertNoFakeLine(t, "show --transcript", tr.stdout)
	for _, want := range []string{
		"initialized: agent" + escaped + " 1.0" + escaped + ", protocol 1",
		"session sess" + escaped + "\n",
		"end of turn: end_turn" + escaped[:20],
		"permission for execute" + escaped[:20],
		"[yes, no" + escaped + "]",
	} {
		if !strings.Contains(tr.stdout, want) {
			t.Errorf("show --transcript does not print %q:\n%s", want, tr.stdout)
		}
	}
	assertAgentsGone(t, record)
}

// A record's numbers print in a few characters whatever they hold, so
// that no record widens `runs` or `show` (a cost of 1e308 printed 309
// digits). Classes of input covered, as a store may hold them (written
// by an older acpflow, or damaged): the largest token counts (int64's
// bound), a cost of 1e308 and one whose currency breaks the line, a
// duration past what Go's time.Duration holds, a run's sums of those;
// and a run's error of several lines.
func TestRunsAndShowBoundEveryNumberOfARecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	huge := int64(math.MaxInt64)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const id = "20261130T090000-eeee0001"
	must(s.CreateRun(ctx, store.Run{ID: id, Workflow: "numbers", WorkflowFile: "/ws/n.yaml", WorkflowHash: "h", Workspace: "/ws", StartedAt: at}))
	must(s.SaveStep(ctx, store.Step{RunID: id, StepID: "big", Status: "succeeded", StopReason: "completed", Attempts: 1,
		StartedAt: at, EndedAt: at.Add(time.Second), DurationMS: huge,
		Usage: &steps.Usage{InputTokens: &huge, OutputTokens: &huge, TotalTokens: &huge, ContextTokens: &huge, ContextSize: &huge,
			Cost: &steps.Cost{Amount: 1e308, Currency: "USD"}}}))
	must(s.SaveStep(ctx, store.Step{RunID: id, StepID: "odd", Ord: 1, Status: "succeeded", StopReason: "completed", Attempts: 1,
		StartedAt: at, EndedAt: at.Add(time.Second), DurationMS: 5,
		Usage: &steps.Usage{TotalTokens: &huge, Cost: &steps.Cost{Amount: 1.5e12, Currency: "US\n  FAKE currency"}}}))
	must(s.FinishRun(ctx, id, "failed", "one\n  FAKE error line", nil, at.Add(time.Hour)))
	must(s.SetRunUsage(ctx, id, &engine.RunUsage{Usage: steps.Usage{TotalTokens: &huge, Cost: &steps.Cost{Amount: 1e308, Currency: "USD"}}}))
	s.Close()

	runs := acpflow(t, t.TempDir(), "runs", "--state", path)
	show := acpflow(t, t.TempDir(), "show", id, "--state", path)
	if runs.code != 0 || show.code != 0 {
		t.Fatalf("runs: exit %d %s; show: exit %d %s", runs.code, runs.stderr, show.code, show.stderr)
	}
	for what, text := range map[string]string{"runs": runs.stdout, "show": show.stdout} {
		assertNoFakeLine(t, what, text)
		if m := regexp.MustCompile(`\d{27,}`).FindString(text); m != "" {
			t.Errorf("%s prints a number of %d digits:\n%s", what, len(m), text)
		}
	}
	for _, line := range strings.Split(runs.stdout, "\n") {
		if n := utf8.RuneCountInString(line); n > 160 {
			t.Errorf("runs is %d columns wide:\n%s", n, runs.stdout)
			break
		}
	}
	for _, want := range []string{
		"  usage:     9,223,372,036,854,775,807 tokens, 1e+308 USD\n",
		"  usage: 9,223,372,036,854,775,807 tokens, 1e+308 USD (in 9,223,372,036,854,775,807, out 9,223,372,036,854,775,807); context 9,223,372,036,854,775,807 of 9,223,372,036,854,775,807\n",
		`  usage: 9,223,372,036,854,775,807 tokens, 1.5e+12 US\n  FAKE curre… (cut from 18 bytes)`,
		"step big: succeeded (completed), 1 attempt(s), 2562047h47m16.854s\n",
		"  error:     one\n      FAKE error line\n",
	} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("show does not print %q:\n%s", want, show.stdout)
		}
	}
	if !strings.Contains(runs.stdout, "9,223,372,036,854,775,807 tokens, 1e+308 USD") {
		t.Errorf("runs:\n%s", runs.stdout)
	}
}
