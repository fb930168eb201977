package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// The run store opens while the step's agent starts (issue 28). A store
// it cannot open (one written by a newer acpflow) still ends the command
// as bad usage, naming the store: the agent was stopped before it was
// asked anything, and nothing is left running.
func TestARunOnAStoreItCannotOpenExitsTwoAndPromptsNothing(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: newer
agents:
  a: {command: %s, args: %s}
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: hi}
`, testAgent, agentArgs("-record", record)))
	if r := acpflow(t, dir, "run", wf, "--state", state); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	prompts := len(hasEvents(t, record, "prompt"))
	db, err := sql.Open("sqlite", state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	r := acpflow(t, dir, "run", wf, "--state", state)
	if r.code != 2 {
		t.Fatalf("exit %d, want 2\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{state, "newer acpflow", "999"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if n := len(hasEvents(t, record, "prompt")); n != prompts {
		t.Errorf("the agent was prompted on the store it could not open (%d prompts, was %d)", n, prompts)
	}
	assertAgentsGone(t, record)
}

// hasEvents is the agent's recorded events named event.
func hasEvents(t *testing.T, record, event string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range readRecords(t, record) {
		if r["event"] == event {
			out = append(out, r)
		}
	}
	return out
}
