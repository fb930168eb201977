package acpagent

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/steps"
)

// TestPresetDefaults uses a made-up preset with every default set, since
// the real presets' measured values are filled in separately (and may be
// zero): what the preset gives applies only where the file is silent.
func TestPresetDefaults(t *testing.T) {
	fake := Preset{
		Name: "fake", Command: "npx", Launcher: []string{"-y", "@example/fake-acp"}, Args: []string{"--acp"},
		EOFGrace: 200 * time.Millisecond, TermGrace: time.Second, Mode: "ask-everything",
	}
	def := steps.NewAgent("a")
	for _, tc := range []struct {
		name    string
		preset  Preset
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
		{"a preset without defaults keeps acpflow's", Preset{Name: "bare", Command: "bare", Args: []string{"acp"}}, nil,
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

// setBlock is an agent block that writes the paths it holds (dotted).
type setBlock struct {
	steps.AgentBlock
	paths map[string]bool
}

func (b setBlock) Has(path ...string) bool { return b.paths[strings.Join(path, ".")] }

// TestFileSetsReadsDisposeKeys: the file's dispose keys count as set as
// dispose.KEY, the others by their name.
func TestFileSetsReadsDisposeKeys(t *testing.T) {
	set := fileSets(setBlock{paths: map[string]bool{"command": true, "dispose": true, "dispose.eof-grace": true}})
	for key, want := range map[string]bool{
		"command": true, "args": false, "dispose.eof-grace": true, "dispose.term-grace": false, "mode": false,
	} {
		if got := set(key); got != want {
			t.Errorf("set(%q) = %v, want %v", key, got, want)
		}
	}
}
