package workflows

import (
	"reflect"
	"strings"
	"testing"
)

// TestAnAgentBlockHasWhatTheFileWrites: the cursor an agent kind decodes
// through (acpagent's fileSets asks it which keys the file sets) finds a
// dispose key only when dispose is a mapping that has it.
func TestAnAgentBlockHasWhatTheFileWrites(t *testing.T) {
	errs := &errorList{}
	root := parseYAML([]byte("command: x\ndispose: {eof-grace: 1s}\nargs: [a]\n"), errs)
	if root == nil || len(errs.errs) > 0 {
		t.Fatalf("parse: %v", errs.errs)
	}
	b := &agentBlock{n: root}
	for path, want := range map[string]bool{
		"command": true, "args": true, "args.0": true, "args.1": false, "dispose.eof-grace": true,
		"dispose.term-grace": false, "mode": false, "command.x": false,
	} {
		if got := b.Has(strings.Split(path, ".")...); got != want {
			t.Errorf("Has(%q) = %v, want %v", path, got, want)
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
