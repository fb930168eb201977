package main

// End-to-end tests of teardown through the real binary: what an agent
// starts at the very end of its turn, the EOF wait, and the result line of
// a capped output.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestABatchLeavesNothingAnAgentStartedAsItsTurnEnded runs a batch of runs,
// four at once, each with one step whose agent starts, right after its
// answer and without waiting, a setsid sleeper, a double-forked daemon, a
// storm of setsid sleepers, a daemon that keeps re-forking to a new pid,
// and a shell that forks sleepers in a loop; then exits on EOF.
//
// Class of input: every timing between the turn's end and the teardown,
// with other agents live at once (so an orphan can only be told apart by
// the marker its agent's environment gave it), for every way of leaving
// the agent's process group. When acpflow has exited, no process the
// agents recorded, no process carrying an agent's marker, and no process
// running the test agent's binary is alive.
func TestABatchLeavesNothingAnAgentStartedAsItsTurnEnded(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	args := []string{"-record", record}
	for _, how := range []string{"setsid", "daemon", "storm", "refork", "sh"} {
		args = append(args, "-turn-end-spawn", how)
	}
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: strays
inputs:
  n: {type: number}
agents:
  a:
    command: %s
    args: %s
    dispose: {eof-grace: 5s, term-grace: 2s}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: "run ${{ inputs.n }}"}}
`, testAgent, agentArgs(args...)))
	const runs = 24
	var lines strings.Builder
	for i := range runs {
		fmt.Fprintf(&lines, "{\"n\": %d}\n", i)
	}
	inputs := filepath.Join(dir, "inputs.jsonl")
	if err := os.WriteFile(inputs, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := acpflow(t, dir, "run", wf, "--inputs", inputs, "--concurrency", "4", "--state", filepath.Join(dir, "state.db"))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	starts := 0
	for _, rec := range readRecords(t, record) {
		if rec["event"] == "start" {
			starts++
		}
	}
	if starts != runs {
		t.Errorf("%d agents started, want %d", starts, runs)
	}
	assertAgentsGone(t, record)
	assertNoProcessFrom(t, binDir)
}

// teardownTier is the tier of the one teardown in a --json event stream.
func teardownTier(t *testing.T, stdout string) string {
	t.Helper()
	tier, _ := teardownEvent(t, stdout)["tier"].(string)
	return tier
}

// TestAnIdleFlushIsWaitedForUnlessTheAgentSaysItNeverExitsOnEOF: after its
// stdin closes, the agent finishes its work while idle (a timer, as a
// network write looks from outside) and exits by itself within its
// eof-grace: acpflow waits for it and sends no SIGTERM. An agent whose
// definition says dispose.eof-idle is sent SIGTERM once idle that long.
//
// Class of input: each way an agent's ladder is given: a command acpflow
// knows nothing about (acpflow's default grace), presets whose agents exit
// on EOF (their measured graces: gemini 2 s, qwen 10 s; the preset's own
// command replaced by the scripted agent), and an agent with eof-idle that
// never exits on EOF. Each flush is idle far longer than an idle cut
// (100 ms) and leaves most of the grace spare (the gemini preset's 2 s
// least), so that a loaded machine's slow exit after the flush is not
// taken for a flush cut short.
func TestAnIdleFlushIsWaitedForUnlessTheAgentSaysItNeverExitsOnEOF(t *testing.T) {
	for _, tc := range []struct {
		name, agent string
		args        []string
		tier        string
		sigterm     bool
	}{
		{"a command acpflow knows nothing about", "", []string{"-eof-flush", "1s"}, "eof", false},
		{"preset gemini", "preset: gemini", []string{"-modes", "default", "-eof-flush", "400ms"}, "eof", false},
		{"preset qwen", "preset: qwen", []string{"-modes", "default", "-eof-flush", "1s"}, "eof", false},
		{"eof-idle on an agent that never exits on EOF", "dispose: {eof-grace: 60s, eof-idle: 100ms}", []string{"-ignore-eof"}, "term", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "record.jsonl")
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: flush
agents:
  a:
    command: %s
    args: %s
    %s
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}
`, testAgent, agentArgs(append([]string{"-record", record}, tc.args...)...), tc.agent))
			r := acpflow(t, dir, "run", wf, "--json", "--state", filepath.Join(dir, "state.db"))
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stderr, r.stdout)
			}
			if tier := teardownTier(t, r.stdout); tier != tc.tier {
				t.Errorf("teardown tier %q, want %q", tier, tc.tier)
			}
			terms := 0
			for _, rec := range readRecords(t, record) {
				if rec["event"] == "sigterm" {
					terms++
				}
			}
			if (terms > 0) != tc.sigterm {
				t.Errorf("the agent got %d SIGTERMs; want SIGTERM %v", terms, tc.sigterm)
			}
			assertAgentsGone(t, record)
		})
	}
}

