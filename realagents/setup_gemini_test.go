//go:build realagents

package realagents_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// gemini-cli: agentsetup's test HOME only points it at the model server and
// keeps it quiet; what makes it ask (--approval-mode default and an admin
// policy file written per spawn) comes from `preset: gemini`, as for a
// user.
func init() {
	turnAgents["gemini"] = &turnAgent{
		name: "gemini",
		// It resolves symlinks itself (measured, 0.61.0): a write through
		// an outward link never reaches acpflow's policy.
		refusesOutside: "Path not in workspace",
	}
}

func TestGeminiCompletesAWholeTurn(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	script := modelserver.Script{
		{Say: "Step 1: Bash.", Shell: "mkdir -p d && echo hi > d/shell.txt"},
		{Say: "Step 2: Write.", Write: &modelserver.Write{Path: filepath.Join(s.dir, "written.txt"), Content: "written by gemini\n"}},
		{Say: "FINAL done", Chunks: 3},
	}
	step, es, r, reqs := s.turn(needTurnAgent(t, "gemini"), script, "Do the two steps.", "permission: allow", "")
	exited := time.Now() // within a millisecond or so of acpflow's exit
	t.Logf("exit %d in %s; step %s/%s; output %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, step.Output)
	for _, q := range reqs {
		t.Logf("model request %s %s reply %d (%d bytes)", q.API, q.Path, q.Reply, len(q.Body))
	}
	for _, p := range step.Permissions {
		t.Logf("permission: kind %v, title %q, decision %v, outcome %v, option %v", p["kind"], p["title"], p["decision"], p["outcome"], p["option_id"])
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
	kinds := map[any]int{}
	for _, p := range step.Permissions {
		kinds[p["kind"]]++
	}
	if kinds["execute"] != 1 || kinds["edit"] != 1 {
		t.Errorf("permission requests by kind %v; want one execute and one edit", kinds)
	}
	// The wall from the model's last answer (its last streamed chunk, as
	// acpflow saw it) to acpflow's exit: the turn's end, the EOF teardown
	// and the run's own end.
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

// With the preset alone (the test HOME holds no policy), commands gemini
// would run unasked (a plain echo or ls) reach acpflow's policy too, and a
// rejected one does not run.
func TestGeminiAsksForEveryShellCommandAndWrite(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	script := modelserver.Script{
		{Shell: "echo hello"},
		{Shell: "ls"},
		{Shell: "echo rejected > rejected.txt"},
		{Write: &modelserver.Write{Path: "relative.txt", Content: "x\n"}},
		{Say: "FINAL done"},
	}
	policy := `permission:
  rules:
    - if: tool.title contains "rejected"
      then: reject
  default: allow`
	step, _, r, _ := s.turn(needTurnAgent(t, "gemini"), script, "Go.", policy, "")
	titles := permissionTitles(step)
	t.Logf("exit %d in %s; step %s/%s; permissions %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, titles)
	want := []string{
		"execute echo hello: allow",
		"execute ls: allow",
		"execute echo rejected > rejected.txt: reject",
		"edit Writing to relative.txt: allow",
	}
	if !slices.Equal(titles, want) {
		t.Errorf("permission requests %q\nwant %q", titles, want)
	}
	if r.code != 0 || step.Status != "succeeded" || !strings.Contains(step.Output, "FINAL done") {
		t.Errorf("exit %d, step %s/%s, output %q: %s", r.code, step.Status, step.StopReason, step.Output, step.Error)
	}
	for f, want := range map[string]bool{"relative.txt": true, "rejected.txt": false} {
		if _, err := os.Stat(filepath.Join(s.dir, f)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", f, err == nil, want)
		}
	}
}

// What a user's own gemini settings may say to let it run alone does not
// stop it asking: with the workspace trusted, autoEdit as the default mode,
// shell and writes in tools.allowed and an allow-everything rule in
// ~/.gemini/policies, `permission: reject` still sees (and stops) an echo,
// an ls, `rm -rf build` and a write.
func TestGeminiAsksWhateverTheUsersSettingsAllow(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	mustWrite(t, filepath.Join(s.dir, "build", "keep.txt"), "x\n")
	script := modelserver.Script{
		{Shell: "echo hello > hello.txt"},
		{Shell: "ls"},
		{Shell: "rm -rf build"},
		{Write: &modelserver.Write{Path: "w.txt", Content: "x\n"}},
		{Say: "FINAL done"},
	}
	step, r := s.geminiTurn(script, "permission: reject", "", func(gemini string) {
		mergeJSON(t, filepath.Join(gemini, "settings.json"), map[string]any{
			"general": map[string]any{"defaultApprovalMode": "auto_edit"},
			"tools":   map[string]any{"allowed": []string{"run_shell_command", "write_file", "replace"}},
		})
		mustWrite(t, filepath.Join(gemini, "policies", "mine.toml"),
			"[[rule]]\ntoolName = \"*\"\ndecision = \"allow\"\npriority = 999\n")
	})
	titles := permissionTitles(step)
	t.Logf("exit %d in %s; step %s/%s; permissions %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, titles)
	want := []string{
		"execute echo hello > hello.txt: reject",
		"execute ls: reject",
		"execute rm -rf build: reject",
		"edit Writing to w.txt: reject",
	}
	if !slices.Equal(titles, want) {
		t.Errorf("permission requests %q\nwant %q\nstderr:\n%s", titles, want, r.stderr)
	}
	for f, want := range map[string]bool{"build/keep.txt": true, "hello.txt": false, "w.txt": false} {
		if _, err := os.Stat(filepath.Join(s.dir, f)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", f, err == nil, want)
		}
	}
}

// In yolo (set by `mode:` under `permission: allow`, where the mode guard
// lets it be), gemini still asks for every command and write: the preset's
// admin policy outranks yolo's allow-all.
func TestGeminiAsksEvenInYolo(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	script := modelserver.Script{
		{Shell: "echo hello > hello.txt"},
		{Write: &modelserver.Write{Path: "w.txt", Content: "x\n"}},
		{Say: "FINAL done"},
	}
	step, r := s.geminiTurn(script, "permission: allow", "mode: yolo", nil)
	titles := permissionTitles(step)
	t.Logf("exit %d in %s; step %s/%s; permissions %q; output %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, titles, step.Output)
	want := []string{"execute echo hello > hello.txt: allow", "edit Writing to w.txt: allow"}
	if !slices.Equal(titles, want) {
		t.Errorf("permission requests %q\nwant %q", titles, want)
	}
	if r.code != 0 || step.Status != "succeeded" {
		t.Errorf("exit %d, step %s/%s: %s\nstderr:\n%s", r.code, step.Status, step.StopReason, step.Error, r.stderr)
	}
}

// A user's security.enablePermanentToolApproval makes gemini offer "Allow
// … for all future sessions" (proceed_always_and_save, allow_always),
// which saves an allow rule into ~/.gemini/policies/auto-saved.toml:
// `permission: allow_always` must not pick it, nor write the user's HOME.
func TestGeminiAllowAlwaysSavesNothingInTheUsersHome(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	script := modelserver.Script{
		{Shell: "echo hello"},
		{Write: &modelserver.Write{Path: "w.txt", Content: "x\n"}},
		{Say: "FINAL done"},
	}
	step, r := s.geminiTurn(script, "permission: allow_always", "", func(gemini string) {
		mergeJSON(t, filepath.Join(gemini, "settings.json"), map[string]any{
			"security": map[string]any{"enablePermanentToolApproval": true, "auth": map[string]any{"selectedType": "gemini-api-key"}},
		})
	})
	var options []string
	for _, p := range step.Permissions {
		options = append(options, fmt.Sprintf("%v %v: %v", p["kind"], p["title"], p["option_id"]))
	}
	t.Logf("exit %d in %s; step %s/%s; options chosen %q", r.code, r.elapsed.Round(time.Millisecond), step.Status, step.StopReason, options)
	if len(options) != 2 {
		t.Errorf("permission requests %q, want the echo and the write", options)
	}
	for _, o := range options {
		if strings.HasSuffix(o, "proceed_always_and_save") {
			t.Errorf("allow_always picked %q: gemini saves it in the user's HOME", o)
		}
	}
	saved := filepath.Join(s.home, ".gemini", "policies", "auto-saved.toml")
	if b, err := os.ReadFile(saved); err == nil {
		t.Errorf("gemini wrote %s:\n%s", saved, b)
	}
}

// geminiTurn is turn on gemini with agentYAML under the agent (mode:, …)
// and home, if set, changing the test HOME's ~/.gemini (given as its path)
// after agentsetup wrote it. The workspace is trusted there, as a user's
// own project would be: otherwise gemini forces mode default anyway.
func (s *sandbox) geminiTurn(script modelserver.Script, policiesYAML, agentYAML string, home func(gemini string)) (turnResult, run) {
	s.t.Helper()
	srv, err := modelserver.Start(script)
	if err != nil {
		s.t.Fatal(err)
	}
	defer srv.Close()
	agentEntry := s.turnAgentYAML(needTurnAgent(s.t, "gemini"), srv, agentYAML)
	gemini := filepath.Join(s.home, ".gemini")
	trusted, _ := json.Marshal(map[string]string{s.dir: "TRUST_FOLDER"})
	mustWrite(s.t, filepath.Join(gemini, "trustedFolders.json"), string(trusted))
	if home != nil {
		home(gemini)
	}
	path := s.writeWorkflowFile(fmt.Sprintf(`name: turn
agents:
%s
policies:
%s
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: Go.}
`, agentEntry, indent(policiesYAML, "  ")))
	out := filepath.Join(s.dir, "results.jsonl")
	r := s.acpflow(4*time.Minute, "run", path, "--json", "--timeout", "180s",
		"--workspace", s.dir, "--state", filepath.Join(s.dir, "state.db"), "--output", out)
	var res struct {
		Steps map[string]turnResult `json:"steps"`
	}
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &res) != nil {
		wf, _ := os.ReadFile(path)
		s.t.Fatalf("no result in %s (exit %d): %v\nworkflow:\n%s\nstderr:\n%s", out, r.code, err, wf, r.stderr)
	}
	return res.Steps["s"], r
}

// permissionTitles lists a step's permission records as "KIND TITLE:
// DECISION".
func permissionTitles(step turnResult) []string {
	var titles []string
	for _, p := range step.Permissions {
		titles = append(titles, fmt.Sprintf("%v %v: %v", p["kind"], p["title"], p["decision"]))
	}
	return titles
}

// mergeJSON sets keys of the JSON object in path, merging objects.
func mergeJSON(t *testing.T, path string, set map[string]any) {
	t.Helper()
	m := map[string]any{}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
	}
	var merge func(dst, src map[string]any)
	merge = func(dst, src map[string]any) {
		for k, v := range src {
			if sv, ok := v.(map[string]any); ok {
				if dv, ok := dst[k].(map[string]any); ok {
					merge(dv, sv)
					continue
				}
			}
			dst[k] = v
		}
	}
	merge(m, set)
	b, _ := json.MarshalIndent(m, "", "  ")
	mustWrite(t, path, string(b))
}
