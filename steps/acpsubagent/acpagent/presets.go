package acpagent

import (
	"sort"
	"time"
)

// Preset is a known agent: what `preset: NAME` fills in, and what it needs.
// Each preset lives in a file of its own (preset_NAME.go) with the
// measurements behind its values.
type Preset struct {
	Name    string
	Command string
	// Launcher are the arguments that make Command start the agent (npx's
	// "-y PACKAGE"); a workflow that names its own command drops them.
	Launcher []string
	// Args are the agent's own arguments ("--acp"), kept with a command of
	// the workflow's own unless it gives args: too.
	Args        []string
	Env         []string // variables the agent reads its credentials from
	Auth        []string // authenticate method ids it offers
	Notes       string
	Description string
	// Version is the release of the agent (or its adapter) the preset's
	// settings were measured on; "" when nothing was measured.
	Version string

	// The defaults below apply when the workflow file does not set the key;
	// zero keeps acpflow's own default.

	// EOFGrace and TermGrace are the preset's dispose ladder
	// (dispose.eof-grace, dispose.term-grace), measured on the agent: an
	// agent that never exits on stdin EOF should not cost the global
	// DefaultEOFGrace on every step.
	EOFGrace  time.Duration
	TermGrace time.Duration
	// EOFIdle is the preset's dispose.eof-idle: set only for an agent
	// measured never to exit on stdin EOF, whose idleness after EOF says
	// it will not go by itself. Zero (every preset today: each exits on
	// EOF, some only after a timer or a network write, idle meanwhile)
	// waits up to the whole EOF grace. docs/agents/README.md says which.
	EOFIdle time.Duration
	// EOFLeaderDone ends the EOF wait once the agent's own process is
	// the last of its group and idle (procgroup.Ladder.EOFLeaderDone):
	// for an adapter measured to outlive its children only on a timer of
	// its own, so that the wait ends when their work is done rather than
	// at the grace. Its children still get the whole EOF grace.
	EOFLeaderDone bool
	// SetEnv are variables the preset sets in the agent's explicit env (the
	// workflow's env: wins), for settings that only an env var carries.
	// PresetDirVar in a value (or in Args) names the spawn's private
	// config directory (Files).
	SetEnv map[string]string
	// Files are written, for each spawn, into a private directory of the
	// step's (removed at teardown): settings that an agent reads only from
	// a file, given to it without touching the user's own files under
	// $HOME. File name → content; PresetDirVar in the content names the
	// directory.
	Files map[string]string
	// Meta is sent as the `_meta` of session/new (and of load, resume and
	// fork), for settings an adapter reads there.
	Meta map[string]any
	// Mode is the ACP session mode (`mode:`) under which every tool call
	// that executes or writes reaches acpflow's permission policy, where the
	// agent has one; "" sets no mode.
	Mode string
	// AllowMode, where set, replaces Mode under `permission: allow` (with
	// no mode: of the workflow's): a mode in which the commands the policy
	// allows can run (codex: its read-only mode's own sandbox fails an
	// allowed rm). Under any other policy Mode stays.
	AllowMode string
	// AutoModes are the agent's session modes in which it, a classifier or
	// a reviewer model decides alone; the mode guard sets a session in one
	// back to Mode. Modes that agents in general name so (AutoMode) need
	// not be listed.
	AutoModes []string
	// DecideAloneEnv are environment variables that make the agent approve
	// everything itself (Copilot's COPILOT_ALLOW_ALL, which its session
	// does not report): under a permission policy other than allow they
	// are dropped from its environment, wherever they come from. Names
	// that say so (DecideAloneEnv) need not be listed.
	DecideAloneEnv []string
	// AuthAliases map the authenticate method ids of the adapter's earlier
	// releases to today's, so that an old workflow keeps working (with a
	// warning).
	AuthAliases map[string]string
	// StateDirs are where the agent writes its own state during a turn
	// (sessions, logs, caches), as measured: writable in its sandbox, "~/"
	// meaning the agent's HOME (docs/sandbox.md). They name the
	// subdirectories the agent writes, not its whole config directory, so
	// that what else lies there (settings, plugins, instructions) stays
	// read-only; a directory the agent rewrites files in by rename must be
	// listed whole, and then Settings keeps its settings read-only.
	StateDirs []string
	// Settings are the agent's own settings files and directories that
	// can hold hooks, commands, MCP servers or rules that allow commands:
	// what the user's next unsandboxed session of the agent would run. The
	// sandbox keeps them read-only even beneath a writable state dir, cwd
	// or write: path, and missing ones cannot be created (sandbox.Spec's
	// Protect), so that containment outlives the step (SPEC §10). Paths
	// as in StateDirs.
	Settings []string
	// Unasked says which tool calls the agent still runs without asking
	// under the preset's settings, as measured ("" for none known); shown
	// by `acpflow agents` and docs/agents.
	Unasked string

	// Expect is what the agent does under the preset, as measured: what
	// `acpflow agents verify` checks the installed agent against.
	Expect Expect

	// What a user needs before the agent can work (docs/agents/NAME.md),
	// which `acpflow validate` checks and a failed start explains.

	// Bin is the program the agent's package installs
	// ("claude-agent-acp"), and Install how to get it ("npm install -g
	// …"): what the error of a command not on PATH says to do.
	Bin     string
	Install string
	// Login is how a user logs the agent in instead of passing it a key
	// (`claude /login`), and LoginFiles the files that login leaves under
	// the agent's HOME ("~/.claude/.credentials.json"): one of them meets
	// the need for a key of Env.
	Login      string
	LoginFiles []string
	// KeyAuth is the auth method that reads the keys of Env, where the
	// agent has several: under another auth: (a login) no key is needed.
	KeyAuth string
	// RootEnv are the variables, and the value each needs, that the agent
	// refuses to start without when it runs as root (claude: IS_SANDBOX=1).
	RootEnv map[string]string
	// Causes are the likely causes of a start that failed, each recognised
	// by words in the agent's stderr or error; the first that matches is
	// added to the step's error.
	Causes []Cause
}

