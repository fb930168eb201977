//go:build realagents

package realagents_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/realagents/modelserver"
)

// geminiSettings is $HOME/.gemini/settings.json for gemini-cli 0.61: no
// telemetry, usage statistics, update check, IDE integration or
// checkpointing, so that it reaches nothing but the model server.
var geminiSettings = map[string]any{
	"general": map[string]any{
		"enableAutoUpdate":             false,
		"enableAutoUpdateNotification": false,
		"checkpointing":                map[string]any{"enabled": false},
	},
	"privacy":   map[string]any{"usageStatisticsEnabled": false},
	"telemetry": map[string]any{"enabled": false},
	"ide":       map[string]any{"enabled": false},
	"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
}

// geminiPolicy is $HOME/.gemini/policies/acpflow.toml: every shell command,
// file write and edit asks the ACP client, so that each one reaches
// acpflow's permission policy.
//
// # Notes
//
// Without it, gemini-cli 0.61 runs shell commands it judges safe (echo, ls,
// cat, grep, pwd, … each part of a compound line) without asking, and an
// "allow for this session" answer lets later calls of the same root command
// run unasked. tools.confirmationRequired in settings.json does not help:
// its rule still goes through the same safe-command heuristics. A rule
// with an argsPattern skips them; in the user tier (4.999) it outranks
// yolo's allow-all (1.998) and the session's always-allow rules (tier 3).
// It leaves out plan mode, whose denials (no shell, writes only to its
// plans directory) it would otherwise turn into questions.
const geminiPolicy = `[[rule]]
toolName = ["run_shell_command", "write_file", "replace"]
argsPattern = ".*"
decision = "ask_user"
priority = 999
modes = ["default", "autoEdit", "yolo"]
`

func init() {
	turnAgents["gemini"] = &turnAgent{
		agent: gemini,
		yaml:  "auth: gemini-api-key",
		setup: func(s *sandbox, srv *modelserver.Server) []string {
			dir := filepath.Join(s.home, ".gemini")
			b, _ := json.MarshalIndent(geminiSettings, "", "  ")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				s.t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "settings.json"), b, 0o644); err != nil {
				s.t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, "policies"), 0o755); err != nil {
				s.t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "policies", "acpflow.toml"), []byte(geminiPolicy), 0o644); err != nil {
				s.t.Fatal(err)
			}
			return []string{"GEMINI_API_KEY=acpflow-dummy", "GOOGLE_GEMINI_BASE_URL=" + srv.URL()}
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

// With geminiPolicy, commands gemini would run unasked (a plain echo or ls)
// reach acpflow's policy too, and a rejected one does not run.
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
