//go:build realagents

package realagents_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/agentsetup"
	"github.com/acpflow/acpflow/internal/modelserver"
)

// GitHub Copilot CLI: agentsetup points it at the model server with its
// BYOK variables; what keeps it asking (its …#agent mode, pinned by the
// mode guard) comes from `preset: copilot`, as for a user.
func init() {
	turnAgents["copilot"] = &turnAgent{
		name: "copilot",
		// A rejected command (its option reject_once) ends its turn with
		// end_turn, measured on 1.0.102.
		endsTurnOnReject: true,
	}
}

func TestCopilotCompletesAWholeTurn(t *testing.T) {
	t.Parallel()
	wholeTurn(t, "copilot")
}

func TestCopilotAsksForEveryCommandAndWrite(t *testing.T) {
	t.Parallel()
	asksForEverything(t, "copilot")
}

// COPILOT_ALLOW_ALL=true makes Copilot approve everything itself while
// session/new still reports allow_all "off": under reject the preset drops
// it (with a warning that names it), so rm asks, is refused, and build/
// survives.
func TestCopilotAllowAllInItsEnvironmentIsDroppedUnderReject(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ta := *needTurnAgent(t, "copilot")
	ta.adjust = func(a *agentsetup.Agent) { a.Env = append(a.Env, "COPILOT_ALLOW_ALL=true") }
	keep := filepath.Join(s.dir, "build", "keep.txt")
	mustWrite(t, keep, "precious\n")
	script := modelserver.Script{{Say: "Cleaning.", Shell: "rm -rf build"}, {Say: "FINAL done"}}
	step, es, r, _ := s.turn(&ta, script, "Clean.", "permission: reject", "")
	t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error))
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("build/keep.txt is gone: rm ran (%v)", err)
	}
	asked := false
	for _, p := range step.Permissions {
		t.Logf("permission: %v", p)
		asked = asked || (p["command"] == "rm -rf build" && p["decision"] == "reject")
	}
	if !asked {
		t.Error("rm -rf build never reached the policy")
	}
	warned := false
	for _, e := range es {
		warned = warned || (e["kind"] == "warning" && strings.Contains(fmt.Sprint(e["message"]), "COPILOT_ALLOW_ALL was dropped"))
	}
	if !warned {
		t.Error("no warning says COPILOT_ALLOW_ALL was dropped")
	}
}

// Autopilot and allow_all: on, named in a workflow under reject, are
// refused before anything starts.
func TestCopilotAutopilotAndAllowAllAreRefusedUnderReject(t *testing.T) {
	s := newSandbox(t)
	for _, keys := range []string{
		`mode: "https://agentclientprotocol.com/protocol/session-modes#autopilot"`,
		`config: {allow_all: "on"}`,
	} {
		wf := s.writeWorkflowFile("name: m\nagents:\n  a: {preset: copilot, " + keys + "}\npolicies: {permission: reject}\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: go}\n")
		r := s.acpflow(time.Minute, "validate", wf)
		if r.code != 2 || !strings.Contains(r.stderr, "without asking") {
			t.Errorf("%s: exit %d, want 2 saying why\n%s", keys, r.code, r.stderr)
		}
	}
}
