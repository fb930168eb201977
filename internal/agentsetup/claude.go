package agentsetup

// claude-agent-acp 0.101.0 (Claude Code 2.1.318) needs no file under HOME
// to reach the model server: only env. What makes it ask before every
// command and write is the claude preset's (session/new _meta and mode
// default, steps/acpsubagent/acpagent/preset_claude.go), never written
// here: a test HOME with those settings would prove nothing about a
// user's.
func init() {
	setups["claude"] = func(a *Agent, _ string, modelURL string) error {
		a.Command = "claude-agent-acp"
		a.Env = append(a.Env, claudeEnv(modelURL)...)
		return nil
	}
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
