package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Session updates newer than the ACP SDK acpflow links (ACP's notice,
// compaction_update and compaction_summary_chunk, and a kind no version
// names yet) are recorded as the agent sent them and shown by `show
// --transcript`; none is taken for output, none fails the turn. The class
// of input: kinds the SDK cannot decode, one of them shaped like a message
// chunk (content, no more), and one with no kind at all.
func TestSessionUpdatesNewerThanTheSDKAreRecordedNeverOutput(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	updates := []string{
		`{"sessionUpdate": "notice", "severity": "warning", "title": "MCP server unavailable", "description": "continuing without it"}`,
		`{"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"}`,
		`{"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": {"type": "text", "text": "SUMMARY OF EARLIER WORK"}}`,
		`{"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed"}`,
		`{"sessionUpdate": "hologram_update", "content": {"type": "text", "text": "FROM THE FUTURE"}}`,
		`{"content": {"type": "text", "text": "NO KIND AT ALL"}}`,
	}
	var args []string
	for _, u := range updates {
		args = append(args, "-update-json", u)
	}
	wf := fmt.Sprintf("name: newer\nagents:\n  a: {command: %s, args: %s}\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: a, prompt: x}}\n",
		testAgent, agentArgs(append([]string{"-record", record}, args...)...))
	path := writeWorkflow(t, dir, wf)
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.json")
	r := acpflow(t, dir, "run", path, "--json", "--state", state, "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0: an update acpflow does not know fails no turn\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var res struct {
		RunID string `json:"run_id"`
		Steps map[string]struct {
			Status, Output, Final string
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(readFile(t, out)), &res); err != nil {
		t.Fatal(err)
	}
	if st := res.Steps["s"]; st.Status != "succeeded" || st.Output != "Hello, world" || st.Final != "Hello, world" {
		t.Errorf("step s: %s, output %q, final %q; want succeeded with the agent's answer alone", st.Status, st.Output, st.Final)
	}
	kinds := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e struct{ Type, Kind string }
		json.Unmarshal([]byte(line), &e)
		if e.Type == "step_update" {
			kinds[e.Kind]++
		}
	}
	for kind, n := range map[string]int{"notice": 1, "compaction_update": 2, "compaction_summary_chunk": 1, "hologram_update": 1, "unknown": 1} {
		if kinds[kind] != n {
			t.Errorf("%d step_update events of kind %s, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
	show := acpflow(t, dir, "show", res.RunID, "--transcript", "--state", state)
	for _, want := range []string{
		"← notice (warning):\n             MCP server unavailable\n             continuing without it",
		"← compaction c1 in_progress",
		"← compaction summary: SUMMARY OF EARLIER WORK",
		"← compaction c1 completed",
		"← update: hologram_update",
		"← agent: Hello, world",
	} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("show --transcript lacks %q\n%s", want, show.stdout)
		}
	}
	assertAgentsGone(t, record)
}
