package main

// End to end: `acpflow agents verify` (issue 40) on fakes of the copilot
// preset's program: the test agent behind a script named copilot on PATH,
// well behaved, or starting in autopilot, switching mid-turn, running a
// command unasked, offering a widening option.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCopilot puts a program named copilot on a fresh PATH directory: the
// test agent with Copilot's modes and allow_all option, asking before a
// command and a write, plus extra flags. It returns the directory and the
// test agent's record file.
func fakeCopilot(t *testing.T, extra ...string) (binDir, record string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(dir, "record.jsonl")
	modes := strings.Join([]string{urlAgent, urlPlan, urlAutopilot}, ",")
	args := []string{"-modes", modes, "-config-option", "allow_all:permissions=off|on",
		"-permission", "execute:echo acpflow-verify", "-permission", "edit:verify-write.txt"}
	args = append(args, extra...)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	// Under sandbox: true the record file is not writable: that turn runs
	// unrecorded (acpflowEnv still finds any process left of the test
	// agent's binary).
	rec := "'" + record + "'"
	script := "#!/bin/sh\nif (: >> " + rec + ") 2>/dev/null; then exec " + testAgent + " -record " + rec + " " + strings.Join(quoted, " ") +
		"\nfi\nexec " + testAgent + " " + strings.Join(quoted, " ") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "copilot"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, record
}

// verifyCopilot runs `acpflow agents verify copilot --json` with binDir
// first on PATH and decodes its report.
//
// The user's HOME and config directories are fresh ones that must stay
// empty: verify writes nothing there.
func verifyCopilot(t *testing.T, binDir string) (result, map[string]any) {
	t.Helper()
	home := t.TempDir()
	set := map[string]string{"PATH": binDir + ":" + os.Getenv("PATH"), "HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, ".config")}
	r := acpflowEnv(t, t.TempDir(), set, nil, "agents", "verify", "copilot", "--json")
	if left, _ := os.ReadDir(home); len(left) > 0 {
		t.Errorf("verify wrote under the user's HOME: %v", left)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("verify printed %q (exit %d): %v\n%s", r.stdout, r.code, err, r.stderr)
	}
	return r, rep
}

// The class is "an agent that no longer behaves as its preset expects, in
// each way verify checks": exit 1, the change named; a faithful one exits 0.
func TestAgentsVerifyNamesWhatChanged(t *testing.T) {
	for _, tt := range []struct {
		name  string
		extra []string
		want  string // in a changed entry; "" for none
	}{
		{"a faithful agent verifies clean", nil, ""},
		{"one that starts in autopilot", []string{"-modes", urlAutopilot + "," + urlAgent + "," + urlPlan}, `starts in mode "` + urlAutopilot + `"`},
		{"one that switches mid-turn", []string{"-switch-mode", urlPlan}, "switched on its own during a turn: " + urlPlan + " -> " + urlAgent},
		{"one that runs a command unasked", []string{"-unasked", "execute:rm -rf build"}, "ran a tool call without asking: execute rm -rf build"},
		{"one that offers a widening option", []string{"-config-option", "yolo:permissions=off|on"}, "would widen a grant: yolo=on"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bin, record := fakeCopilot(t, tt.extra...)
			r, rep := verifyCopilot(t, bin)
			assertAgentsGone(t, record)
			changed := fmt.Sprint(rep["changed"])
			switch {
			case tt.want == "" && (r.code != 0 || changed != "[]"):
				t.Fatalf("exit %d, changed %s; want 0 and nothing\n%s", r.code, changed, r.stdout)
			case tt.want != "" && (r.code != 1 || !strings.Contains(changed, tt.want)):
				t.Fatalf("exit %d, changed %s; want 1 naming %q", r.code, changed, tt.want)
			}
			if rep["installed"] != true || rep["sandbox"] != "ok" {
				t.Errorf("report %v", rep)
			}
		})
	}
}

// A preset whose program is not installed is reported, not failed, and
// the text output names what is missing.
func TestAgentsVerifyReportsAnAgentNotInstalled(t *testing.T) {
	empty := t.TempDir()
	r := acpflowEnv(t, t.TempDir(), map[string]string{"PATH": empty + ":/usr/bin:/bin"}, nil, "agents", "verify", "copilot")
	if r.code != 0 || !strings.Contains(r.stdout, "copilot: not installed (no copilot on PATH)") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := acpflow(t, t.TempDir(), "agents", "verify", "nosuch"); r.code != 2 {
		t.Errorf("an unknown preset: exit %d, want 2\n%s", r.code, r.stderr)
	}
	// goose is a preset (acpflow agents lists it) that verify cannot drive:
	// the error says so instead of calling it unknown.
	if r := acpflow(t, t.TempDir(), "agents", "verify", "goose"); r.code != 2 ||
		strings.Contains(r.stderr, "unknown preset") || !strings.Contains(r.stderr, `preset "goose": verify knows no offline setup`) {
		t.Errorf("goose: exit %d, want 2 saying verify cannot drive it\n%s", r.code, r.stderr)
	}
}
