package agentsetup

import (
	"path/filepath"
	"strings"
)

func init() {
	setups["codex"] = func(a *Agent, home, modelURL string) error {
		a.Command, a.Auth = "codex-acp", "api-key"
		a.Env = append(a.Env, "CODEX_API_KEY=sk-acpflow-dummy")
		return writeCodexConfig(home, modelURL)
	}
}

// codexConfig is $HOME/.codex/config.toml: codex pointed at the model
// server, with no update check, analytics or telemetry.
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
// prompt rule for exactly those programs (codexPromptRule) closes that gap.
// With this approval/sandbox pair codex-acp offers no modes (session/new
// has no "modes" and no "mode" config option). The pair comes from the
// codex preset's args (-c approval_policy=…), not from this file.
const codexConfig = `# Written by acpflow's realagents/agentsetup.
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

// codexPromptRule is $HOME/.codex/rules/acpflow.rules: codex asks for the
// commands it would otherwise run unasked under approval_policy
// "untrusted", its known-safe programs.
const codexPromptRule = `prefix_rule(
    pattern = [["base64", "cat", "cd", "cut", "echo", "expr", "false", "find", "git", "grep", "head", "id", "ls", "nl", "numfmt", "paste", "pwd", "rev", "rg", "sed", "seq", "stat", "tac", "tail", "tr", "true", "uname", "uniq", "wc", "which", "whoami"]],
    decision = "prompt",
    justification = "acpflow's permission policy decides every command",
)
`

func writeCodexConfig(home, modelURL string) error {
	dir := filepath.Join(home, ".codex")
	return writeFiles(map[string]string{
		filepath.Join(dir, "config.toml"):            strings.Replace(codexConfig, "BASE_URL", modelURL, 1),
		filepath.Join(dir, "rules", "acpflow.rules"): codexPromptRule,
	})
}