// Expect is what a preset's agent is measured to do. Every preset's agent
// asks before a command, a write and a delete, and runs none of them
// unasked; the fields say the rest, their zero values what most agents do.
type Expect struct {
	// StartMode is the mode session/new reports before acpflow sets the
	// preset's ("" expects the preset's Mode, or no mode at all).
	StartMode string
	// WideningOptions are the "ID=VALUE" of the permission config options
	// the agent offers that would let it decide alone (the mode guard pins
	// them); any other is a change.
	WideningOptions []string
	// Teardown is the tier that ends it after a turn: "eof" (it exits on
	// stdin EOF within the EOF grace; the default) or "term".
	Teardown string
}

// Cause is a likely cause of a failed start: when Match is in the agent's
// stderr or its error, Says is told (what it means), then what to do:
// the preset's hint for what Needs names (Explain).
type Cause struct {
	Match string
	Says  string
	Needs Need
}

// Need is a documented need of a preset's agent a Cause points to: the
// hint for it is worded by the preset (KeyHint, RootHint), in the terms of
// the workflow file or of the shell.
type Need int

const (
	NeedNothing Need = iota
	NeedKey          // a key of Env, or the agent's own login
	NeedRoot         // RootEnv, when acpflow runs as root
)

// PresetDirVar stands, in a preset's SetEnv values and Files, for the
// spawn's private config directory.
const PresetDirVar = "{preset-dir}"

var presets = map[string]Preset{}

// registerPreset adds a preset; each preset_NAME.go calls it once.
func registerPreset(p Preset) Preset {
	if _, dup := presets[p.Name]; dup {
		panic("acpagent: duplicate preset " + p.Name)
	}
	presets[p.Name] = p
	return p
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
