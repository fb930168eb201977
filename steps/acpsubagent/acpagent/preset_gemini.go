package acpagent

import "time"

// geminiAskPolicy is the policy file the gemini preset writes for each spawn
// and gives to gemini with --admin-policy: every shell command, file write
// and edit asks the ACP client, so that each one reaches acpflow's
// permission policy.
//
// Measured on gemini-cli 0.61.0 (and read in its bundle, policy/config.ts
// and policy-engine.ts):
//
//   - Without it, in mode default, gemini runs shell commands it judges
//     safe (echo, ls, cat, grep, pwd, … each part of a compound line)
//     without asking: its shell heuristics turn its own ask_user into
//     allow. A rule with an argsPattern skips those heuristics (compound
//     lines are checked part by part, each again matching this rule).
//   - Rules are ranked by tier + priority/1000: default policies 1.x,
//     workspace 3.x (and the session's "allow for this session" rules,
//     3.x), user 4.x (~/.gemini/policies, --policy, settings'
//     tools.allowed at 4.3), admin 5.x (/etc/gemini-cli/policies,
//     --admin-policy). At 5.999 this rule outranks yolo's allow-all
//     (1.998), autoEdit's write allows (1.015), anything the user's
//     ~/.gemini/settings.json or policies allow, and the session's
//     "always" rules.
//   - --admin-policy keeps the user's own policies (--policy would replace
//     ~/.gemini/policies), and unlike GEMINI_CLI_SYSTEM_SETTINGS_PATH it
//     needs no root-owned file: gemini skips a system settings file not
//     owned by root or under a world-writable directory (/tmp).
//   - The task tracker's tools (tracker_create_task, tracker_update_task,
//     tracker_add_dependency; off unless experimental.taskTracker) are of
//     kind edit and allowed by gemini's own read-only policy: they ask too,
//     so that no call of kind edit runs unasked.
//   - Plan mode is left out: its own rules deny shell and writes other
//     than Markdown plans, which this rule would turn into questions.
//
// gemini ignores --admin-policy (with a warning on stderr) when
// /etc/gemini-cli/policies holds a .toml file: an administrator's
// policies then rule alone.
const geminiAskPolicy = `# Written by acpflow for one gemini spawn: every shell command, write and
# edit asks the ACP client, whose permission policy decides.
[[rule]]
toolName = ["run_shell_command", "write_file", "replace", "tracker_create_task", "tracker_update_task", "tracker_add_dependency"]
argsPattern = ".*"
decision = "ask_user"
priority = 999
modes = ["default", "autoEdit", "yolo"]
`

// geminiNodeSetup is loaded by gemini's node before gemini itself
// (NODE_OPTIONS=--require, from the spawn's private directory): it keeps
// WebAssembly on V8's baseline compiler (Liftoff), and takes NODE_OPTIONS
// out of gemini's environment again, so that the commands gemini runs
// (node among them) start as they would without acpflow.
//
// Measured on gemini-cli 0.61.0, node 20 (issue 28): gemini parses each
// shell command with tree-sitter, compiled to WebAssembly; V8 then
// re-compiles the parser's hot functions with TurboFan on its worker
// threads, and node's exit, once gemini's own cleanup is done and its
// event loop empty, waits for those compiles (NodePlatform::DrainTasks)
// and then frees the heap: 358 ms after the turn on an idle 2-CPU machine,
// 2–3 s at load 16 (past the EOF grace, so SIGTERM; under strace the main
// thread sits in a futex wait on the compiling worker). With Liftoff only
// there is nothing to wait for: 117–162 ms at load 16. Gemini's session
// files are written during the turn, before its answer, and its cleanup
// still runs in full: only compiles that nothing would run are skipped. The
// parser does the same in Liftoff's code, a little slower on a command
// line of a few words. --liftoff-only is one of the V8 flags node refuses
// in NODE_OPTIONS, hence the file.
const geminiNodeSetup = `// Written by acpflow for one gemini spawn (NODE_OPTIONS=--require): no
// optimizing re-compiles of WebAssembly for node's exit to wait for.
require("v8").setFlagsFromString("--liftoff-only");
delete process.env.NODE_OPTIONS;
`