// TestACappedOutputIsRecordedOnce: an output that passes max-output is
// kept up to the cap, in output; its last message was cut off, so final
// is empty instead of a second copy of it, and the result line stays
// under the cap plus a constant.
//
// Class of input: where the cap falls and what is cut: one long message
// streamed in many chunks (final was all of output), an earlier message
// then a long last one, a cap that falls in the blank line between two
// messages, text that JSON would escape (<, >, &), and text of multi-byte
// characters.
func TestACappedOutputIsRecordedOnce(t *testing.T) {
	const capBytes = 64 << 10
	const slack = 16 << 10 // the rest of the line: ids, times, the error
	long := func(s string, n int) string { return strings.Repeat(s, n/len(s)) }
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"one message in many chunks", []string{"-flood", "3000", "-flood-size", "64"}},
		{"an earlier message, then a long last one", []string{"-noise", "-chunk", "first message", "-chunk", long("y", 100<<10)}},
		{"the cap falls between two messages", []string{"-noise", "-chunk", long("z", capBytes-1), "-chunk", "second"}},
		{"text JSON escapes for HTML", []string{"-noise", "-chunk", "a", "-chunk", long("<&>", 96<<10)}},
		{"multi-byte characters", []string{"-chunk", long("é", 100<<10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "record.jsonl")
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: capped
agents:
  a:
    command: %s
    args: %s
    max-output: 64KiB
steps:
  - {id: s, uses: acp-subagent, continue-on-error: true, with: {agent: a, prompt: hi}}
`, testAgent, agentArgs(append([]string{"-record", record}, tc.args...)...)))
			out := filepath.Join(dir, "out.jsonl")
			r := acpflow(t, dir, "run", wf, "--output", out, "--state", filepath.Join(dir, "state.db"))
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > capBytes+slack {
				t.Errorf("the result line is %d bytes, over the cap %d plus %d", len(b), capBytes, slack)
			}
			var res struct {
				Steps map[string]struct {
					Status, Output, Error string
					Final                 *string
				}
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			s := res.Steps["s"]
			if s.Status != "failed" || !strings.Contains(s.Error, "passed max-output") {
				t.Errorf("status %q, error %q: want failed, past max-output", s.Status, s.Error)
			}
			if len(s.Output) > capBytes || len(s.Output) < capBytes-4 {
				t.Errorf("output is %d bytes, want the first %d", len(s.Output), capBytes)
			}
			if s.Final == nil {
				t.Error("no final in the result")
			} else if *s.Final != "" {
				t.Errorf("final is %d bytes, want empty: the cut message is in output", len(*s.Final))
			}
			assertAgentsGone(t, record)
		})
	}
}

// teardownEvent is the one teardown in a --json event stream.
func teardownEvent(t *testing.T, stdout string) map[string]any {
	t.Helper()
	for _, e := range jsonEvents(t, stdout) {
		if e["kind"] == "teardown" {
			return e
		}
	}
	t.Fatalf("no teardown event in:\n%s", stdout)
	return nil
}

// TestAnAgentsSessionIsClosedBeforeItsEOFAndEndsItsWait: at the end of a
// step acpflow sends session/close to an agent that advertises it, then
// closes its stdin; an agent that ends on session/close is gone without
// any signal, long before its EOF grace. One that advertises close but
// ends on neither close nor EOF falls back to the ladder (SIGTERM after
// the grace), and one that does not advertise close is never sent it.
//
// Class of input: each answer an agent can give to the end of its
// session: ends on close (and ignores EOF), ignores both, exits on EOF
// without offering close. The graces are far longer than a close (6 s
// default; the ignoring agent's 300 ms is what it must wait out).
func TestAnAgentsSessionIsClosedBeforeItsEOFAndEndsItsWait(t *testing.T) {
	const closeCaps = `{"sessionCapabilities":{"close":{}}}`
	for _, tc := range []struct {
		name, dispose string
		args          []string
		closed        bool
		tiers         []string
		sigterm       bool
	}{
		{"it ends on session/close and ignores EOF", "", []string{"-capabilities", closeCaps, "-ignore-eof", "-exit-on-close"}, true, []string{"exited", "eof"}, false},
		{"it ignores both", "dispose: {eof-grace: 300ms}", []string{"-capabilities", closeCaps, "-ignore-eof"}, true, []string{"term"}, true},
		{"it does not offer close", "", nil, false, []string{"eof"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "record.jsonl")
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: closing
agents:
  a:
    command: %s
    args: %s
    %s
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}
`, testAgent, agentArgs(append([]string{"-record", record}, tc.args...)...), tc.dispose))
			r := acpflow(t, dir, "run", wf, "--json", "--state", filepath.Join(dir, "state.db"))
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stderr, r.stdout)
			}
			td := teardownEvent(t, r.stdout)
			if tier, _ := td["tier"].(string); !slices.Contains(tc.tiers, tier) {
				t.Errorf("teardown tier %q, want one of %v", tier, tc.tiers)
			}
			// A hang guard, not a measurement: an agent that ends on close
			// is gone in milliseconds, its EOF grace is 6 s.
			if ms, _ := td["duration_ms"].(float64); !tc.sigterm && ms > 3000 {
				t.Errorf("teardown took %v ms: it waited for the EOF grace", ms)
			}
			events := map[string]int{}
			for _, rec := range readRecords(t, record) {
				ev, _ := rec["event"].(string)
				events[ev]++
			}
			if (events["session_close"] > 0) != tc.closed {
				t.Errorf("session/close sent %d times, want sent %v", events["session_close"], tc.closed)
			}
			if (events["sigterm"] > 0) != tc.sigterm {
				t.Errorf("the agent got %d SIGTERMs; want SIGTERM %v", events["sigterm"], tc.sigterm)
			}
			assertAgentsGone(t, record)
		})
	}
}

