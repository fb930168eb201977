package steps

import "time"

// claude: Claude Code through @agentclientprotocol/claude-agent-acp (the
// @zed-industries names get no releases). It offers no authMethods to a
// client without terminal auth: it reads ANTHROPIC_API_KEY or a prior
// `claude /login`.
var _ = registerPreset(Preset{
	Name: "claude", Command: "npx", Launcher: []string{"-y", "@agentclientprotocol/claude-agent-acp"},
	Env: []string{"ANTHROPIC_API_KEY"},
	// It advertises session/close, after which it exits on EOF.
	EOFGrace: time.Second, TermGrace: time.Second,
	Description: "Claude Code through claude-agent-acp",
	Notes:       "refuses to run as root unless IS_SANDBOX=1 is set in its env",
	Mode:        "default",
	AutoModes:   []string{"auto", "acceptEdits", "bypassPermissions", "dontAsk"},
})
