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

// codex-acp 2.6.0: its config file (the model server as a custom provider,
// model gpt-5.5) is agentsetup's; what makes it ask (INITIAL_AGENT_MODE
// read-only, and that mode set after session/new) is the preset's, applied
// by `preset: codex` as for a user.
func init() {
	turnAgents["codex"] = &turnAgent{
		name: "codex",
		// Its reject option (id "cancel", "No, and tell Codex what to do
		// differently") ends the turn with stopReason cancelled.
		endsTurnOnReject: true,
	}
}

// codexPermissions logs the step's permission records and returns them
// keyed by kind, in order.
func codexPermissions(t *testing.T, step turnResult) (kinds []string) {
	t.Helper()
	for _, p := range step.Permissions {
		t.Logf("permission: kind %v command %q locations %v → %v/%v option %v rule %v (%v)",
			p["kind"], p["command"], p["locations"], p["decision"], p["outcome"], p["option_id"], p["rule"], p["reason"])
		kinds = append(kinds, p["kind"].(string))
	}
	return kinds
}

// allowedOnceOrUnasked reports whether a record under allow or
// allow_always is a request answered allow_once, or a call codex's
// workspace-write mode ran unasked that the policy would have allowed.
func allowedOnceOrUnasked(p map[string]any) bool {
	if p["decision"] == "unasked" {
		return (p["would"] == "allow" || p["would"] == "allow_always") && p["status"] == "completed"
	}
	return p["outcome"] == "selected" && p["option_id"] == "allow_once"
}

func fileIs(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("%s: %q, %v; want %q", filepath.Base(path), b, err, want)
	}
}

func TestCodexCompletesAWholeTurn(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ta := needTurnAgent(t, "codex")
	script := modelserver.Script{
		{Say: "Step 1: Bash.", Shell: "echo made-by-shell > shell.txt"},
		{Say: "Step 2: Write.", Write: &modelserver.Write{Path: "written.txt", Content: "made by apply_patch\n"}},
		{Say: "FINAL done"},
	}
	begin := time.Now()
	res, es, r, reqs := s.turn(ta, script, "Create two files.", "permission: allow", "")
	t.Logf("exit %d in %s; step %s/%s in %d ms; output %q", r.code, r.elapsed.Round(time.Millisecond), res.Status, res.StopReason, res.DurationMS, res.Output)
	if r.code != 0 || res.Status != "succeeded" || res.StopReason != "completed" {
		t.Errorf("exit %d, step %s/%s; want 0, succeeded/completed\nerror: %s\nstderr:\n%s", r.code, res.Status, res.StopReason, res.Error, r.stderr)
	}
	if !strings.Contains(res.Output, "FINAL done") {
		t.Errorf("output %q does not end the script", res.Output)
	}
	fileIs(t, filepath.Join(s.dir, "shell.txt"), "made-by-shell\n")
	fileIs(t, filepath.Join(s.dir, "written.txt"), "made by apply_patch\n")

	served := map[int]bool{}
	for _, q := range reqs {
		t.Logf("model request: %s %s → reply %d", q.API, q.Path, q.Reply)
		served[q.Reply] = true
	}
	for i := range script {
		if !served[i] {
			t.Errorf("the model server never served reply %d", i)
		}
	}
	for _, e := range es {
		if e["type"] == "teardown" {
			t.Logf("teardown: %v", e)
		}
	}
	t.Logf("run took %s in all", time.Since(begin).Round(time.Millisecond))

	// Both tool calls are on the record: under allow codex runs in
	// workspace-write (the preset's AllowMode), where the command asked
	// and allow chose "once", and the patch in the workspace was applied
	// unasked, recorded as the policy would have allowed it.
	if kinds := codexPermissions(t, res); strings.Join(kinds, ",") != "execute,edit" {
		t.Errorf("permissions recorded for %v; want execute, then edit", kinds)
	}
	for _, p := range res.Permissions {
		if !allowedOnceOrUnasked(p) {
			t.Errorf("permission %v: want allow, selected, allow_once, or unasked that the policy would allow", p)
		}
	}
	if len(res.Permissions) == 2 {
		if c := res.Permissions[0]["command"]; c != "echo made-by-shell > shell.txt" {
			t.Errorf("the execute record's command = %q, want the model's command line", c)
		}
	}
}

