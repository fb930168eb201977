//go:build realagents

package realagents_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/realagents/modelserver"
	"github.com/acpflow/acpflow/steps"
)

func init() {
	// The preset's own args (its approval settings), as `preset: codex`
	// with a local command keeps them: what is tested is what users get.
	preset, _ := steps.LookupPreset("codex")
	a := codex
	a.args = preset.Args
	turnAgents["codex"] = &turnAgent{
		agent: a,
		// Selecting its reject option ("No, and tell Codex what to do
		// differently") ends the turn with stopReason cancelled.
		endsTurnOnReject: true,
		yaml:             "auth: codex-api-key",
		setup: func(s *sandbox, srv *modelserver.Server) []string {
			writeCodexConfig(s.t, s.home, srv.URL())
			return []string{"CODEX_API_KEY=sk-acpflow-dummy"}
		},
	}
}

// codexConfig points codex at the model server and makes every command and
// every write reach acpflow's policy.
//
// codex ignores OPENAI_BASE_URL but honours a custom model provider. The
// model is one codex knows (gpt-5.4): for an unknown name it streams a
// "Model metadata … not found" warning as an agent message and declares no
// apply_patch tool (patches then go through exec_command).
//
// Which tool calls ask (codex-acp 0.16.0, measured): in its ACP modes
// (read-only, the default; auto; full-access) codex runs commands it does
// not judge dangerous in its own sandbox without asking (and here, without
// bubblewrap, that sandbox fails them with exit 101), asks for dangerous
// ones (rm) and for every apply_patch except in full-access, where nothing
// asks. approval_policy "untrusted" with no sandbox asks for every command
// except its built-in "known safe" list (ls, cat, echo, git status, …); a
// prompt rule for exactly those programs closes that gap. With this
// approval/sandbox pair codex-acp offers no modes (session/new has no
// "modes" and no "mode" config option). The pair comes from the codex
// preset's args (-c approval_policy=…); the config file adds the rule.
const codexConfig = `# Written by acpflow's realagents tests.
model = "gpt-5.4"
model_provider = "scripted"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[model_providers.scripted]
name = "scripted"
base_url = "BASE_URL/v1"
wire_api = "responses"
requires_openai_auth = true
supports_websockets = false
request_max_retries = 0
stream_max_retries = 0
`

// codexPromptRule makes codex ask for the commands it would otherwise run
// unasked under approval_policy "untrusted": its known-safe programs.
const codexPromptRule = `prefix_rule(
    pattern = [["base64", "cat", "cd", "cut", "echo", "expr", "false", "find", "git", "grep", "head", "id", "ls", "nl", "numfmt", "paste", "pwd", "rev", "rg", "sed", "seq", "stat", "tac", "tail", "tr", "true", "uname", "uniq", "wc", "which", "whoami"]],
    decision = "prompt",
    justification = "acpflow's permission policy decides every command",
)
`

func writeCodexConfig(t *testing.T, home, url string) {
	t.Helper()
	dir := filepath.Join(home, ".codex")
	if err := os.MkdirAll(filepath.Join(dir, "rules"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(codexConfig, "BASE_URL", url, 1)
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules", "acpflow.rules"), []byte(codexPromptRule), 0o644); err != nil {
		t.Fatal(err)
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
