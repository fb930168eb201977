//go:build realagents

package realagents_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// The scenarios of issue 9, run on every agent that completes whole turns
// (claude, codex, gemini): what the permission policy decides is what the
// agent does, and nothing is left running after any of them.

// turnAgentNames lists the registered turn agents in a stable order.
func turnAgentNames() []string {
	var names []string
	for n := range turnAgents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// forEachTurnAgent runs f as a parallel subtest per agent.
func forEachTurnAgent(t *testing.T, f func(t *testing.T, s *sandbox, ta *turnAgent)) {
	for _, name := range turnAgentNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, newSandbox(t), turnAgents[name])
		})
	}
}

// readmeRules is the README's permission policy: reads allowed, rm
// rejected wherever it hides in a command line, edits allowed only inside
// the workspace, other commands allowed.
const readmeRules = `permission:
  rules:
    - if: tool.kind in ["read", "search", "think"]
      then: allow
    - if: 'any(commands(tool.command), # startsWith "rm ")'
      then: reject
      reason: destructive command
    - if: tool.kind == "edit" && all(tool.locations, .in_workspace)
      then: allow
    - if: tool.kind == "execute"
      then: allow
  default: reject`

// rmSpellings are ways to write the same rm of build/: each must be
// rejected by the README's rule on every agent.
var rmSpellings = []string{
	"rm -rf build",
	"make --version >/dev/null; rm -rf build",
	"true && rm -rf build",
	"FOO=1 rm -rf build",
	`"rm" -rf build`,
	`\rm -rf build`,
	"/bin/rm -rf build",
	"rm\t-rf build",
	"env rm -rf build",
	"timeout 5 rm -rf build",
	"nohup rm -rf build",
	"bash -c 'rm -rf build'",
	"sh -lc 'cd . && rm -rf build'",
	"echo $(rm -rf build)",
}

func TestTheREADMERuleRejectsRmInEverySpellingAndEditsOutsideTheWorkspace(t *testing.T) {
	forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
		keep := filepath.Join(s.dir, "build", "keep.txt")
		mustWrite(t, keep, "precious\n")
		outside := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(s.dir, "link")); err != nil {
			t.Fatal(err)
		}
		edits := modelserver.Script{
			{Say: "Writing inside.", Write: &modelserver.Write{Path: filepath.Join(s.dir, "inside.txt"), Content: "inside\n"}},
			{Say: "Writing outside.", Write: &modelserver.Write{Path: filepath.Join(s.dir, "missing", "..", "link", "evil.txt"), Content: "evil\n"}},
			{Say: "FINAL done"},
		}
		// One turn for all, or, for an agent that ends its turn on a
		// rejection (codex), one turn per command.
		var scripts []modelserver.Script
		if ta.endsTurnOnReject {
			for _, cmd := range rmSpellings {
				scripts = append(scripts, modelserver.Script{{Say: "Running a command.", Shell: cmd}, {Say: "FINAL done"}})
			}
			scripts = append(scripts, edits)
		} else {
			var all modelserver.Script
			for _, cmd := range rmSpellings {
				all = append(all, modelserver.Reply{Say: "Running a command.", Shell: cmd})
			}
			scripts = append(scripts, append(all, edits...))
		}
		rejected := map[string]bool{}
		var editsSeen []map[string]any
		refusedItself := false // the agent refused the outside write without asking
		for _, script := range scripts {
			step, _, r, reqs := s.turn(ta, script, "Run the script.", readmeRules, "")
			for _, q := range reqs {
				refusedItself = refusedItself || (ta.refusesOutside != "" && strings.Contains(string(q.Body), ta.refusesOutside))
			}
			t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error))
			for _, p := range step.Permissions {
				t.Logf("permission: kind %v command %q locations %v → %v/%v rule %v (%v)", p["kind"], p["command"], p["locations"], p["decision"], p["outcome"], p["rule"], p["reason"])
				switch p["kind"] {
				case "execute":
					if p["decision"] != "reject" || p["rule"] != "2" {
						t.Errorf("command %q: decision %v by rule %v, want reject by rule 2", p["command"], p["decision"], p["rule"])
					}
					rejected[fmt.Sprint(p["command"])] = true
				case "edit":
					if p["decision"] == "unasked" && p["status"] == "failed" {
						// A write the agent refused itself (gemini), reported
						// failed: on the record, run by no one.
						continue
					}
					editsSeen = append(editsSeen, p)
				}
			}
		}
		for _, cmd := range rmSpellings {
			if !rejected[cmd] {
				t.Errorf("%q never reached the policy as that command line", cmd)
			}
		}
		if b, err := os.ReadFile(keep); err != nil || string(b) != "precious\n" {
			t.Errorf("build/keep.txt is gone (%v): an rm got through", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "evil.txt")); err == nil {
			t.Error("evil.txt was written outside the workspace, through a missing directory and an outward symlink")
		}
		switch {
		case refusedItself && len(editsSeen) == 1 && editsSeen[0]["decision"] == "allow":
			t.Logf("the agent refused the outside write itself (%q), without asking", ta.refusesOutside)
		case len(editsSeen) != 2 || editsSeen[0]["decision"] != "allow" || editsSeen[1]["decision"] != "reject":
			t.Errorf("edits %v: want the inside one allowed, the outside one rejected", editsSeen)
		}
		if b, err := os.ReadFile(filepath.Join(s.dir, "inside.txt")); err != nil || string(b) != "inside\n" {
			t.Errorf("the edit inside the workspace did not happen: %q %v", b, err)
		}
	})
}

