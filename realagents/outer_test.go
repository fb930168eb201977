//go:build realagents

package realagents_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// The outer policy (issue 15 part 2) on every agent that completes whole
// turns: a file given as --policy rejects a shell command the workflow's
// own policy allows, the command does not run, and the record says the
// outer layer decided; a command the outer file leaves to the workflow
// runs, decided by the workflow's policy.

// orgPolicy forbids any command that touches made/, and leaves the rest
// to the workflow.
const orgPolicy = `permission:
  rules:
    - if: 'tool.command contains "made"'
      then: reject
      reason: the organisation forbids it
  default: allow
`

func TestAnOuterPolicyRejectsAShellCommandTheWorkflowAllows(t *testing.T) {
	forEachTurnAgent(t, func(t *testing.T, s *sandbox, ta *turnAgent) {
		outer := filepath.Join(s.dir, "org", "policy.yaml")
		mustWrite(t, outer, orgPolicy)
		// The command the outer policy leaves to the workflow comes first:
		// codex ends its turn at the rejection.
		script := modelserver.Script{
			{Say: "Creating a file.", Shell: "mkdir -p ok && echo yes > ok/allowed.txt"},
			{Say: "Creating another.", Shell: "mkdir -p made && echo hi > made/shell.txt"},
			{Say: "FINAL done"},
		}
		step, es, r, _ := s.turn(ta, script, "Run the script.", "permission: allow", "", "--policy", outer)
		t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error))
		if _, err := os.Stat(filepath.Join(s.dir, "made", "shell.txt")); err == nil {
			t.Error("made/shell.txt exists: the command the outer policy rejected ran")
		}
		if b, err := os.ReadFile(filepath.Join(s.dir, "ok", "allowed.txt")); err != nil || string(b) != "yes\n" {
			t.Errorf("ok/allowed.txt = %q, %v: the command the workflow allowed did not run", b, err)
		}
		var rejected, allowed map[string]any
		for _, p := range step.Permissions {
			t.Logf("permission: kind %v command %q → %v/%v layer %v policy %v rule %v (%v)", p["kind"], p["command"], p["decision"], p["outcome"], p["layer"], p["policy"], p["rule"], p["reason"])
			switch {
			case p["kind"] != "execute":
			case p["decision"] == "reject":
				rejected = p
			case p["decision"] == "allow":
				allowed = p
			}
		}
		if rejected == nil || rejected["layer"] != "outer" || rejected["policy"] != outer || rejected["rule"] != "1" || rejected["reason"] != "the organisation forbids it" {
			t.Errorf("the rejection %v: want it by the outer file's rule 1", rejected)
		}
		if allowed == nil || allowed["layer"] != "workflow" || allowed["policy"] != "workflow" || allowed["rule"] != "shorthand" {
			t.Errorf("the allow %v: want it by the workflow's shorthand", allowed)
		}
		for _, e := range es {
			if e["type"] == "permission" && e["decision"] == "reject" && e["layer"] != "outer" {
				t.Errorf("the permission event %v does not say the outer layer decided", e)
			}
		}
	})
}