// Under the README's rules a command and a patch inside the workspace are
// allowed and really run (the command outside codex's sandbox), and rm
// -rf build reaches the policy and is rejected: codex ends the turn there
// (its reject option cancels the turn), so build/ is still there.
func TestCodexREADMERuleRunsTheAllowedAndStopsRm(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ta := needTurnAgent(t, "codex")
	mustWrite(t, filepath.Join(s.dir, "build", "keep.txt"), "precious\n")
	script := modelserver.Script{
		{Say: "A command.", Shell: "echo ok > ok.txt"},
		{Say: "A patch.", Write: &modelserver.Write{Path: "patched.txt", Content: "patched\n"}},
		{Say: "Cleaning.", Shell: "rm -rf build"},
		{Say: "FINAL done"},
	}
	res, _, r, _ := s.turn(ta, script, "Run the script.", readmeRules, "")
	t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), res.Status, res.StopReason, firstLine(res.Error))
	fileIs(t, filepath.Join(s.dir, "ok.txt"), "ok\n")
	fileIs(t, filepath.Join(s.dir, "patched.txt"), "patched\n")
	fileIs(t, filepath.Join(s.dir, "build", "keep.txt"), "precious\n")
	if kinds := codexPermissions(t, res); strings.Join(kinds, ",") != "execute,edit,execute" {
		t.Fatalf("permissions asked for %v; want execute, edit, execute", kinds)
	}
	want := []struct{ decision, option, rule string }{{"allow", "allow_once", "4"}, {"allow", "allow_once", "3"}, {"reject", "cancel", "2"}}
	for i, w := range want {
		p := res.Permissions[i]
		if p["decision"] != w.decision || p["option_id"] != w.option || p["rule"] != w.rule {
			t.Errorf("permission %d: %v; want %s by rule %s, option %s", i, p, w.decision, w.rule, w.option)
		}
	}
	if res.Permissions[2]["command"] != "rm -rf build" {
		t.Errorf("the rm record's command = %q", res.Permissions[2]["command"])
	}
	if res.Status == "succeeded" || res.StopReason != "aborted" {
		t.Errorf("step %s/%s; want it not to succeed, aborted: codex ended the turn on the rejection", res.Status, res.StopReason)
	}
}

// Under permission: reject a patch reaches the policy and is not applied.
func TestCodexRejectStopsAPatch(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ta := needTurnAgent(t, "codex")
	script := modelserver.Script{
		{Say: "A patch.", Write: &modelserver.Write{Path: "patched.txt", Content: "patched\n"}},
		{Say: "FINAL done"},
	}
	res, _, r, _ := s.turn(ta, script, "Run the script.", "permission: reject", "")
	t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), res.Status, res.StopReason, firstLine(res.Error))
	if _, err := os.Stat(filepath.Join(s.dir, "patched.txt")); err == nil {
		t.Error("the rejected patch was applied")
	}
	if kinds := codexPermissions(t, res); strings.Join(kinds, ",") != "edit" {
		t.Fatalf("permissions asked for %v; want one edit", kinds)
	}
	if p := res.Permissions[0]; p["decision"] != "reject" || p["option_id"] != "cancel" {
		t.Errorf("permission %v: want reject, option cancel", p)
	}
}

// allow_always never selects codex's "always" options: both say "don't ask
// again" (for a command, a prefix_rule codex would append to
// $HOME/.codex/rules/default.rules for good; for a patch, the files for the
// session), so it answers allow_once and codex writes no rule.
func TestCodexAllowAlwaysWritesNoRule(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ta := needTurnAgent(t, "codex")
	script := modelserver.Script{
		{Say: "A command.", Shell: "echo a > a.txt"},
		{Say: "A patch.", Write: &modelserver.Write{Path: "b.txt", Content: "b\n"}},
		{Say: "FINAL done"},
	}
	res, _, r, _ := s.turn(ta, script, "Run the script.", "permission: allow_always", "")
	t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), res.Status, res.StopReason, firstLine(res.Error))
	fileIs(t, filepath.Join(s.dir, "a.txt"), "a\n")
	fileIs(t, filepath.Join(s.dir, "b.txt"), "b\n")
	if kinds := codexPermissions(t, res); strings.Join(kinds, ",") != "execute,edit" {
		t.Errorf("permissions recorded for %v; want execute, edit", kinds)
	}
	for _, p := range res.Permissions {
		if !allowedOnceOrUnasked(p) {
			t.Errorf("permission %v: want option allow_once, or unasked (a patch in workspace-write)", p)
		}
	}
	rules := filepath.Join(s.home, ".codex", "rules")
	if ents, err := os.ReadDir(rules); err == nil {
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(rules, e.Name()))
			t.Errorf("codex wrote %s: %s", e.Name(), b)
		}
	}
}

