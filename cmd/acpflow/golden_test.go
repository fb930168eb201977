package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acpflow/acpflow/runs/store"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// knownStore writes a store with fixed runs, as the golden files expect.
func knownStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.CreateRun(ctx, store.Run{ID: "20261130T090000-aaaa0001", Workflow: "review", WorkflowFile: "/ws/review.yaml",
		WorkflowHash: "h", Workspace: "/ws", Inputs: map[string]any{"task": "add a flag"}, StartedAt: at}))
	must(s.SaveStep(ctx, store.Step{RunID: "20261130T090000-aaaa0001", StepID: "plan", Ord: 0, Status: "succeeded",
		StopReason: "completed", Output: "1. parse\n2. test", Attempts: 1, SessionID: "sess-1", StartedAt: at,
		EndedAt: at.Add(800 * time.Millisecond), DurationMS: 800,
		Permissions: []store.Permission{{ToolCallID: "call_1", Kind: "read", Title: "README.md", Decision: "allow",
			Outcome: "selected", OptionID: "allow-once", Layer: "workflow", Policy: "workflow", Rule: "1"}}}))
	must(s.SaveStep(ctx, store.Step{RunID: "20261130T090000-aaaa0001", StepID: "review", Ord: 1, Status: "failed",
		StopReason: "error", Error: "agent claude exited (exit status 3) during session/prompt", Attempts: 2,
		SessionID: "sess-2", Stderr: "starting\nboom: out of cheese\n", StartedAt: at.Add(time.Second),
		EndedAt: at.Add(2 * time.Second), DurationMS: 1000,
		Permissions: []store.Permission{{ToolCallID: "call_2", Kind: "execute", Title: "rm -rf build", Decision: "reject",
			Outcome: "selected", OptionID: "reject-once", Layer: "outer", Policy: "/etc/acpflow/policy.yaml", Rule: "2", Reason: "destructive or networked command"}}}))
	must(s.FinishRun(ctx, "20261130T090000-aaaa0001", "failed", "", map[string]any{}, at.Add(2*time.Second)))
	must(s.CreateRun(ctx, store.Run{ID: "20261130T100000-bbbb0002", Workflow: "hello", WorkflowFile: "/ws/hello.yaml",
		WorkflowHash: "h2", Workspace: "/ws", Inputs: map[string]any{"who": "Ada"}, StartedAt: at.Add(time.Hour)}))
	must(s.FinishRun(ctx, "20261130T100000-bbbb0002", "succeeded", "", map[string]any{"greeting": "hello Ada"}, at.Add(time.Hour+300*time.Millisecond)))
	return path
}

func TestRunsAndShowOnAKnownStore(t *testing.T) {
	state := knownStore(t)
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"runs.golden", []string{"runs"}},
		{"runs-failed.golden", []string{"runs", "--status", "failed"}},
		{"runs.json.golden", []string{"runs", "--json"}},
		{"show.golden", []string{"show", "20261130T090000-aaaa"}},
		{"show.json.golden", []string{"show", "20261130T090000-aaaa0001", "--json"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			r := acpflow(t, t.TempDir(), append(tc.args, "--state", state)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			path := filepath.Join("testdata", tc.golden)
			if *update {
				os.WriteFile(path, []byte(r.stdout), 0o644)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if r.stdout != string(want) {
				t.Errorf("output differs from %s:\n--- got\n%s\n--- want\n%s", path, r.stdout, want)
			}
		})
	}
	if r := acpflow(t, t.TempDir(), "show", "nope-not-a-run", "--state", state); r.code != 2 {
		t.Errorf("show of an unknown id: exit %d", r.code)
	}
}
