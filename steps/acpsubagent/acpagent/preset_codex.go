package acpagent

import "time"

// codex: OpenAI Codex through @agentclientprotocol/codex-acp (TypeScript
// over `codex app-server`, from @openai/codex). Measured on codex-acp
// 2.6.0 with codex 0.166, offline against a scripted model server
// (docs/agents/codex.md has the tables).
//
// # Why read-only
//
// codex-acp reads no -c flags: its settings are env INITIAL_AGENT_MODE,
// CODEX_CONFIG (JSON) and MODEL_PROVIDER. Each turn it sends codex the
// approval policy and sandbox of the session's mode, so an approval_policy
// or sandbox_mode in CODEX_CONFIG or config.toml changes nothing. Of its
// modes, read-only ("on-request" approvals answered by the user, codex's
// read-only sandbox) is the one in which every call that can change
// anything asks the client:
//
//   - every apply_patch asks (options allow_once, allow_for_session,
//     cancel), and an allowed patch is applied;
//   - every command the model asks to run outside the sandbox
//     (sandbox_permissions "require_escalated", as codex tells the model to
//     for any command that writes or needs the network) asks, and an
//     allowed one runs unsandboxed: measured with rm -rf, echo > file and
//     cat;
//   - a command codex judges dangerous (rm -rf …) asks even unescalated,
//     but an allowed one then runs in the read-only sandbox, where a write
//     fails ("Read-only file system"); the model is told to retry
//     escalated, which asks again.
//
// What still runs unasked: commands the model sends without escalation
// that codex does not judge dangerous (ls, cat, grep, also echo > file),
// inside the read-only sandbox (no writes, no network; codex bundles its
// bubblewrap, which worked here). Their tool_call kind is "read" for what
// codex parses as reads ("List files", "Read file …"), else "execute".
//
// Under permission: allow read-only would fail every allowed rm in its
// sandbox, so AllowMode is workspace-write there, in which the allowed rm
// asked and ran (measured on 2.6.0); patches in the workspace are then
// applied unasked and recorded as such. workspace-write applies patches in the workspace unasked; agent (the
// adapter's default) sends approvals to a reviewer model; agent-full-access
// never asks: all three are AutoModes.
//
// Making codex ask for every command needs approval_policy "untrusted"
// with no sandbox, which codex-acp takes only from a permission profile
// defined in codex's own config files ($CODEX_HOME/config.toml), plus
// prompt rules in $CODEX_HOME/rules for its "known safe" commands. A
// private CODEX_HOME per step would hide the user's ~/.codex (a ChatGPT
// login in auth.json, their config, sessions and rules), so the preset
// does not do it.
//
// # Options and "always"
//
// A command's request offers allow_once, accept_execpolicy_amendment
// ("Yes, and don't ask again for commands that start with …", kind
// allow_always: codex appends a persistent prefix_rule(…,
// decision="allow") to $CODEX_HOME/rules/default.rules) and cancel (kind
// reject_once: it ends the whole turn, stop reason cancelled). A patch's
// offers allow_once, allow_for_session ("… for these files", for the
// session only) and cancel. Both "always" options say "don't ask", so
// allow_always selects allow_once and nothing is written.
//
// # Teardown
//
// On stdin EOF (session/close or not) codex's app-server exits in 170–390
// ms, but the adapter's node process stays until its 2 s SIGTERM timer for
// the app-server runs out: it exits at 2.06–2.29 s (7 runs). SIGTERM to
// the group ends the adapter in 50–130 ms and the app-server in 250–360
// ms. So 500 ms of EOF grace lets the app-server finish on its own, and the
// term grace is about three times the SIGTERM exit.
//
// What the adapter waits for (dist/index.js, CodexAppServerSupervisor):
// on stdin close it ends the app-server's stdin and arms a 2 s timer to
// SIGTERM it, which it never clears when the app-server exits; after the
// app-server's exit it does nothing but wait for that timer (strace: EOF
// read, the codex binary's exit_group 57 ms later, its threads gone and
// its node launcher reaped by 190 ms, then no syscall until SIGTERM). So
// EOFLeaderDone: the wait ends once the adapter is the last process of its
// group and idle, SIGTERM then; turn end to group gone went from 520–618 ms
// (median 537) to 247–685 ms (median 346), 12 turns each, interleaved, at
// load 17 on 2 CPUs. Under sandbox: true the adapter sits below the
// launcher and the two stay busy after the app-server's exit, so the wait
// runs to the grace there (537–684 ms).
var _ = registerPreset(Preset{
	Name: "codex", Command: "npx", Launcher: []string{"-y", "@agentclientprotocol/codex-acp"},
	Env: []string{"CODEX_API_KEY", "OPENAI_API_KEY"},
	// api-key reads CODEX_API_KEY, then OPENAI_API_KEY (or _meta
	// "api-key".apiKey) and logs codex in with it, which writes
	// $CODEX_HOME/auth.json; chat-gpt keeps a working ChatGPT login or
	// opens a browser (not offered when NO_BROWSER is set).
	// chat-gpt-device-code and gateway are offered only to clients that
	// declare URL elicitation or gateway auth, which acpflow does not.
	Auth: []string{"api-key", "chat-gpt"},
	// codex-acp 0.16.0 (the Rust adapter, @zed-industries/codex-acp)
	// named them codex-api-key, openai-api-key and chatgpt.
	AuthAliases: map[string]string{"codex-api-key": "api-key", "openai-api-key": "api-key", "chatgpt": "chat-gpt"},
	Version:     "2.6.0",
	EOFGrace:    500 * time.Millisecond, TermGrace: time.Second, EOFLeaderDone: true,
	Description: "OpenAI Codex through codex-acp",
	Notes:       "needs auth: api-key with CODEX_API_KEY passed explicitly; on authenticate codex writes the key to $HOME/.codex/auth.json",
	// INITIAL_AGENT_MODE starts the session in it (the adapter's default is
	// agent); Mode sets it again, and is where the mode guard goes back to.
	SetEnv:    map[string]string{"INITIAL_AGENT_MODE": "read-only"},
	Mode:      "read-only",
	AllowMode: "workspace-write",
	// The adapter outlives its app-server by its own 2 s timer: SIGTERM.
	Expect:    Expect{Teardown: "term"},
	AutoModes: []string{"agent", "agent-full-access", "workspace-write"},
	Unasked:   "commands the model sends without asking to leave codex's read-only sandbox and that codex does not judge dangerous (ls, cat, grep, echo > file) run unasked inside that sandbox, where they cannot write or reach the network",
	// codex keeps its SQLite databases (with their -journal and -wal
	// files), auth.json and a .tmp file it renames at the top of ~/.codex,
	// so the directory stays writable whole and its settings rely on
	// Settings (docs/sandbox.md has the measurement).
	StateDirs: []string{"~/.codex"},
	Settings:  []string{"~/.codex/config.toml", "~/.codex/hooks.json", "~/.codex/rules", "~/.codex/plugins"},
	Bin:       "codex-acp", Install: "npm install -g @agentclientprotocol/codex-acp",
	KeyAuth: "api-key",
	Causes: []Cause{
		{Match: "CODEX_API_KEY or OPENAI_API_KEY is not set", Says: "it has no key", Needs: NeedKey},
		{Match: "Authentication required", Says: "it has no credentials", Needs: NeedKey},
	},
})
