// Package agentsetup sets the real ACP agents of realagents/ up to complete
// whole turns offline against a scripted model server
// (realagents/modelserver): for one agent, a fresh HOME and the server's
// URL, it writes the agent's config files and says how to spawn it. The
// realagents tests and the bench both use it, so that what is measured is
// what is tested.
//
// # Notes
//
// Args are only what the agent needs to speak ACP at all (gemini's --acp).
// A preset's own args and env (codex's approval settings, gemini's
// GEMINI_CLI_NO_RELAUNCH) are the caller's to add: a workflow with `preset:`
// gets them from acpflow, a bare client from steps.LookupPreset.
package agentsetup

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Names are the agents Setup knows, in a stable order.
var Names = []string{"claude", "codex", "gemini"}

// Agent is how to spawn one agent that Setup prepared.
type Agent struct {
	Name    string   // "claude", "codex" or "gemini"
	Command string   // absolute, under node_modules/.bin
	Args    []string // what the agent needs to speak ACP (see the package notes)
	// Env is the agent's explicit environment, KEY=VALUE: HOME, the model
	// server, a dummy key and the settings that keep it quiet.
	Env []string
	// Auth is the authenticate method to call before session/new, "" for
	// none.
	Auth string
}

// YAML is what goes under the agent in a workflow besides command, args
// and env (auth:), "" for nothing.
func (a Agent) YAML() string {
	if a.Auth == "" {
		return ""
	}
	return "auth: " + a.Auth
}

// Setup writes agent name's config files under home (a fresh, existing
// directory that becomes its HOME), pointing it at the model server at
// modelURL, and returns how to spawn it from nodeModules (where
// realagents/install.sh installed it).
func Setup(name, nodeModules, home, modelURL string) (Agent, error) {
	a := Agent{Name: name, Env: []string{"HOME=" + home}}
	var err error
	switch name {
	case "claude":
		a.Command = "claude-agent-acp"
		a.Env = append(a.Env, claudeEnv(modelURL)...)
	case "codex":
		a.Command, a.Auth = "codex-acp", "codex-api-key"
		a.Env = append(a.Env, "CODEX_API_KEY=sk-acpflow-dummy")
		err = writeCodexConfig(home, modelURL)
	case "gemini":
		a.Command, a.Args, a.Auth = "gemini", []string{"--acp"}, "gemini-api-key"
		a.Env = append(a.Env, "GEMINI_API_KEY=acpflow-dummy", "GOOGLE_GEMINI_BASE_URL="+modelURL)
		err = writeGeminiConfig(home)
	default:
		return Agent{}, fmt.Errorf("agentsetup: unknown agent %q (known: %s)", name, strings.Join(Names, ", "))
	}
	if err != nil {
		return Agent{}, fmt.Errorf("agentsetup: %s: %w", name, err)
	}
	a.Command = filepath.Join(nodeModules, ".bin", a.Command)
	if _, err := os.Stat(a.Command); err != nil {
		return Agent{}, fmt.Errorf("agentsetup: %s: %w (run `bash realagents/install.sh` first)", name, err)
	}
	return a, nil
}

// claudeEnv points claude-agent-acp at the model server.
//
// It runs Claude Code, which honours ANTHROPIC_BASE_URL and takes any
// ANTHROPIC_API_KEY. As root it refuses to start a session unless
// IS_SANDBOX=1. The rest keeps it offline and quiet: measured with strace,
// without CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC a one-turn session looks
// up the real API host six times (telemetry and event logs bypass the base
// URL); with it, only one lookup is left (a plugin statistics file), which
// fails offline without harm. The other names are what Claude Code reads
// besides, for the same traffic.
func claudeEnv(modelURL string) []string {
	return []string{
		"IS_SANDBOX=1",
		"ANTHROPIC_BASE_URL=" + modelURL,
		"ANTHROPIC_API_KEY=sk-ant-acpflow-dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
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

// writeFiles writes each file, creating its directory.
func writeFiles(files map[string]string) error {
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
