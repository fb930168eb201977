//go:build realagents

package realagents_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/realagents/agentsetup"
	"github.com/acpflow/acpflow/realagents/modelserver"
	"github.com/acpflow/acpflow/steps"
)

// codex-acp: its config file (the model server as a custom provider) and
// prompt rule are agentsetup's; the approval settings are the preset's args.
func init() {
	preset, _ := steps.LookupPreset("codex")
	turnAgents["codex"] = &turnAgent{
		name: "codex",
		// The preset's own args (its approval settings), as `preset: codex`
		// with a local command keeps them: what is tested is what users get.
		adjust: func(a *agentsetup.Agent) { a.Args = preset.Args },
		// Selecting its reject option ("No, and tell Codex what to do
		// differently") ends the turn with stopReason cancelled.
		endsTurnOnReject: true,
	}
}

func TestCodexCompletesAWholeTurn(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ta := needTurnAgent(t, "codex")
	script := modelserver.Script{
		{Say: "Step 1: Bash.", Shell: "echo made-by-shell > shell.txt"},
		{Say: "Step 2: Write.", Write: &modelserver.Write{Path: "written.txt", Content: "made by apply_patch\n"}},
		{Say: "FINAL done"},
	}
	res, _, r, reqs := s.turn(ta, script, "Create two files.", "permission: allow", "")
	t.Logf("exit %d in %s; step %s/%s in %d ms; output %q", r.code, r.elapsed.Round(1e6), res.Status, res.StopReason, res.DurationMS, res.Output)
	if r.code != 0 || res.Status != "succeeded" || res.StopReason != "completed" {
		t.Errorf("exit %d, step %s/%s; want 0, succeeded/completed\nerror: %s\nstderr:\n%s", r.code, res.Status, res.StopReason, res.Error, r.stderr)
	}
	if !strings.Contains(res.Output, "FINAL done") {
		t.Errorf("output %q does not end the script", res.Output)
	}
	for name, want := range map[string]string{"shell.txt": "made-by-shell\n", "written.txt": "made by apply_patch\n"} {
		if b, err := os.ReadFile(filepath.Join(s.dir, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}

	served := map[int]bool{}
	for _, q := range reqs {
		t.Logf("model request: %s %s → reply %d", q.API, q.Path, q.Reply)
		served[q.Reply] = true
	}
	for i := range script {
		if !served[i] {
			t.Errorf("the model server never served reply %d", i)
		}
	}

	// Both tool calls reached acpflow's policy, and allow chose "once".
	kinds := map[string]bool{}
	for _, p := range res.Permissions {
		t.Logf("permission: %v %q → %v %v %v", p["kind"], p["title"], p["decision"], p["outcome"], p["option_id"])
		kinds[p["kind"].(string)] = true
		if p["decision"] != "allow" || p["outcome"] != "selected" || p["option_id"] != "approved" {
			t.Errorf("permission %v: want allow, selected, approved (allow once)", p)
		}
	}
	if len(res.Permissions) != 2 || !kinds["execute"] || !kinds["edit"] {
		t.Errorf("permissions asked: %v; want one execute and one edit", res.Permissions)
	}
	// An allow_always answer would have added codex's own rule.
	if _, err := os.Stat(filepath.Join(s.home, ".codex", "rules", "default.rules")); err == nil {
		t.Error("codex saved an always rule in $HOME/.codex/rules/default.rules")
	}
}
