package acpsubagent

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// The gemini preset gives gemini's node a setup file through NODE_OPTIONS
// (acpagent's geminiNodeSetup: a quick exit after a turn with a shell
// command, issue 28). node must load it from the spawn's private
// directory, and the commands gemini runs must not inherit it: a user's
// `npm test` run by gemini starts as it would without acpflow.
func TestGeminiPresetsNodeSetupLoadsAndLeavesTheCommandsItRunsAlone(t *testing.T) {
	// node as the preset starts gemini's: what it sees of NODE_OPTIONS,
	// and what a command it runs sees.
	script := `const {execFileSync} = require("child_process");
console.log(JSON.stringify({node: process.env.NODE_OPTIONS ?? "unset",
  command: execFileSync("sh", ["-c", "echo \"${NODE_OPTIONS-unset}\""]).toString().trim()}));`
	out, _ := nodeWithPresetEnv(t, "gemini", "-e", script)
	var seen struct{ Node, Command string }
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	if seen.Node != "unset" || seen.Command != "unset" {
		t.Errorf("NODE_OPTIONS seen by node %q, by a command it runs %q; want both unset (the setup file ran and took it out)", seen.Node, seen.Command)
	}
}

// nodeWithPresetEnv runs node with args and the env a spawn of preset
// gets (its SetEnv, its private directory written), and returns what it
// printed and that env. It skips the test without node.
func nodeWithPresetEnv(t *testing.T, preset string, args ...string) ([]byte, map[string]string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	p, ok := acpagent.LookupPreset(preset)
	if !ok {
		t.Fatalf("no %s preset", preset)
	}
	env := maps.Clone(p.SetEnv)
	dir, err := presetDir(&steps.Agent{Name: "a", Preset: preset}, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if !strings.Contains(env["NODE_OPTIONS"], dir) {
		t.Fatalf("NODE_OPTIONS = %q, want it to name the spawn's directory %s", env["NODE_OPTIONS"], dir)
	}
	cmd := exec.Command(node, args...)
	for _, kv := range os.Environ() {
		if _, set := env[strings.SplitN(kv, "=", 2)[0]]; !set {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node with the %s preset's env: %v\n%s", preset, err, stderr)
	}
	return out, env
}
