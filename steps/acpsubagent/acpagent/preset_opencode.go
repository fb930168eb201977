package acpagent

import "time"

// opencodeAsk is opencode's permission config (its `permission` key) under
// which bash commands and every edit (its write, edit and apply_patch
// tools share the permission "edit") ask the ACP client.
//
// Measured on opencode 1.18.33 (and read in its binary's bundle):
//
//   - Its defaults allow everything ("*": "allow") but reading .env files,
//     paths outside the project (external_directory) and a repeated
//     identical call (doom_loop): bash and write ran unasked.
//   - A call is decided by the last rule of its agent's list that matches
//     (permission name, then pattern): opencode's defaults, the agent's
//     own defaults, the config's top-level `permission` (into which
//     OPENCODE_PERMISSION is merged last, after the global, project,
//     OPENCODE_CONFIG_CONTENT and managed configs), then the config's
//     `agent.NAME.permission`. With OPENCODE_PERMISSION alone, a user's
//     `agent.build.permission` would still win; OPENCODE_CONFIG_CONTENT,
//     merged after the global and project configs, puts ours there too.
//     Measured: with the user's config saying `"permission": "allow"` and
//     `"agent": {"build": {"permission": "allow"}}`, every command and write
//     still asked.
//   - Reads, searches, todo and web tools keep their defaults (unasked).
//   - default_agent "build": sessions start in build whatever agent the
//     user's config makes the default; Mode sets it again after
//     session/new.
const (
	opencodeAsk       = `{"bash":"ask","edit":"ask"}`
	opencodeAskAgents = `{"default_agent":"build","agent":{"build":{"permission":{"bash":"ask","edit":"ask"}},"general":{"permission":{"bash":"ask","edit":"ask"}}}}`
)

// opencode: opencode in ACP mode (npm opencode-ai).
var _ = registerPreset(Preset{
	Name: "opencode", Command: "opencode", Args: []string{"acp"},
	SetEnv: map[string]string{
		"OPENCODE_PERMISSION":     opencodeAsk,
		"OPENCODE_CONFIG_CONTENT": opencodeAskAgents,
	},
	// It offers one auth method, opencode-login ("Run `opencode auth
	// login` in the terminal"); keys come from its config or the
	// providers' own env vars.
	Auth: []string{"opencode-login"},
	// It advertises session/close. It exits on stdin EOF by itself:
	// 200–440 ms after a turn (600–870 ms when session/close came
	// first), on a 2-CPU machine at load 7; SIGTERM to the group ends it
	// in ~115 ms.
	EOFGrace: 2 * time.Second, TermGrace: time.Second,
	Description: "opencode in ACP mode (npm opencode-ai)",
	Notes: "its modes are its primary agents (build, plan, and the user's own); " +
		"a user's OPENCODE_PERMISSION or OPENCODE_CONFIG_CONTENT in the workflow's env replaces the preset's",
	Version: "1.18.33",
	// session/new answers no "modes", only a "mode" config option
	// (category mode) whose values are opencode's primary agents: build
	// (the default) and plan, plus any the user defines; acpflow sets the
	// mode through that option. In both build and plan, with the settings
	// above, commands and edits ask (plan's own "deny edits" rule comes
	// before the config's and so turns into a question too). A user's own
	// agent (mode) keeps its own permissions.
	Mode: "build",
	Unasked: "bash commands, where the user's own config's top-level permission lists a wildcard key (\"*\": \"allow\") " +
		"after \"bash\" (measured: the last matching rule wins, in the order of the user's file); " +
		"not measured: a user-defined agent (mode) whose own permission allows bash or edit, subagents (task tool) other than general",
	// Its database, logs and locks (docs/sandbox.md). ~/.config/opencode
	// (config, plugins, commands, agents, tools) and ~/.cache/opencode
	// (binaries and packages it runs) are read-only.
	StateDirs: []string{"~/.local/share/opencode", "~/.local/state/opencode"},
	Settings:  []string{"~/.config/opencode", "~/.cache/opencode", "~/.cache/opencode/bin"},
	Bin:       "opencode", Install: "npm install -g opencode-ai",
})
