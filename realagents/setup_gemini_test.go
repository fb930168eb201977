//go:build realagents

package realagents_test

import (
	"encoding/json"
	"os"
	"path/filepath"
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
