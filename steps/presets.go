package steps

import (
	"sort"
	"time"
)

// Preset is a known agent: what `preset: NAME` fills in, and what it needs.
type Preset struct {
	Name    string
	Command string
	// Launcher are the arguments that make Command start the agent (npx's
	// "-y PACKAGE"); a workflow that names its own command drops them.
	Launcher []string
	// Args are the agent's own arguments ("--acp", codex's -c settings),
	// kept with a command of the workflow's own unless it gives args: too.
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
	// SetEnv are variables the preset sets in the agent's explicit env (the
	// workflow's env: wins), for settings that only an env var carries.
	SetEnv map[string]string
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
		Name: "claude", Command: "npx", Launcher: []string{"-y", "@zed-industries/claude-agent-acp"},
		Env: []string{"ANTHROPIC_API_KEY"},
		// It advertises session/close, after which it exits on EOF in
		// 11–14 ms; without the close it never does. SIGTERM to the group
		// ends it in 23–38 ms (realagents, 2 CPUs).
		EOFGrace: time.Second, TermGrace: time.Second,
		Description: "Claude Code through the Zed ACP adapter (claude-agent-acp)",
		Notes:       "refuses to run as root unless IS_SANDBOX=1 is set in its env",
	},
	"codex": {
		Name: "codex", Command: "npx", Launcher: []string{"-y", "@zed-industries/codex-acp"},
		// approval_policy "untrusted": every command codex does not know to
		// be read-only (ls, cat, git status, …) and every patch asks, so it
		// reaches acpflow's policy; codex's default asks only for what it
		// judges dangerous and runs the rest in its own sandbox. With
		// acpflow's policy deciding, codex's sandbox is off: it needs
		// bubblewrap, which containers and CI machines rarely have, and a
		// command it sandboxes fails there after being allowed.
		Args: []string{"-c", `approval_policy="untrusted"`, "-c", `sandbox_mode="danger-full-access"`},
		Env:  []string{"CODEX_API_KEY", "OPENAI_API_KEY"}, Auth: []string{"codex-api-key", "openai-api-key", "chatgpt"},
		// It never exits on EOF, session/close or not; SIGTERM to the group
		// ends it in 1–7 ms. Its session file is complete when the turn
		// ends (task_complete written, same size after a 1 ms or a 2 s EOF
		// wait), so the EOF wait only delays the SIGTERM: 100 ms of it made
		// a one-turn run 1.5× a bare client's (bench, "Real agents").
		EOFGrace: 20 * time.Millisecond, TermGrace: time.Second,
		Description: "OpenAI Codex through codex-acp",
		Notes:       "needs auth: codex-api-key with CODEX_API_KEY passed explicitly",
	},
	"gemini": {
		Name: "gemini", Command: "gemini", Args: []string{"--acp"},
		Env: []string{"GEMINI_API_KEY"}, Auth: []string{"gemini-api-key", "oauth-personal"},
		// Without it gemini re-launches itself as a child (to raise node's
		// heap limit), costing ~0.6 s of start, and the parent ignores
		// SIGTERM.
		SetEnv: map[string]string{"GEMINI_CLI_NO_RELAUNCH": "1"},
		// It exits on EOF by itself: ~40 ms after a turn without a tool
		// call, ~360 ms after one with a tool call (V8 finishing a GC on
		// its worker threads); SIGTERM to the group runs the same cleanup.
		// It does not advertise session/close.
		EOFGrace: 2 * time.Second, TermGrace: time.Second,
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

// Argv is the preset's whole argument list: the launcher's, then the agent's.
func (p Preset) Argv() []string {
	return append(append([]string(nil), p.Launcher...), p.Args...)
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
