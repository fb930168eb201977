//go:build realagents

package flow

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/agentsetup"
	"github.com/acpflow/acpflow/internal/modelserver"
)

// The real agents (claude-agent-acp, codex-acp, gemini-cli, installed by
// realagents/install.sh) complete a whole turn against a scripted model
// server on Temporal as on the CLI: the same workflow file, the same
// result, the same file made in the workspace, the same decisions of the
// policy, and no process left.
func TestRealAgentsEndOnTemporalAsOnTheCLI(t *testing.T) {
	nodeModules, _ := filepath.Abs(filepath.Join("..", "..", "realagents", "node_modules"))
	if _, err := os.Stat(filepath.Join(nodeModules, ".bin")); err != nil {
		t.Fatalf("the real agents are not installed (bash realagents/install.sh): %v", err)
	}
	for _, name := range agentsetup.Names() {
		for _, policy := range []string{"allow", "reject"} {
			t.Run(name+"/"+policy, func(t *testing.T) { realTurn(t, nodeModules, name, policy) })
		}
	}
}

// realTurn runs one agent's turn under permission: policy, on the CLI's
// engine and on the in-memory Temporal, and compares them.
func realTurn(t *testing.T, nodeModules, name, policy string) {
	srv, err := modelserver.Start(modelserver.Script{
		{Say: "Step 1: Bash.", Shell: "echo made-on-a-worker > shell.txt"},
		{Say: "FINAL done"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	home := t.TempDir()
	a, err := agentsetup.Setup(name, nodeModules, home, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	mark := fmt.Sprintf("ACPFLOW_TEMPORAL_TEST_MARK=%s-%d", name, os.Getpid())
	env := map[string]string{}
	for _, kv := range append(a.Env, mark) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	envJSON, _ := json.Marshal(env)
	// As a user writes it: the preset, with the local install as its
	// command, so that the preset's own args, env, files and mode apply.
	f := newFixture(t, fmt.Sprintf(`name: real
agents:
  a:
    preset: %s
    command: %q
    env: %s
    %s
  demo: {builtin: demo}
policies:
  permission: %s
steps:
  - {id: s, uses: acp-subagent, timeout: 180s, with: {agent: a, prompt: "Create the file."}}
  - {id: after, needs: [s], if: 'steps.s.status == "succeeded"', uses: acp-subagent, with: {agent: demo, prompt: "${{ steps.s.final }}"}}
outputs:
  final: ${{ steps.s.final }}
`, name, a.Command, envJSON, a.YAML(), policy), nil)
	cliDir := filepath.Join(f.dir, "cli")
	os.Mkdir(cliDir, 0o755)
	cli := engine.Run(t.Context(), f.wf, engine.Options{RunID: "r1", Workspace: cliDir, Inputs: f.inputs})
	tmpDir := filepath.Join(f.dir, "temporal")
	os.Mkdir(tmpDir, 0o755)
	tenv := f.environment(t)
	req := f.request(t, "r1")
	req.Workspace = tmpDir
	tenv.ExecuteWorkflow(WorkflowName, req)
	tmp := f.result(t, tenv)
	f.settle(t)

	if got, want := realComparable(tmp), realComparable(cli); got != want {
		t.Errorf("on Temporal:\n%s\non the CLI:\n%s", got, want)
	}
	t.Logf("on both:\n%s", realComparable(tmp))
	perms := tmp.Steps["s"].Permissions
	if len(perms) == 0 || string(perms[0].Decision) != policy {
		t.Errorf("on Temporal the policy decided %v, want %s", perms, policy)
	}
	for _, dir := range []string{cliDir, tmpDir} {
		b, err := os.ReadFile(filepath.Join(dir, "shell.txt"))
		switch {
		case policy == "allow" && (err != nil || string(b) != "made-on-a-worker\n"):
			t.Errorf("%s/shell.txt: %q, %v", dir, b, err)
		case policy == "reject" && err == nil:
			t.Errorf("%s/shell.txt was made, though the policy rejected the command", dir)
		}
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// realComparable is what must agree between the engines for a real agent:
// statuses, stop reasons, the final messages and the kinds and decisions
// of the permission requests (their titles name the workspace).
func realComparable(res *engine.RunResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s %q outputs %v\n", res.Status, res.Error, res.Outputs)
	for _, id := range slices.Sorted(maps.Keys(res.Steps)) {
		st := res.Steps[id]
		fmt.Fprintf(&b, "%s: %s %s %q attempts %d;", id, st.Status, st.StopReason, st.Final, st.Attempts)
		for _, p := range st.Permissions {
			fmt.Fprintf(&b, " %s→%s", p.Kind, p.Decision)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// marked lists the live processes whose environment holds mark (an
// agent's descendants inherit it).
func marked(mark string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !strings.Contains(string(env), mark) {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	return out
}
