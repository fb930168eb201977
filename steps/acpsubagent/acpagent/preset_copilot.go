package acpagent

import "time"

// copilotMode is the mode Copilot starts in and in which it asks: its
// modes are URLs, told apart by their fragment.
const copilotMode = "https://agentclientprotocol.com/protocol/session-modes#agent"

// copilot: GitHub Copilot CLI in ACP mode (`copilot --acp --stdio`, npm
// @github/copilot, whose platform package carries the binary). Measured on
// 1.0.102 offline, with its BYOK variables pointing it at a scripted model
// server (COPILOT_PROVIDER_BASE_URL=…/v1, Chat Completions by default,
// COPILOT_PROVIDER_API_KEY, COPILOT_MODEL, COPILOT_OFFLINE=true) and a
// fresh HOME; docs/agents/copilot.md has the tables.
//
// # How it is made to ask
//
// It starts in mode …#agent, in which every shell command and file write
// asks the client. Its other modes are …#plan and …#autopilot
// ("Autonomous mode that enables allow-all and runs until task completion
// without user interaction"), and it offers config options mode (category
// mode) and allow_all (category permissions; on: "Automatically approve
// all tool, path, and URL requests"). None of these words were
// acpflow's before issue 40: the mode guard now pins the mode and
// allow_all and sets back any change, and autopilot is an AutoMode.
// COPILOT_ALLOW_ALL=true in its environment approves everything while
// session/new still reports allow_all "off", so the preset drops it
// (DecideAloneEnv). --no-auto-update keeps the release npx started (the
// one the preset was measured on) instead of one it fetches itself.
//
// # Teardown
//
// It exits on stdin EOF after a turn in 0.15–1.14 s (median 0.36 s).
var _ = registerPreset(Preset{
	Name: "copilot", Command: "npx", Launcher: []string{"-y", "@github/copilot"},
	Args: []string{"--acp", "--stdio", "--no-auto-update"},
	// A GitHub token (COPILOT_GITHUB_TOKEN, GH_TOKEN, GITHUB_TOKEN) or,
	// with COPILOT_PROVIDER_BASE_URL (BYOK), the provider's key.
	Env:         []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_PROVIDER_API_KEY"},
	Auth:        []string{"copilot-login"},
	Version:     "1.0.102",
	EOFGrace:    2 * time.Second,
	TermGrace:   time.Second,
	Description: "GitHub Copilot CLI in ACP mode (npm @github/copilot)",
	Notes:       "a GitHub token in COPILOT_GITHUB_TOKEN (or GH_TOKEN), or a model provider of your own with COPILOT_PROVIDER_BASE_URL and COPILOT_PROVIDER_API_KEY (BYOK)",
	Mode:        copilotMode,
	Expect:      Expect{WideningOptions: []string{"allow_all=on"}},
	AutoModes:   []string{"https://agentclientprotocol.com/protocol/session-modes#autopilot"},
	// COPILOT_ALLOW_ALL is caught by its name too; listed because it is
	// measured.
	DecideAloneEnv: []string{"COPILOT_ALLOW_ALL"},
	Unasked:        "in plan mode it writes its own plan.md under $HOME unasked; reads (view, grep, glob) run unasked",
	// What it writes in a turn, measured in a fresh HOME: its session
	// state and logs under ~/.copilot, the managed config.json (rewritten
	// through config.json.tmp.UUID and a rename) and settings.json.lock
	// beside them, so ~/.copilot is writable whole and Settings keeps its
	// settings read-only; the bundle it unpacks (235 MB) under
	// ~/.cache/copilot on its first start, and a device id under
	// ~/.cache/Microsoft.
	StateDirs: []string{"~/.copilot", "~/.cache/copilot", "~/.cache/Microsoft"},
	Settings:  []string{"~/.copilot/settings.json", "~/.copilot/mcp-config.json", "~/.copilot/installed-plugins", "~/.copilot/agents", "~/.copilot/skills", "~/.copilot/hooks"},
	Bin:       "copilot", Install: "npm install -g @github/copilot",
	Login: "copilot login",
})
