package agentsetup

import (
	"encoding/json"
	"path/filepath"
)

func init() {
	setups["gemini"] = func(a *Agent, home, modelURL string) error {
		a.Command, a.Auth = "gemini", "gemini-api-key"
		a.Env = append(a.Env, "GEMINI_API_KEY=acpflow-dummy", "GOOGLE_GEMINI_BASE_URL="+modelURL)
		return writeGeminiConfig(home)
	}
}

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

func writeGeminiConfig(home string) error {
	settings, err := json.MarshalIndent(geminiSettings, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Join(home, ".gemini")
	return writeFiles(map[string]string{
		filepath.Join(dir, "settings.json"):            string(settings),
		filepath.Join(dir, "policies", "acpflow.toml"): geminiPolicy,
	})
}