// TestCodexsAdapterIsEndedOnceItsOwnWorkIsDone: codex-acp, once its
// app-server has exited at EOF, only waits out a 2 s timer of its own; the
// codex preset ends the EOF wait when the agent's process is the last of
// its group and idle, instead of waiting out the grace. The scripted
// agent stands in for it with the preset's command replaced: it never
// exits on EOF, and the grace is a minute, so only the early end can
// make the teardown short. A command acpflow knows nothing about, with the
// same grace, is not cut short: it is still waited for after its idle
// 300 ms flush.
//
// Class of input: the preset that knows its agent's end (codex), and an
// agent with no preset whose idle flush must not be taken for done.
func TestCodexsAdapterIsEndedOnceItsOwnWorkIsDone(t *testing.T) {
	for _, tc := range []struct {
		name, preset string
		args         []string
		tier         string
		sigterm      bool
	}{
		{"preset codex", "preset: codex", []string{"-modes", "read-only,workspace-write", "-ignore-eof"}, "term", true},
		{"no preset", "", []string{"-eof-flush", "300ms"}, "eof", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "record.jsonl")
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: codexend
agents:
  a:
    %s
    command: %s
    args: %s
    dispose: {eof-grace: 1m}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}
`, tc.preset, testAgent, agentArgs(append([]string{"-record", record}, tc.args...)...)))
			r := acpflow(t, dir, "run", wf, "--json", "--state", filepath.Join(dir, "state.db"))
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stderr, r.stdout)
			}
			td := teardownEvent(t, r.stdout)
			if tier, _ := td["tier"].(string); tier != tc.tier {
				t.Errorf("teardown tier %q, want %q", tier, tc.tier)
			}
			// A hang guard: the early end comes a few looks after EOF, the
			// grace after a minute.
			if ms, _ := td["duration_ms"].(float64); ms > 30000 {
				t.Errorf("teardown took %v ms: it waited out the EOF grace", ms)
			}
			terms, flushed := 0, 0
			for _, rec := range readRecords(t, record) {
				switch rec["event"] {
				case "sigterm":
					terms++
				case "flushed":
					flushed++
				}
			}
			if (terms > 0) != tc.sigterm {
				t.Errorf("the agent got %d SIGTERMs; want SIGTERM %v", terms, tc.sigterm)
			}
			if !tc.sigterm && flushed == 0 {
				t.Error("the agent's flush was cut short")
			}
			assertAgentsGone(t, record)
		})
	}
}
