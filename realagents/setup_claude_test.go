//go:build realagents

package realagents_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/realagents/modelserver"
)

// claude-agent-acp: its env (the model server's URL, a dummy key, quiet
// settings) is agentsetup's.
func init() {
	turnAgents["claude"] = &turnAgent{name: "claude"}
}

func TestClaudeCompletesAWholeTurn(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	script := modelserver.Script{
		{Say: "Step 1: Bash.", Shell: "echo hi > shell.txt"},
		{Say: "Step 2: Write.", Write: &modelserver.Write{Path: "written.txt", Content: "written by claude\n"}},
		{Say: "FINAL done"},
	}
	step, es, r, reqs := s.turn(needTurnAgent(t, "claude"), script, "Run the script.", "permission: allow", "")
	t.Logf("exit %d in %s; step %s/%s in %d ms; output %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, step.DurationMS, step.Output)
	for _, q := range reqs {
		t.Logf("model server: %s %s → reply %d (%d bytes)", q.API, q.Path, q.Reply, len(q.Body))
	}
	if r.code != 0 || step.Status != "succeeded" || step.StopReason != "completed" {
		t.Fatalf("exit %d, step %s/%s: %s\nstderr:\n%s", r.code, step.Status, step.StopReason, step.Error, r.stderr)
	}
	if !strings.Contains(step.Output, "FINAL done") {
		t.Errorf("output %q lacks the final answer", step.Output)
	}
	for name, want := range map[string]string{"shell.txt": "hi\n", "written.txt": "written by claude\n"} {
		if b, err := os.ReadFile(filepath.Join(s.dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q: the tool did not run", name, b, err, want)
		}
	}
	// Claude Code asks for Bash and Write in its default mode; the policy
	// sees the command and the file as the agent sent them.
	var kinds []string
	for _, p := range step.Permissions {
		t.Logf("permission: %v", p)
		kinds = append(kinds, fmt.Sprint(p["kind"]))
		if p["decision"] != "allow" || p["outcome"] != "selected" || p["option_id"] != "allow" {
			t.Errorf("permission %v: want decision allow, outcome selected, option allow (allow_once)", p)
		}
	}
	if strings.Join(kinds, ",") != "execute,edit" {
		t.Fatalf("permission requests for %v, want execute (Bash) then edit (Write)", kinds)
	}
	if c := step.Permissions[0]["command"]; c != "echo hi > shell.txt" {
		t.Errorf("the execute record's command = %q, want the Bash command", c)
	}
	want := []any{map[string]any{"path": filepath.Join(s.dir, "written.txt"), "line": float64(0), "in_workspace": true}}
	if l := step.Permissions[1]["locations"]; !reflect.DeepEqual(l, want) {
		t.Errorf("the edit record's locations = %v, want %v", l, want)
	}
	n := 0
	for _, e := range es {
		if e["type"] == "permission" {
			n++
		}
	}
	if n != len(step.Permissions) {
		t.Errorf("%d permission events, %d records", n, len(step.Permissions))
	}
}
