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

// codexConfig is $HOME/.codex/config.toml for codex-acp 2.6.0 (codex
// 0.166): codex pointed at the model server, with no update check,
// analytics or telemetry, and no retries of a failed model call (a
// scripted error ends the turn at once).
//
// codex ignores OPENAI_BASE_URL but honours a custom model provider. The
// same provider can be given instead as env CODEX_CONFIG (JSON:
// {"model_provider": "scripted", "model_providers": {"scripted": {…}}}),
// which codex-acp passes to the app-server as -c overrides: measured, with
// no config.toml at all.
//
// The model is gpt-5.5, for which codex 0.166 declares exec_command
// {cmd, sandbox_permissions, justification, …} and a freeform apply_patch,
// the tools the model server scripts. Its default model ("gpt-6.1-sol")
// gets the "code-mode" exec tool (JavaScript that calls tools) instead.
//
// Nothing here makes codex ask: that is the codex preset's
// (INITIAL_AGENT_MODE=read-only and its mode), so that the tests see what a
// user's run gets.
const codexConfig = `# Written by acpflow's internal/agentsetup.
model = "gpt-5.5"
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

func writeCodexConfig(home, modelURL string) error {
	return writeFiles(map[string]string{
		filepath.Join(home, ".codex", "config.toml"): strings.Replace(codexConfig, "BASE_URL", modelURL, 1),
	})
}