// gemini: Gemini CLI in ACP mode (npm @google/gemini-cli).
var _ = registerPreset(Preset{
	Name: "gemini", Command: "gemini",
	// --approval-mode default: a session starts in mode default whatever
	// general.defaultApprovalMode the user's settings.json holds
	// (auto_edit starts it in autoEdit otherwise; the flag wins over
	// settings). --admin-policy: geminiAskPolicy, from the spawn's
	// private directory.
	Args:  []string{"--acp", "--approval-mode", "default", "--admin-policy", PresetDirVar + "/acpflow.toml"},
	Files: map[string]string{"acpflow.toml": geminiAskPolicy, "acpflow-node.cjs": geminiNodeSetup},
	Env:   []string{"GEMINI_API_KEY"}, Auth: []string{"gemini-api-key", "oauth-personal"},
	// Without it gemini re-launches itself as a child (to raise node's
	// heap limit), costing ~0.6 s of start, and the parent ignores
	// SIGTERM.
	// NODE_OPTIONS: geminiNodeSetup, which keeps its exit after a turn
	// with a shell command short (a workflow's own NODE_OPTIONS wins, and
	// then the exit is as slow as gemini's own).
	SetEnv: map[string]string{
		"GEMINI_CLI_NO_RELAUNCH": "1",
		"NODE_OPTIONS":           `--require "` + PresetDirVar + `/acpflow-node.cjs"`,
	},
	// It exits on EOF by itself: ~40 ms after a turn without a tool
	// call; after one with a shell command ~360 ms without
	// geminiNodeSetup (node's exit waiting for V8's optimizing compiles
	// of tree-sitter's WebAssembly), 2–3 s at load 16, and 120–160 ms
	// with it at load 16 (issue 28). SIGTERM to the group runs the same
	// cleanup. It does not advertise session/close.
	EOFGrace: 2 * time.Second, TermGrace: time.Second,
	Description: "Gemini CLI in ACP mode (npm @google/gemini-cli)",
	Notes:       "needs auth: gemini-api-key with GEMINI_API_KEY passed explicitly",
	Version:     "0.61.0",
	// Its ACP modes are default, autoEdit, yolo and plan (ids exactly so;
	// "auto_edit" is only the --approval-mode spelling, and session/set_mode
	// refuses it). autoEdit writes and yolo runs everything without asking
	// but for geminiAskPolicy; other tools (web_fetch, MCP tools, skills,
	// subagents) still go unasked there. In a folder the user has not
	// trusted (~/.gemini/trustedFolders.json) gemini starts in default
	// whatever was asked and refuses session/set_mode to autoEdit or yolo
	// ("Cannot enable privileged approval modes in an untrusted folder",
	// -32603).
	Mode:      "default",
	AutoModes: []string{"autoEdit", "yolo"},
	Unasked: "in mode plan, its writes of Markdown plan files (plan mode denies shell and other writes itself); " +
		"not measured: a subagent's (invoke_agent) shell and write calls, which gemini cannot forward to the client; " +
		"where /etc/gemini-cli/policies holds a .toml file gemini ignores --admin-policy (warning on stderr) " +
		"and runs the shell commands it judges safe (echo, ls, cat, …) unasked",
	// gemini rewrites ~/.gemini/projects.json at every start by a temp
	// file and a rename at the top of ~/.gemini, and exits when it cannot
	// (measured), so the directory stays writable whole and its settings
	// rely on Settings (docs/sandbox.md has the measurement).
	StateDirs: []string{"~/.gemini"},
	Settings: []string{
		"~/.gemini/settings.json", "~/.gemini/trustedFolders.json", "~/.gemini/policies",
		"~/.gemini/extensions", "~/.gemini/commands",
	},
	Bin: "gemini", Install: "npm install -g @google/gemini-cli",
	KeyAuth: "gemini-api-key",
	Causes: []Cause{
		{Match: "Gemini API key is missing", Says: "it has no key", Needs: NeedKey},
	},
})
