package workflows

import (
	"reflect"
	"testing"
	"time"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// TestPresetDefaults uses a made-up preset with every default set, since
// the real presets' measured values are filled in separately (and may be
// zero): what the preset gives applies only where the file is silent.
func TestPresetDefaults(t *testing.T) {
	fake := acpagent.Preset{
		Name: "fake", Command: "npx", Launcher: []string{"-y", "@example/fake-acp"}, Args: []string{"--acp"},
		EOFGrace: 200 * time.Millisecond, TermGrace: time.Second, Mode: "ask-everything",
	}
	def := steps.NewAgent("a")
	for _, tc := range []struct {
		name    string
		preset  acpagent.Preset
		set     []string
		command string
		args    []string
		mode    string
		eof     time.Duration
		term    time.Duration
	}{
		{"a file that sets nothing gets everything the preset gives", fake, nil,
			"npx", fake.Argv(), "ask-everything", 200 * time.Millisecond, time.Second},
		{"a command of the file's own drops the preset's launcher, keeps the agent's args", fake, []string{"command"},
			"", []string{"--acp"}, "ask-everything", 200 * time.Millisecond, time.Second},
		{"a command and args of the file's own are both kept", fake, []string{"command", "args"},
			"", nil, "ask-everything", 200 * time.Millisecond, time.Second},
		{"args of the file's own keep the preset's command", fake, []string{"args"},
			"npx", nil, "ask-everything", 200 * time.Millisecond, time.Second},
		{"the file's mode wins over the preset's", fake, []string{"mode"},
			"npx", fake.Argv(), "", 200 * time.Millisecond, time.Second},
		{"the file's eof-grace wins over the preset's", fake, []string{"dispose.eof-grace"},
			"npx", fake.Argv(), "ask-everything", def.EOFGrace, time.Second},
		{"the file's term-grace wins over the preset's", fake, []string{"dispose.term-grace"},
			"npx", fake.Argv(), "ask-everything", 200 * time.Millisecond, def.TermGrace},
		{"a preset without defaults keeps acpflow's", acpagent.Preset{Name: "bare", Command: "bare", Args: []string{"acp"}}, nil,
			"bare", []string{"acp"}, "", def.EOFGrace, def.TermGrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := steps.NewAgent("a")
			presetDefaults(a, tc.preset, func(key string) bool {
				for _, k := range tc.set {
					if k == key {
						return true
					}
				}
				return false
			})
			if a.Command != tc.command || !reflect.DeepEqual(a.Args, tc.args) {
				t.Errorf("command, args = %q %q, want %q %q", a.Command, a.Args, tc.command, tc.args)
			}
			if a.Mode != tc.mode || a.EOFGrace != tc.eof || a.TermGrace != tc.term {
				t.Errorf("mode, eof-grace, term-grace = %q %v %v, want %q %v %v", a.Mode, a.EOFGrace, a.TermGrace, tc.mode, tc.eof, tc.term)
			}
		})
	}
}

// TestFileSetsReadsDisposeKeys: the file's dispose keys count as set only
// when dispose is a mapping that has them.
func TestFileSetsReadsDisposeKeys(t *testing.T) {
	errs := &errorList{}
	root := parseYAML([]byte("command: x\ndispose: {eof-grace: 1s}\n"), errs)
	if root == nil || len(errs.errs) > 0 {
		t.Fatalf("parse: %v", errs.errs)
	}
	f := map[string]*node{"command": root.get("command"), "dispose": root.get("dispose")}
	set := fileSets(f)
	for key, want := range map[string]bool{
		"command": true, "args": false, "dispose.eof-grace": true, "dispose.term-grace": false, "mode": false,
	} {
		if got := set(key); got != want {
			t.Errorf("set(%q) = %v, want %v", key, got, want)
		}
	}
}

// geminiNodeOptions is the gemini preset's NODE_OPTIONS (its exit fix,
// DESIGN.md "Overhead: gemini's exit and the reactor").
const geminiNodeOptions = `--require "{preset-dir}/acpflow-node.cjs"`

func TestAPresetsEnvIsLaidUnderTheFilesEnv(t *testing.T) {
	wf, err := Parse("t.yaml", []byte(`name: t
agents:
  plain: {preset: gemini}
  mine:
    preset: gemini
    env: {GEMINI_CLI_NO_RELAUNCH: "0", GEMINI_API_KEY: k}
steps:
  - {id: a, uses: acp-subagent, with: {agent: plain, prompt: p}}
  - {id: b, uses: acp-subagent, with: {agent: mine, prompt: p}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := wf.Agents["plain"].Env; !reflect.DeepEqual(got, map[string]string{"GEMINI_CLI_NO_RELAUNCH": "1", "NODE_OPTIONS": geminiNodeOptions}) {
		t.Errorf("plain gemini env = %v, want the preset's", got)
	}
	if got := wf.Agents["mine"].Env; !reflect.DeepEqual(got, map[string]string{"GEMINI_CLI_NO_RELAUNCH": "0", "GEMINI_API_KEY": "k", "NODE_OPTIONS": geminiNodeOptions}) {
		t.Errorf("env = %v, want the file's value to win and both kept", got)
	}
}
