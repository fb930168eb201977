package acpagent

import "time"

// claudeAskTools are the Claude Code tools that run a command or change a
// file; the claude preset gives each a tool-wide ask rule.
//
// Bash, Write, Edit and NotebookEdit are the shell and file tools;
// Monitor runs a shell command in the background (its request has kind
// "other" and rawInput.command); EnterWorktree and ExitWorktree create and
// remove a git worktree under .claude/worktrees. PowerShell (Windows) and
// MultiEdit (older releases) are not offered on Linux by Claude Code
// 2.1.318, and a rule for a tool that does not exist is harmless
// (measured with MultiEdit). What is left out does not run or write by
// itself: Read, Glob, Grep, ToolSearch, WebFetch, WebSearch, Skill, Cron*,
// and the delegating tools (Agent, Workflow), whose subagents run in the
// same Claude Code process under the same rules (not measured).
var claudeAskTools = []any{"Bash", "Monitor", "PowerShell", "Write", "Edit", "MultiEdit", "NotebookEdit", "EnterWorktree", "ExitWorktree"}

// claude: Claude Code through @agentclientprotocol/claude-agent-acp (the
// @zed-industries names get no releases). Measured on 0.101.0, which
// bundles Claude Code 2.1.318, offline against a scripted model server
// (docs/agents/claude.md has the tables).
//
// # How it is made to ask
//
// Left alone, the adapter starts every session in mode auto ("Claude
// handles permission decisions": a classifier model decides each call),
// or in the user's permissions.defaultMode; in mode default it still runs
// read-only commands (ls, cat, git status) unasked, and the Write/Edit
// option "Yes, allow all edits during this session" silently switches
// Claude Code to acceptEdits (no current_mode_update), after which rm -rf,
// writes and touch all ran unasked. In plan mode Claude Code hands Bash to
// the same auto-mode classifier: ls ran unasked, rm -rf was blocked by it.
//
// The preset sends, in session/new's _meta, claudeCode.options.settings:
// the adapter passes it to the Claude Agent SDK as its `settings` option,
// which Claude Code loads as its flag-settings layer (the `--settings`
// flag; above the user's, project's and local settings, below managed
// policy). Nothing is written under $HOME. In it, a tool-wide ask rule for
// each tool in claudeAskTools. In Claude Code a tool-wide ask rule is
// checked before the tool's own checks (its read-only command list), the
// allow rules of any settings layer, PreToolUse hooks and the mode, so
// (measured, each case with ls, rm -rf build and a Write):
//
//   - every Bash command asks, read-only ones included, and every Write
//     and Edit, in modes default, plan, acceptEdits, auto and
//     bypassPermissions alike;
//   - it holds against the user's ~/.claude/settings.json with
//     defaultMode bypassPermissions and allow rules Bash, Bash(ls:*),
//     Bash(rm:*), Write, Edit, and against a user PreToolUse hook that
//     answers permissionDecision "allow" (the hook ran; the call still
//     asked);
//   - a request that an ask rule forced offers no "always" option: Bash,
//     Write and Edit requests offer only allow-once and reject.
//
// sandbox.autoAllowBashIfSandboxed false keeps a user's sandbox setting
// (autoAllowBashIfSandboxed defaults to true once sandbox.enabled) from
// turning Bash's ask rule into an allow for sandboxed commands; Claude Code
// skips a tool-wide Bash ask rule only in that case. Not measured here (no
// bubblewrap on the test machine): taken from Claude Code's own settings
// text.
//
// The other _meta options cannot set the starting mode: the adapter
// overrides options.permissionMode with its own choice (settings'
// defaultMode from the files only, else auto), so Mode sets default with
// session/set_mode right after session/new (no prompt has run by then).
// A session in auto, acceptEdits or bypassPermissions still asks for the
// tools above, but the classifier decides everything else there (and
// bypass allows it), so the mode guard sets those back. CLAUDE_CONFIG_DIR
// would also work but hides the user's login and settings.
//
// # Options and "always"
//
// ExitPlanMode (a tool call of kind switch_mode, title "Approve Plan")
// offers exit-plan-default ("Yes, manually approve edits", allow_once),
// exit-plan-auto ("Yes, and use auto mode", allow_always),
// exit-plan-bypass ("Yes, and bypass permissions", allow_always, only
// where bypass is available) and reject ("No, keep planning",
// reject_once); each exit sends current_mode_update with the new mode.
// Tools without a rule of the adapter's own (Monitor, EnterWorktree, …)
// offer allow-with-updates ("Yes, and don't ask again for Monitor
// commands", allow_always), which writes permissions.allow ["Monitor"]
// into the workspace's .claude/settings.local.json; the ask rule still
// wins over it (the next Monitor asked again).
//
// # Teardown
//
// It exits on stdin EOF, after session/close in 41–256 ms (12 runs) and
// without it in 102–306 ms; after a whole turn, acpflow's teardown (tier
// eof, Claude Code's child included) took 138–400 ms, and the wall from
// the model's last answer to acpflow's exit 0.23–0.56 s. When no turn
// completed (a failed prompt, a probe), Claude Code outlives the adapter
// by 2.2–3.7 s, so the ladder reaches SIGTERM after the 1 s EOF grace;
// SIGTERM to the group ends it in 72–417 ms, exit 0. A longer EOF grace
// would only make those failing steps slower.
var _ = registerPreset(Preset{
	Name: "claude", Command: "npx", Launcher: []string{"-y", "@agentclientprotocol/claude-agent-acp"},
	// It offers no authMethods to a client without terminal auth (acpflow):
	// it reads ANTHROPIC_API_KEY or a prior `claude /login`.
	Env:      []string{"ANTHROPIC_API_KEY"},
	Version:  "0.101.0",
	EOFGrace: time.Second, TermGrace: time.Second,
	Description: "Claude Code through claude-agent-acp",
	Notes:       "refuses to run as root unless IS_SANDBOX=1 is set in its env; wants node 22 (ran on 20)",
	Meta: map[string]any{"claudeCode": map[string]any{"options": map[string]any{
		"settings": map[string]any{
			"permissions": map[string]any{"ask": claudeAskTools},
			"sandbox":     map[string]any{"autoAllowBashIfSandboxed": false},
		},
		// The adapter turns Claude Code's prompt suggestions on: after a
		// turn, one more model request with the whole conversation and
		// tools ("[SUGGESTION MODE: …]") predicts the user's next prompt,
		// which acpflow never shows, and its tokens are in no prompt's
		// usage. Measured: with false, no such request.
		"promptSuggestions": false,
	}}},
	Mode: "default",
	// It starts every session in auto; acpflow sets default right after.
	Expect: Expect{StartMode: "auto"},
	// dontAsk (Claude Code's "deny what no rule allows") is not offered by
	// 0.101.0; listed should a later release offer it.
	AutoModes: []string{"auto", "acceptEdits", "bypassPermissions", "dontAsk"},
	Unasked:   "reads (Read, Glob, Grep in the workspace) and ToolSearch; every command (read-only ones included) and file change asks; not measured: the calls of subagents (Agent, Workflow tools), which Claude Code checks against the same rules",
	// What Claude Code writes in a turn (docs/sandbox.md has the
	// measurement); ~/.claude itself stays read-only. ~/.claude.json is
	// rewritten by a temp file and a rename in HOME, which the sandbox
	// refuses whatever is listed, and it holds mcpServers: it is a setting.
	StateDirs: []string{
		"~/.claude/projects", "~/.claude/sessions", "~/.claude/todos", "~/.claude/file-history",
		"~/.claude/plans", "~/.claude/debug", "~/.claude/statsig", "~/.claude/paste-cache",
		"~/.claude/image-cache", "~/.claude/.credentials.json",
	},
	Settings: []string{
		"~/.claude/settings.json", "~/.claude/settings.local.json", "~/.claude.json",
		"~/.claude/plugins", "~/.claude/commands", "~/.claude/agents", "~/.claude/skills",
	},
	Bin: "claude-agent-acp", Install: "npm install -g @agentclientprotocol/claude-agent-acp",
	Login: "claude /login", LoginFiles: []string{"~/.claude/.credentials.json"},
	RootEnv: map[string]string{"IS_SANDBOX": "1"},
	Causes: []Cause{
		// Claude Code ends without a key (or login) and the adapter answers
		// session/new with this (measured on 0.101.0, ~49 s after the spawn).
		{Match: "Query closed before response received", Says: "the agent ended during session/new; it likely has no credentials", Needs: NeedKey},
		{Match: "Authentication required", Says: "it has no credentials", Needs: NeedKey},
		{Match: "cannot be used with root/sudo privileges", Says: "Claude Code refuses to run as root", Needs: NeedRoot},
	},
})
