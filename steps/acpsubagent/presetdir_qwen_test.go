package acpsubagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The qwen preset's spawn is a launcher (the qwen bin) that runs the CLI
// (cli.js) as a node child. Its node setup (acpagent's qwenNodeSetup: a
// quick exit after a turn, issue 42) must reach the CLI through the
// launcher, and the commands the CLI runs must not inherit it; the CLI
// must not re-launch itself as a third process (QWEN_CODE_NO_RELAUNCH).
func TestQwenPresetsNodeSetupReachesTheCLIAndLeavesItsCommandsAlone(t *testing.T) {
	dir := t.TempDir()
	cli := filepath.Join(dir, "cli.js")
	if err := os.WriteFile(cli, []byte(`const {execFileSync} = require("child_process");
console.log(JSON.stringify({cli: process.env.NODE_OPTIONS ?? "unset",
  command: execFileSync("sh", ["-c", "echo \"${NODE_OPTIONS-unset}\""]).toString().trim(),
  relaunch: process.env.QWEN_CODE_NO_RELAUNCH ?? "unset"}));`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The launcher as qwen's (cli-entry.js): the CLI in a node child, with its env.
	launcher := filepath.Join(dir, "cli-entry.js")
	if err := os.WriteFile(launcher, []byte(`const r = require("child_process").spawnSync(process.execPath, ["--expose-gc", process.argv[2]],
  {stdio: ["ignore", "pipe", "inherit"], env: {...process.env}});
process.stdout.write(JSON.stringify({launcher: process.env.NODE_OPTIONS ?? "unset", child: JSON.parse(r.stdout.toString())}));`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, env := nodeWithPresetEnv(t, "qwen", launcher, cli)
	var seen struct {
		Launcher string
		Child    struct{ CLI, Command, Relaunch string }
	}
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	if seen.Launcher != env["NODE_OPTIONS"] {
		t.Errorf("the launcher saw NODE_OPTIONS %q, want the preset's %q (it passes it on to the CLI)", seen.Launcher, env["NODE_OPTIONS"])
	}
	if seen.Child.CLI != "unset" || seen.Child.Command != "unset" {
		t.Errorf("NODE_OPTIONS seen by the CLI %q, by a command it runs %q; want both unset (the setup file ran in the CLI and took it out)", seen.Child.CLI, seen.Child.Command)
	}
	if seen.Child.Relaunch != "true" {
		t.Errorf("QWEN_CODE_NO_RELAUNCH = %q in the CLI, want true", seen.Child.Relaunch)
	}
}
