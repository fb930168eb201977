package workflows_test

import (
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/workflows"
)

// TestTheEOFWaitIsCutOnlyWhereTheFileOrAPresetSaysSo: the EOF wait ends
// early on idleness only for an agent whose definition says so
// (dispose.eof-idle) or whose preset was measured never to exit on EOF;
// an agent acpflow knows nothing about waits up to its whole eof-grace.
//
// Class of input: each way an agent is defined (a command, a builtin,
// each preset, with and without dispose keys), and each shape of
// eof-idle (a duration, a bare number of seconds, 0 as off, too short,
// not shorter than the grace, negative, not a duration), errors placed
// at the value.
func TestTheEOFWaitIsCutOnlyWhereTheFileOrAPresetSaysSo(t *testing.T) {
	schema := compileSchema(t)
	load := func(agent string) (*steps.Agent, error) {
		src := "name: t\nagents:\n  a:\n" + agent + "steps:\n  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}\n"
		wf, err := workflows.Parse("t.yaml", []byte(src))
		if err != nil {
			return nil, err
		}
		return wf.Agents["a"], nil
	}
	agents := []struct{ name, yaml string }{
		{"a command", "    command: my-agent\n"},
		{"the demo builtin", "    builtin: demo\n"},
		{"a command with its own graces", "    command: my-agent\n    dispose: {eof-grace: 20s, term-grace: 1s}\n"},
	}
	for _, p := range acpagent.Presets() {
		agents = append(agents, struct{ name, yaml string }{"preset " + p.Name, "    preset: " + p.Name + "\n"})
	}
	for _, tc := range agents {
		t.Run(tc.name+" waits its whole eof-grace", func(t *testing.T) {
			a, err := load(tc.yaml)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := acpagent.LookupPreset(a.Preset)
			if a.EOFIdle != p.EOFIdle {
				t.Errorf("eof-idle = %s, want the preset's measured %s", a.EOFIdle, p.EOFIdle)
			}
			if p.EOFIdle == 0 && a.EOFIdle != 0 {
				t.Errorf("eof-idle = %s for an agent not known never to exit on EOF", a.EOFIdle)
			}
		})
	}
	for _, tc := range []struct {
		name, dispose string
		want          time.Duration
	}{
		{"a duration", "{eof-idle: 300ms}", 300 * time.Millisecond},
		{"a bare number of seconds", "{eof-grace: 10s, eof-idle: 2}", 2 * time.Second},
		{"0 is off", "{eof-idle: 0}", 0},
		{"0s is off", `{eof-idle: "0s"}`, 0},
		{"a quoted 0 is off", `{eof-idle: "0"}`, 0},
	} {
		t.Run("eof-idle as "+tc.name, func(t *testing.T) {
			a, err := load("    command: my-agent\n    dispose: " + tc.dispose + "\n")
			if err != nil {
				t.Fatal(err)
			}
			if a.EOFIdle != tc.want {
				t.Errorf("eof-idle = %s, want %s", a.EOFIdle, tc.want)
			}
			// What validate accepts, an editor's schema accepts too: "0"
			// and "0s" are both a duration and the off value.
			var v any
			if err := yaml.Unmarshal([]byte("{name: t, agents: {a: {command: my-agent, dispose: "+tc.dispose+"}}, steps: [{id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}]}"), &v); err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(v); err != nil {
				t.Errorf("the schema refuses it: %v", err)
			}
		})
	}
	t.Run("a preset's agent can set eof-idle", func(t *testing.T) {
		a, err := load("    preset: codex\n    dispose: {eof-idle: 100ms}\n")
		if err != nil {
			t.Fatal(err)
		}
		if a.EOFIdle != 100*time.Millisecond {
			t.Errorf("eof-idle = %s", a.EOFIdle)
		}
	})
	for _, tc := range []struct{ name, dispose, at, want string }{
		{"shorter than CPU time can tell", "{eof-idle: 10ms}", "t.yaml:5:25:", "at least 50ms, got 10ms"},
		{"as long as the grace", "{eof-grace: 1s, eof-idle: 1s}", "t.yaml:5:40:", "must be shorter than dispose.eof-grace (1s)"},
		{"longer than the default grace", "{eof-idle: 7s}", "t.yaml:5:25:", "shorter than dispose.eof-grace (6s)"},
		{"longer than a preset's grace", "{eof-idle: 600ms}\n    preset: codex", "t.yaml:5:25:", "shorter than dispose.eof-grace (500ms)"},
		{"negative", "{eof-idle: -1s}", "t.yaml:5:25:", "greater than 0"},
		{"not a duration", "{eof-idle: soon}", "t.yaml:5:25:", `"soon" is not a duration`},
		{"a misspelt key", "{eof-idel: 1s}", "t.yaml:5:", `did you mean "eof-idle"`},
	} {
		t.Run("eof-idle "+tc.name+" is refused", func(t *testing.T) {
			_, err := load("    command: my-agent\n    dispose: " + tc.dispose + "\n")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), tc.at) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it at %s saying %q", err, tc.at, tc.want)
			}
		})
	}
}