// A command the model sends without asking to leave codex's sandbox runs
// unasked, inside codex's read-only sandbox: it cannot write. This is the
// preset's Unasked.
func TestCodexRunsAnUnescalatedCommandInItsReadOnlySandbox(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ta := needTurnAgent(t, "codex")
	// The sleep is for codex 0.166: a command its sandbox denies within
	// a few milliseconds is reported to nobody (no item, so no ACP
	// tool_call: measured with touch and echo > file); one that runs
	// longer is reported and then fails. acpflow can record only what the
	// agent reports.
	script := modelserver.Script{
		{Say: "A sandboxed command.", Shell: "sleep 0.5; echo sb > sb.txt", Sandboxed: true},
		{Say: "FINAL done"},
	}
	// Under reject the asking mode (read-only) stays: the unescalated
	// command runs without a request, fails in codex's sandbox, and is on
	// the record all the same (SPEC §10), without failing the step.
	res, _, r, _ := s.turn(ta, script, "Run the script.", "permission: reject", "")
	t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), res.Status, res.StopReason, firstLine(res.Error))
	if _, err := os.Stat(filepath.Join(s.dir, "sb.txt")); err == nil {
		t.Error("the unasked command wrote sb.txt: codex's sandbox did not hold")
	}
	unasked := 0
	for _, p := range res.Permissions {
		t.Logf("permission: %v", p)
		if p["outcome"] == "selected" {
			t.Errorf("codex asked for the unescalated command: %v", p)
		}
		if p["decision"] == "unasked" && p["status"] == "failed" && strings.Contains(fmt.Sprint(p["command"]), "echo sb") {
			unasked++
		}
	}
	if unasked != 1 {
		t.Errorf("want the failed command recorded once as unasked with status failed")
	}
	if res.Status != "succeeded" {
		t.Errorf("step %s: %s; a call that failed must not fail it", res.Status, res.Error)
	}
}

// Under permission: allow codex runs in a mode in which an allowed command
// runs (the preset's AllowMode): rm -rf build, which its read-only mode's
// sandbox fails even once allowed, removes build/.
func TestCodexUnderAllowRunsAnAllowedRm(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ta := needTurnAgent(t, "codex")
	mustWrite(t, filepath.Join(s.dir, "build", "old.txt"), "stale\n")
	script := modelserver.Script{
		{Say: "Cleaning.", Shell: "rm -rf build"},
		{Say: "FINAL done"},
	}
	res, es, r, _ := s.turn(ta, script, "Clean.", "permission: allow", "")
	t.Logf("exit %d in %s; step %s/%s: %s", r.code, r.elapsed.Round(time.Millisecond), res.Status, res.StopReason, firstLine(res.Error))
	codexPermissions(t, res)
	for _, e := range es {
		if e["kind"] == "session_configured" {
			t.Logf("session configured: %v", e)
		}
	}
	if _, err := os.Stat(filepath.Join(s.dir, "build")); err == nil {
		t.Error("build/ is still there: the allowed rm did not run")
	}
	if r.code != 0 {
		t.Errorf("exit %d: %s", r.code, res.Error)
	}
}

// A failed model call reaches the step as a failure with the model's
// message: codex reports it as message text, stop reason end_turn, and a
// session_info_update whose _meta.codex.threadStatus.type is systemError.
func TestCodexModelErrorFailsTheStep(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	ta := needTurnAgent(t, "codex")
	script := modelserver.Script{{Error: "scripted failure: the model is overloaded"}}
	res, _, r, _ := s.turn(ta, script, "Say hi.", "permission: allow", "")
	t.Logf("exit %d in %s; step %s/%s: %s; output %q", r.code, r.elapsed.Round(time.Millisecond), res.Status, res.StopReason, res.Error, res.Output)
	if r.code == 0 || res.Status != "failed" {
		t.Errorf("exit %d, step %s; want a failed step", r.code, res.Status)
	}
	if !strings.Contains(res.Error, "scripted failure: the model is overloaded") {
		t.Errorf("error %q does not carry the model's message", res.Error)
	}
	if strings.Contains(res.Final, "scripted failure") {
		t.Errorf("final %q is the model error's body: it is the step's error, not its answer", res.Final)
	}
}
