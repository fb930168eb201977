package steps

import "time"

// codex: OpenAI Codex through @agentclientprotocol/codex-acp (TypeScript
// over `codex app-server`). It reads no -c flags; its settings come from
// its environment.
var _ = registerPreset(Preset{
	Name: "codex", Command: "npx", Launcher: []string{"-y", "@agentclientprotocol/codex-acp"},
	Env:  []string{"CODEX_API_KEY", "OPENAI_API_KEY"}, Auth: []string{"api-key", "chat-gpt"},
	AuthAliases: map[string]string{"codex-api-key": "api-key", "openai-api-key": "api-key", "chatgpt": "chat-gpt"},
	EOFGrace:    20 * time.Millisecond, TermGrace: time.Second,
	Description: "OpenAI Codex through codex-acp",
	Notes:       "needs auth: api-key with CODEX_API_KEY passed explicitly",
	AutoModes:   []string{"agent", "agent-full-access"},
})
