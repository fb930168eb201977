package acpagent

import "time"

// qwenAskDefaults is the system-defaults settings file the qwen preset
// writes for each spawn (QWEN_CODE_SYSTEM_DEFAULTS_PATH): ask rules for
// the shell and for every edit.
//
// Measured on Qwen Code 0.24.4 (and read in its bundle, core/permissions):
//
//   - In ACP its default mode is "auto": an LLM classifier decides, and
//     asks only when it cannot ("Auto Mode couldn't classify this
//     action"); `ls` ran unasked.
//   - In mode default it still runs shell commands it judges read-only
//     unasked (ls, echo hello, cat FILE, git status: measured).
//   - An ask rule matching the call wins over allow rules of every scope
//     (deny 3 > ask 2 > allow 0; the session's "always" rules included)
//     and over the read-only heuristics; "run_shell_command" covers the
//     monitor tool too, "edit" covers write_file, edit and notebook_edit.
//     With it, all six calls of a scripted turn asked (echo, ls, cat,
//     git status, a write, echo > file), also with the user's settings
//     saying `permissions.allow: ["run_shell_command", "edit"]` and
//     `tools.approvalMode: "yolo"`.
//   - permissions.ask merges by union across the settings scopes, so the
//     lowest one (system defaults) adds the rules without hiding the
//     user's, the project's or the administrator's
//     (/etc/qwen-code/settings.json) own. It does replace an
//     /etc/qwen-code/system-defaults.json.
//   - With a matching ask rule qwen offers only proceed_once and cancel:
//     none of its "always" options (proceed_always_project and
//     proceed_always_user write an allow rule to the project's
//     .qwen/settings.json or $HOME/.qwen/settings.json).
const qwenAskDefaults = `{"permissions":{"ask":["run_shell_command","edit"]}}
`

// qwenNodeSetup is geminiNodeSetup for qwen (a gemini-cli fork that
// parses shell commands with tree-sitter's WebAssembly too), loaded by the
// launcher (cli-entry.js) and by the CLI it runs: NODE_OPTIONS stays in
// the launcher's environment, which the CLI child inherits, and leaves only
// the CLI's, so that the commands qwen runs start without it.
const qwenNodeSetup = `// Written by acpflow for one qwen spawn (NODE_OPTIONS=--require): no
// optimizing re-compiles of WebAssembly for node's exit to wait for.
require("v8").setFlagsFromString("--liftoff-only");
if (/[\\/]cli\.js$/.test(process.argv[1] || "")) delete process.env.NODE_OPTIONS;
`

// qwen: Qwen Code in ACP mode (npm @qwen-code/qwen-code).
var _ = registerPreset(Preset{
	Name: "qwen", Command: "qwen",
	// --approval-mode default: session/new then reports currentModeId
	// "default" whatever tools.approvalMode the user's settings hold
	// (measured with "yolo" there).
	Args:  []string{"--acp", "--approval-mode", "default"},
	Files: map[string]string{"system-defaults.json": qwenAskDefaults, "acpflow-node.cjs": qwenNodeSetup},
	SetEnv: map[string]string{
		"QWEN_CODE_SYSTEM_DEFAULTS_PATH": PresetDirVar + "/system-defaults.json",
		"QWEN_CODE_NO_RELAUNCH":          "true",
		"NODE_OPTIONS":                   `--require "` + PresetDirVar + `/acpflow-node.cjs"`,
	},
	Env: []string{"OPENAI_API_KEY", "DASHSCOPE_API_KEY"},
	// authMethods: only "openai" (reads OPENAI_API_KEY; OPENAI_BASE_URL
	// and OPENAI_MODEL choose the endpoint and model).
	Auth: []string{"openai"},
	// It does not offer session/close. The qwen bin is a launcher that
	// runs the CLI as a child (node --expose-gc cli.js) and waits for
	// it; there is no setting to skip it. On stdin EOF the whole group
	// is gone 2.3–3.5 s after a turn (8.3 s once, at load 8 on 2
	// CPUs); on SIGTERM the launcher exits in ~65 ms but the CLI child
	// takes ~3.7 s more. So EOF is the faster way out.
	//
	// What the EOF exit waited for (strace, issue 42): the CLI re-ran
	// itself as a third node process (to raise the heap limit to half
	// the machine's memory), and that process, its cleanup done and
	// process.exit called, waited 3.5 s for one V8 worker thread: the
	// optimizing re-compiles of tree-sitter's WebAssembly, as gemini's
	// (geminiNodeSetup). QWEN_CODE_NO_RELAUNCH and qwenNodeSetup take
	// both away: turn end to group gone 111–815 ms, median 176 ms (12
	// turns), against 0.58–5.1 s, median 1.5 s (8 turns), interleaved,
	// at load 12–17 on 2 CPUs; verify's checks unchanged. A session
	// then has node's default heap limit, as gemini's.
	EOFGrace: 10 * time.Second, TermGrace: 5 * time.Second,
	Description: "Qwen Code in ACP mode (npm @qwen-code/qwen-code)",
	Notes:       "declares node >= 22; 0.24.4 ran on node 20.20 here",
	Version:     "0.24.4",
	// Modes (session/new "modes" and a "mode" config option): plan,
	// default, auto-edit, auto, yolo. yolo runs everything without
	// asking whatever the rules say; auto-edit approves edits itself;
	// auto asks a classifier (and, when the classifier fails, offers
	// "proceed_once_and_switch_to_default", kind allow_once, which also
	// switches the session's mode).
	Mode:      "default",
	AutoModes: []string{"auto", "auto-edit", "yolo"},
	Unasked: "not measured: web_fetch, MCP tools, skills and subagents (the agent tool), " +
		"and a user's deny rule (it refuses the call itself, which is stricter)",
	// What qwen needs to write in a turn (docs/sandbox.md): its chats and
	// project memory under projects/, sessions/, tmp/, and the lock of
	// extension-store/ (it exits without it). Its other writes
	// (settings.json migrated by rename, memories/, usage_record.jsonl,
	// output-language.md, extensions/extension-enablement.json) are
	// refused without harm to the turn; a missing extensions/ is made
	// before the spawn, since it exits when it cannot make it.
	StateDirs: []string{"~/.qwen/projects", "~/.qwen/sessions", "~/.qwen/tmp", "~/.qwen/extension-store"},
	Settings: []string{
		"~/.qwen/settings.json", "~/.qwen/trustedFolders.json", "~/.qwen/extensions",
		"~/.qwen/commands",
	},
	Bin: "qwen", Install: "npm install -g @qwen-code/qwen-code",
	KeyAuth: "openai",
})
