//go:build realagents

package realagents_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/realagents/agentsetup"
	"github.com/acpflow/acpflow/realagents/modelserver"
	"github.com/acpflow/acpflow/steps"
)

// gemini-cli: its settings and its ask-everything policy are agentsetup's;
// the preset's env (GEMINI_CLI_NO_RELAUNCH) is added, as `preset: gemini`
// would add it.
func init() {
	preset, _ := steps.LookupPreset("gemini")
	turnAgents["gemini"] = &turnAgent{
		name: "gemini",
		// It resolves symlinks itself (measured, 0.61.0): a write through
		// an outward link never reaches acpflow's policy.
		refusesOutside: "Path not in workspace",
		adjust: func(a *agentsetup.Agent) {
			for _, k := range slices.Sorted(maps.Keys(preset.SetEnv)) {
				a.Env = append(a.Env, k+"="+preset.SetEnv[k])
			}
		},
	}
}

func TestGeminiCompletesAWholeTurn(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	script := modelserver.Script{
		{Say: "Step 1: Bash.", Shell: "mkdir -p d && echo hi > d/shell.txt"},
		{Say: "Step 2: Write.", Write: &modelserver.Write{Path: filepath.Join(s.dir, "written.txt"), Content: "written by gemini\n"}},
		{Say: "FINAL done", Chunks: 3},
	}
	step, es, r, reqs := s.turn(needTurnAgent(t, "gemini"), script, "Do the two steps.", "permission: allow", "")
	t.Logf("exit %d in %s; step %s/%s; output %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, step.Output)
	for _, q := range reqs {
		t.Logf("model request %s %s reply %d (%d bytes)", q.API, q.Path, q.Reply, len(q.Body))
	}
	for _, p := range step.Permissions {
		t.Logf("permission: kind %v, title %q, decision %v, outcome %v, option %v", p["kind"], p["title"], p["decision"], p["outcome"], p["option_id"])
	}
	if r.code != 0 || step.Status != "succeeded" || step.StopReason != "completed" {
		t.Errorf("exit %d, step %s/%s; want 0, succeeded/completed: %s\nstderr:\n%s", r.code, step.Status, step.StopReason, step.Error, r.stderr)
	}
	if !strings.Contains(step.Output, "FINAL done") {
		t.Errorf("output %q lacks the final answer", step.Output)
	}
	for _, f := range []string{"d/shell.txt", "written.txt"} {
		if _, err := os.Stat(filepath.Join(s.dir, f)); err != nil {
			t.Errorf("the turn did not create %s: %v", f, err)
		}
	}
	kinds := map[any]int{}
	for _, p := range step.Permissions {
		kinds[p["kind"]]++
	}
	if kinds["execute"] != 1 || kinds["edit"] != 1 {
		t.Errorf("permission requests by kind %v; want one execute and one edit", kinds)
	}
	if e := update(es, "teardown"); e != nil {
		t.Logf("teardown: tier %v in %v ms", e["tier"], e["duration_ms"])
	}
}

// With agentsetup's gemini policy, commands gemini would run unasked (a
// plain echo or ls) reach acpflow's policy too, and a rejected one does
// not run.
func TestGeminiAsksForEveryShellCommandAndWrite(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	script := modelserver.Script{
		{Shell: "echo hello"},
		{Shell: "ls"},
		{Shell: "echo rejected > rejected.txt"},
		{Write: &modelserver.Write{Path: "relative.txt", Content: "x\n"}},
		{Say: "FINAL done"},
	}
	policy := `permission:
  rules:
    - if: tool.title contains "rejected"
      then: reject
  default: allow`
	step, _, r, _ := s.turn(needTurnAgent(t, "gemini"), script, "Go.", policy, "")
	var titles []string
	for _, p := range step.Permissions {
		titles = append(titles, fmt.Sprintf("%v %v: %v", p["kind"], p["title"], p["decision"]))
	}
	t.Logf("exit %d in %s; step %s/%s; permissions %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, titles)
	want := []string{
		"execute echo hello: allow",
		"execute ls: allow",
		"execute echo rejected > rejected.txt: reject",
		"edit Writing to relative.txt: allow",
	}
	if !slices.Equal(titles, want) {
		t.Errorf("permission requests %q\nwant %q", titles, want)
	}
	if r.code != 0 || step.Status != "succeeded" || !strings.Contains(step.Output, "FINAL done") {
		t.Errorf("exit %d, step %s/%s, output %q: %s", r.code, step.Status, step.StopReason, step.Output, step.Error)
	}
	for f, want := range map[string]bool{"relative.txt": true, "rejected.txt": false} {
		if _, err := os.Stat(filepath.Join(s.dir, f)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", f, err == nil, want)
		}
	}
}