func TestRejectAndCancelKeepTheCommandFromRunning(t *testing.T) {
	for _, decision := range []string{"reject", "cancel"} {
		t.Run(decision, func(t *testing.T) {
			forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
				script := modelserver.Script{
					{Say: "Creating a file.", Shell: "mkdir -p made && echo hi > made/shell.txt"},
					{Say: "FINAL done"},
				}
				step, _, r, _ := s.turn(ta, script, "Run the script.", "permission: "+decision, "")
				t.Logf("exit %d; step %s/%s: %s", r.code, step.Status, step.StopReason, firstLine(step.Error))
				if _, err := os.Stat(filepath.Join(s.dir, "made", "shell.txt")); err == nil {
					t.Errorf("the command ran despite %s", decision)
				}
				if len(step.Permissions) == 0 {
					t.Fatal("no permission was asked")
				}
				p := step.Permissions[0]
				wantOutcome := map[string]string{"reject": "selected", "cancel": "cancelled"}[decision]
				if p["decision"] != decision || p["outcome"] != wantOutcome || p["rule"] != "shorthand" {
					t.Errorf("record %v, want decision %s, outcome %s, rule shorthand", p, decision, wantOutcome)
				}
			})
		})
	}
}

func TestAStepTimeoutMidTurnTearsTheAgentDown(t *testing.T) {
	forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
		script := modelserver.Script{{Hang: true}}
		// The timeout counts the agent's start too: claude's session/new
		// took over 8 s on a loaded 2-CPU machine (five agents' suites in
		// parallel).
		step, es, r, _ := s.turn(ta, script, "Think forever.", "", "timeout: 25s")
		t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error))
		if r.code != 1 || step.Status != "failed" || step.StopReason != "aborted" || !strings.Contains(step.Error, "step timed out after 25s") {
			t.Errorf("exit %d, step %s/%s %q; want 1, failed/aborted, timed out", r.code, step.Status, step.StopReason, step.Error)
		}
		if update(es, "cancel_sent") == nil {
			t.Error("no session/cancel was sent")
		}
		if td := update(es, "teardown"); td == nil || td["error"] != nil {
			t.Errorf("teardown = %v", td)
		}
	})
}

func TestCtrlCMidTurnExits130WithNothingLeft(t *testing.T) {
	forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
		srv, err := modelserver.Start(modelserver.Script{{Hang: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		path := s.writeTurnWorkflow(ta, srv, "Think forever.", "", "")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, acpflowBin, "run", path, "--workspace", s.dir, "--state", filepath.Join(s.dir, "state.db"))
		cmd.Dir = s.dir
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Interrupt once the agent is mid-turn: its model request is hanging.
		deadline := time.Now().Add(2 * time.Minute)
		for len(srv.Requests()) == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		begin := time.Now()
		cmd.Process.Signal(syscall.SIGINT)
		err = cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		t.Logf("exit %d %s after SIGINT (%v)", code, time.Since(begin).Round(time.Millisecond), err)
		if code != 130 {
			t.Errorf("exit %d, want 130\n%s", code, out.String())
		}
	})
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
