//go:build realagents

package realagents_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// opencode: agentsetup's test HOME only points it at the model server (a
// provider of the openai-compatible kind, Chat Completions); what makes it
// ask (OPENCODE_PERMISSION and OPENCODE_CONFIG_CONTENT) comes from `preset:
// opencode`, as for a user.
func init() {
	turnAgents["opencode"] = &turnAgent{
		name: "opencode",
		// A rejected call ends its turn (stopReason end_turn, no further
		// model request), measured on 1.18.33.
		endsTurnOnReject: true,
	}
}

func TestOpencodeCompletesAWholeTurn(t *testing.T) {
	t.Parallel()
	wholeTurn(t, "opencode")
}

func TestOpencodeAsksForEveryCommandAndWrite(t *testing.T) {
	t.Parallel()
	asksForEverything(t, "opencode")
}

// wholeTurn runs a shell command, a write and a final answer on agent name
// under `permission: allow`, and checks that both calls asked, ran, and
// that the answer arrived. It logs the wall from the model's last answer
// to acpflow's exit.
func wholeTurn(t *testing.T, name string) {
	s := newSandbox(t)
	script := modelserver.Script{
		{Say: "Step 1: Bash.", Shell: "mkdir -p d && echo hi > d/shell.txt"},
		{Say: "Step 2: Write.", Write: &modelserver.Write{Path: filepath.Join(s.dir, "written.txt"), Content: "written by " + name + "\n"}},
		{Say: "FINAL done", Chunks: 3},
	}
	step, es, r, reqs := s.turn(needTurnAgent(t, name), script, "Do the two steps.", "permission: allow", "")
	exited := time.Now()
	t.Logf("exit %d in %s; step %s/%s; output %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, step.Output)
	for _, q := range reqs {
		t.Logf("model request %s %s reply %d (%d bytes)", q.API, q.Path, q.Reply, len(q.Body))
	}
	kinds := map[any]int{}
	for _, p := range step.Permissions {
		t.Logf("permission: kind %v, title %q, command %q, decision %v, outcome %v, option %v", p["kind"], p["title"], p["command"], p["decision"], p["outcome"], p["option_id"])
		kinds[p["kind"]]++
		if p["decision"] != "allow" {
			t.Errorf("permission %v: want allow", p)
		}
	}
	if r.code != 0 || step.Status != "succeeded" || step.StopReason != "completed" {
		t.Errorf("exit %d, step %s/%s; want 0, succeeded/completed: %s\nstderr:\n%s", r.code, step.Status, step.StopReason, step.Error, r.stderr)
	}
	if !strings.Contains(step.Output, "FINAL done") {
		t.Errorf("output %q lacks the final answer", step.Output)
	}
	for _, f := range []string{"d/shell.txt", "written.txt"} {
		if _, err := os.Stat(filepath.Join(s.dir, f)); err != nil {
			t.Errorf("the turn did not create %s: %v", f, err)
		}
	}
	if kinds["execute"] != 1 || kinds["edit"] != 1 {
		t.Errorf("permission requests by kind %v; want one execute and one edit", kinds)
	}
	var last time.Time
	for _, e := range es {
		if e["kind"] == "agent_message_chunk" {
			if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["time"])); err == nil {
				last = at
			}
		}
	}
	if !last.IsZero() {
		t.Logf("from the model's last answer to acpflow's exit: %s", exited.Sub(last).Round(time.Millisecond))
	}
	if e := update(es, "teardown"); e != nil {
		t.Logf("teardown: tier %v in %v ms", e["tier"], e["duration_ms"])
	}
}

// asksForEverything checks, with the preset alone, that commands the agent
// runs unasked in its defaults (echo, ls, cat, git status) ask; that the
// README's rule rejects `rm -rf build`, which then does not run; and that
// `permission: reject` stops a write. A call that ran unasked would fail
// the step (unasked: fail, the default under any policy but allow).
func asksForEverything(t *testing.T, name string) {
	ta := needTurnAgent(t, name)
	t.Run("read-only commands ask", func(t *testing.T) {
		s := newSandbox(t)
		script := modelserver.Script{
			{Shell: "echo hello"}, {Shell: "ls"}, {Shell: "cat shell.txt"}, {Shell: "git status"},
			{Say: "FINAL done"},
		}
		mustWrite(t, filepath.Join(s.dir, "shell.txt"), "hi\n")
		step, _, r, _ := s.turn(ta, script, "Go.", "permission:\n  default: allow\n  unasked: fail", "")
		var got []string
		for _, p := range step.Permissions {
			got = append(got, fmt.Sprintf("%v %v: %v", p["kind"], p["command"], p["decision"]))
		}
		t.Logf("exit %d in %s; step %s/%s; permissions %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, got)
		want := []string{"execute echo hello: allow", "execute ls: allow", "execute cat shell.txt: allow", "execute git status: allow"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("permissions %q\nwant %q", got, want)
		}
		if r.code != 0 || step.Status != "succeeded" {
			t.Errorf("exit %d, step %s/%s: %s", r.code, step.Status, step.StopReason, step.Error)
		}
	})
	t.Run("the README rule stops rm", func(t *testing.T) {
		s := newSandbox(t)
		keep := filepath.Join(s.dir, "build", "keep.txt")
		mustWrite(t, keep, "precious\n")
		script := modelserver.Script{{Say: "Cleaning.", Shell: "rm -rf build"}, {Say: "FINAL done"}}
		step, _, r, _ := s.turn(ta, script, "Clean.", readmeRules, "")
		t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error))
		if len(step.Permissions) != 1 {
			t.Fatalf("permissions %v; want the rm's", step.Permissions)
		}
		p := step.Permissions[0]
		t.Logf("permission: %v", p)
		if p["kind"] != "execute" || p["command"] != "rm -rf build" || p["decision"] != "reject" || p["rule"] != "2" {
			t.Errorf("record %v; want execute rm -rf build, reject by rule 2", p)
		}
		if b, err := os.ReadFile(keep); err != nil || string(b) != "precious\n" {
			t.Errorf("build/keep.txt is gone (%v)", err)
		}
	})
	t.Run("reject stops a write", func(t *testing.T) {
		s := newSandbox(t)
		target := filepath.Join(s.dir, "written.txt")
		script := modelserver.Script{{Say: "Writing.", Write: &modelserver.Write{Path: target, Content: "no\n"}}, {Say: "FINAL done"}}
		step, _, r, _ := s.turn(ta, script, "Write.", "permission: reject", "")
		t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, firstLine(step.Error))
		if len(step.Permissions) != 1 {
			t.Fatalf("permissions %v; want the write's", step.Permissions)
		}
		p := step.Permissions[0]
		t.Logf("permission: %v", p)
		if p["kind"] != "edit" || p["decision"] != "reject" {
			t.Errorf("record %v; want edit, reject", p)
		}
		if _, err := os.Stat(target); err == nil {
			t.Error("the write happened despite reject")
		}
	})
}
