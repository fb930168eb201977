package workflows_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/workflows"
)

const sessionKeys = `
name: t
inputs:
  model: {type: string, default: o3}
agents:
  codex:
    preset: codex
    mode: auto
    config: {model: "${{ inputs.model }}", fast: true, effort: "3"}
    max-output: 16 MiB
  local:
    preset: codex
    command: /opt/codex-acp
  wrapped:
    preset: codex
    command: /usr/bin/env
    args: [codex-acp]
  demo: {builtin: demo, max-output: 1048576}
steps:
  - id: a
    uses: acp-subagent
    with:
      agent: codex
      prompt: hi
      mode: "${{ inputs.model == 'o3' ? 'read-only' : 'auto' }}"
      config: {model: gpt-5, fast: false}
      max-output: 4096
  - id: b
    uses: acp-subagent
    with: {agent: demo, prompt: hi, max-output: 2 KiB, mode: ""}
`

func TestParseReadsModeConfigAndMaxOutput(t *testing.T) {
	wf, err := workflows.Parse("t.yaml", []byte(sessionKeys))
	if err != nil {
		t.Fatal(err)
	}
	codex := wf.Agents["codex"]
	if codex.Mode != "auto" || codex.MaxOutput != 16<<20 {
		t.Errorf("codex mode, max-output = %q %d", codex.Mode, codex.MaxOutput)
	}
	wantConfig := map[string]string{"model": "${{ inputs.model }}", "fast": "true", "effort": "3"}
	if !reflect.DeepEqual(codex.Config, wantConfig) {
		t.Errorf("codex config = %v, want %v (templates raw, booleans as text)", codex.Config, wantConfig)
	}
	if demo := wf.Agents["demo"]; demo.MaxOutput != 1<<20 || demo.Mode != "" || demo.Config != nil {
		t.Errorf("demo = %+v, want max-output 1 MiB and no mode or config", demo)
	}

	// What the runner gets in with:, before rendering (Run renders the
	// templates into strings and keeps the rest).
	a := wf.Steps[0].With
	if _, ok := a["mode"].(*engine.Template); !ok {
		t.Errorf("with.mode is a %T, want a template", a["mode"])
	}
	cfg, ok := a["config"].(map[string]any)
	if !ok {
		t.Fatalf("with.config is a %T, want a map", a["config"])
	}
	if _, ok := cfg["model"].(*engine.Template); !ok || cfg["fast"] != false {
		t.Errorf("with.config = %#v, want a template and false", cfg)
	}
	if a["max-output"] != 4096 {
		t.Errorf("with.max-output = %#v, want the int 4096", a["max-output"])
	}
	b := wf.Steps[1].With
	mo, ok := b["max-output"].(*engine.Template)
	if !ok {
		t.Fatalf("with.max-output is a %T, want a template", b["max-output"])
	}
	if s, err := mo.Render(&engine.Scope{}); err != nil {
		t.Fatal(err)
	} else if n, err := acpagent.SizeOf(s); err != nil || n != 2048 {
		t.Errorf("with.max-output renders %q, read as %d, %v", s, n, err)
	}
}

// TestCommandReplacesThePresetsArgs is issue 9 item 8: `preset: codex`
// with a local codex-acp must not keep npx's `-y @zed-industries/codex-acp`,
// but keeps codex's own settings (approval policy) unless args: is given.
func TestCommandReplacesThePresetsArgs(t *testing.T) {
	wf, err := workflows.Parse("t.yaml", []byte(sessionKeys))
	if err != nil {
		t.Fatal(err)
	}
	codex, _ := acpagent.LookupPreset("codex")
	for _, tc := range []struct {
		agent, command string
		args           []string
	}{
		{"codex", "npx", codex.Argv()},
		{"local", "/opt/codex-acp", codex.Args},
		{"wrapped", "/usr/bin/env", []string{"codex-acp"}},
	} {
		t.Run("agent "+tc.agent+" runs "+tc.command+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			a := wf.Agents[tc.agent]
			if a.Command != tc.command || !reflect.DeepEqual(a.Args, tc.args) {
				t.Errorf("command, args = %q %q, want %q %q", a.Command, a.Args, tc.command, tc.args)
			}
		})
	}
}

func TestSessionKeysThatAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, agent, with, want string
	}{
		{"an agent's max-output with an unknown unit", "max-output: 3 furlongs", "", `max-output: "3 furlongs" is not a size: unknown unit "furlongs"`},
		{"an agent's max-output of zero", "max-output: 0", "", "max-output: a size must be greater than 0"},
		{"an agent's negative max-output", "max-output: -1", "", "max-output: a size must be greater than 0"},
		{"an agent's max-output over 1 GiB", "max-output: 1073741825", "", "at most 1 GiB"},
		{"an agent's fractional max-output without a unit", "max-output: 1.5", "", "not a whole number of bytes"},
		{"an agent's max-output as a list", "max-output: [1]", "", "max-output: want a size such as 8 MiB or a whole number of bytes, got a list"},
		{"an agent's config as a list", "config: [a]", "", "config: want a mapping, got a list"},
		{"an agent's config value as a mapping", "config: {model: {x: 1}}", "", "config: model: want a value id (a string) or true/false, got a mapping"},
		{"an agent's config value as a number", "config: {effort: 3}", "", `got the number 3; quote it if the agent's value id is "3"`},
		{"an agent's config value as null", "config: {model: }", "", "got nothing"},
		{"an agent's empty config option id", `config: {"": x}`, "", "an option id is empty"},
		{"an agent's mode as a number", "mode: 3", "", `mode: want a mode id (a string such as read-only), got the number 3; quote it`},
		{"an agent's mode as a boolean", "mode: true", "", "mode: want a mode id (a string such as read-only), got the boolean true"},
		{"an agent's mode with a broken template", "mode: ${{ inputs.mode", "", "unclosed ${{"},
		{"an agent's config with a broken template", "config: {model: '${{ 1 + }}'}", "", "does not compile"},
		{"a step's max-output with an unknown unit", "", "max-output: 12 parsecs", `with.max-output: "12 parsecs" is not a size`},
		{"a step's max-output of zero", "", "max-output: 0", "with.max-output: a size must be greater than 0"},
		{"a step's max-output as a boolean", "", "max-output: true", "with.max-output: want a size such as 8 MiB or a whole number of bytes, got the boolean true"},
		{"a step's config as a list", "", "config: [a]", "with.config: want a mapping of option ids to values"},
		{"a step's config value as a mapping", "", "config: {model: {x: 1}}", "with.config.model: want a value id (a string) or true/false, got a mapping"},
		{"a step's config value as a number", "", "config: {effort: 3}", "with.config.effort: want a value id"},
		{"a step's mode as a number", "", "mode: 3", "with.mode: want a mode id (a string such as read-only), got the number 3"},
		{"a step's mode as a mapping", "", "mode: {a: b}", "with.mode: want a mode id (a string such as read-only), got a mapping"},
		{"a step's mode with a broken template", "", "mode: ${{ inputs.mode", "unclosed ${{"},
		{"a step's max-output with a broken template", "", "max-output: ${{ 1 + }}", "does not compile"},
		{"a misspelt agent key", "mdoe: auto", "", `unknown key "mdoe"; did you mean "mode"?`},
		{"a misspelt step key", "", "max-ouput: 1 MiB", `unknown key "max-ouput" for acp-subagent; did you mean "max-output"?`},
		{"a misspelt config key", "confg: {model: o3}", "", `did you mean "config"?`},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			agent := "    builtin: demo\n"
			if tc.agent != "" {
				agent += "    " + tc.agent + "\n"
			}
			with := ""
			if tc.with != "" {
				with = "      " + tc.with + "\n"
			}
			src := "name: t\ninputs:\n  mode: {type: string, default: auto}\nagents:\n  demo:\n" + agent +
				"steps:\n  - id: a\n    uses: acp-subagent\n    with:\n      agent: demo\n      prompt: hi\n" + with
			_, err := workflows.Parse("t.yaml", []byte(src))
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if line := strings.Count(src[:strings.Index(src, strings.TrimSpace(tc.agent+tc.with))], "\n") + 1; !strings.Contains(err.Error(), "t.yaml:"+strconv.Itoa(line)+":") {
				t.Errorf("error is not on line %d, where the key is:\n%s", line, err)
			}
		})
	}
}

// TestTheSchemaAcceptsTheSessionKeys: every form the loader accepts above
// (sizes with and without units, templates, booleans in config, an empty
// mode) is accepted by the editor's schema too.
func TestTheSchemaAcceptsTheSessionKeys(t *testing.T) {
	s := compileSchema(t)
	file := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(file, []byte(sessionKeys), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(yamlAsJSON(t, file)); err != nil {
		t.Error(err)
	}
}
