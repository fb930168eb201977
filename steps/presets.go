package steps

import (
	"sort"
	"time"
)

// Preset is a known agent: what `preset: NAME` fills in, and what it needs.
type Preset struct {
	Name        string
	Command     string
	Args        []string
	Env         []string // variables the agent reads its credentials from
	Auth        []string // authenticate method ids it offers
	Notes       string
	Description string

	// The defaults below apply when the workflow file does not set the key;
	// zero keeps acpflow's own default.

	// EOFGrace and TermGrace are the preset's dispose ladder
	// (dispose.eof-grace, dispose.term-grace), measured on the agent: an
	// agent that never exits on stdin EOF should not cost the global
	// DefaultEOFGrace on every step.
	EOFGrace  time.Duration
	TermGrace time.Duration
	// Mode is the ACP session mode (`mode:`) under which every tool call
	// that executes or writes reaches acpflow's permission policy, where the
	// agent has one; "" sets no mode.
	Mode string
}

var presets = map[string]Preset{
	"claude": {
		// The adapter was renamed from @zed-industries/claude-code-acp (last
		// release 0.16.x) to claude-agent-acp. It offers its only auth method,
		// claude-login, to clients that declare terminal auth, which acpflow
		// does not: it reads ANTHROPIC_API_KEY or a prior `claude /login`.
		Name: "claude", Command: "npx", Args: []string{"-y", "@zed-industries/claude-agent-acp"},
		Env:         []string{"ANTHROPIC_API_KEY"},
		Description: "Claude Code through the Zed ACP adapter (claude-agent-acp)",
		Notes:       "refuses to run as root unless IS_SANDBOX=1 is set in its env",
	},
	"codex": {
		Name: "codex", Command: "npx", Args: []string{"-y", "@zed-industries/codex-acp"},
		Env: []string{"CODEX_API_KEY", "OPENAI_API_KEY"}, Auth: []string{"codex-api-key", "openai-api-key", "chatgpt"},
		Description: "OpenAI Codex through codex-acp",
		Notes:       "needs auth: codex-api-key with CODEX_API_KEY passed explicitly",
	},
	"gemini": {
		Name: "gemini", Command: "gemini", Args: []string{"--acp"},
		Env: []string{"GEMINI_API_KEY"}, Auth: []string{"gemini-api-key", "oauth-personal"},
		Description: "Gemini CLI in ACP mode (npm @google/gemini-cli)",
		Notes:       "needs auth: gemini-api-key with GEMINI_API_KEY passed explicitly",
	},
	"goose": {
		Name: "goose", Command: "goose", Args: []string{"acp"},
		Description: "Block's goose in ACP mode",
		Notes:       "uses the provider configured for goose; pass its key explicitly",
	},
	"opencode": {
		Name: "opencode", Command: "opencode", Args: []string{"acp"},
		Description: "opencode in ACP mode",
	},
	"qwen": {
		Name: "qwen", Command: "qwen", Args: []string{"--acp"},
		Env:         []string{"OPENAI_API_KEY", "DASHSCOPE_API_KEY"},
		Description: "Qwen Code in ACP mode",
	},
}

// LookupPreset returns the preset called name.
func LookupPreset(name string) (Preset, bool) {
	p, ok := presets[name]
	return p, ok
}

// Presets lists the presets by name.
func Presets() []Preset {
	out := make([]Preset, 0, len(presets))
	for _, p := range presets {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
