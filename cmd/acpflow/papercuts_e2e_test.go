package main

// The CLI's paper cuts (issue 26), through the binary, as a user of gh,
// task or kubectl would meet them: `--output -`, unknown status words,
// missing arguments, the width of `acpflow agents`, Examples: in --help.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// jsonLines parses out as JSON lines, failing on any line that is not one
// (a view's line on stdout).
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var all []map[string]any
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout holds a line that is not JSON: %q (%v)\nstdout:\n%s", line, err, out)
		}
		all = append(all, m)
	}
	return all
}

// Covers: `--output -` writes the result lines to stdout, and nothing
// else: the view goes to stderr, no file named "-" is made; a batch's
// lines too; resume of a run that succeeded writes its result there;
// with --json, whose events are on stdout too, it is bad usage.
func TestOutputDashWritesTheResultsToStdout(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	hello := filepath.Join(root, "workflows", "examples", "hello.yaml")

	r := acpflow(t, dir, "run", hello, "-i", "who=Ada", "--output", "-")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	lines := jsonLines(t, r.stdout)
	if len(lines) != 1 || lines[0]["status"] != "succeeded" || lines[0]["run_id"] == "" {
		t.Fatalf("stdout is not the one result line: %v", lines)
	}
	id, _ := lines[0]["run_id"].(string)
	if out, _ := lines[0]["outputs"].(map[string]any); !strings.Contains(out["greeting"].(string), "Say hello to Ada") {
		t.Errorf("the result's outputs: %v", lines[0]["outputs"])
	}
	if !strings.Contains(r.stderr, "run "+id+" succeeded") || !strings.Contains(r.stderr, "[greet] succeeded") {
		t.Errorf("the view is not on stderr:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); !os.IsNotExist(err) {
		t.Errorf("a file named - was made (%v)", err)
	}

	// A batch: one line per run, on stdout.
	inputs := filepath.Join(dir, "inputs.jsonl")
	os.WriteFile(inputs, []byte("{\"who\":\"Ada\"}\n{\"who\":\"Grace\"}\n"), 0o644)
	r = acpflow(t, dir, "run", hello, "--inputs", inputs, "--output", "-")
	if r.code != 0 {
		t.Fatalf("batch: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if lines := jsonLines(t, r.stdout); len(lines) != 2 || lines[0]["status"] != "succeeded" || lines[1]["status"] != "succeeded" {
		t.Errorf("batch: stdout is not two result lines: %v", lines)
	}
	if !strings.Contains(r.stderr, "batch ") {
		t.Errorf("batch: its view is not on stderr:\n%s", r.stderr)
	}

	// resume of a run that already succeeded: its result, on stdout.
	r = acpflow(t, dir, "resume", id, "--output", "-")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if lines := jsonLines(t, r.stdout); len(lines) != 1 || lines[0]["run_id"] != id {
		t.Errorf("resume --output -: stdout %v", lines)
	}
	if !strings.Contains(r.stderr, "already succeeded") {
		t.Errorf("resume --output -: what it says is not on stderr:\n%s", r.stderr)
	}

	// --json puts the events on stdout: the two do not go together.
	for _, cmd := range [][]string{{"run", hello}, {"resume", id}} {
		r = acpflow(t, dir, append(cmd, "--json", "--output", "-")...)
		if r.code != cli.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, "--output - and --json both write to stdout") {
			t.Errorf("%s --json --output -: exit %d\nstdout:\n%s\nstderr:\n%s", cmd[0], r.code, r.stdout, r.stderr)
		}
	}
}

// Covers: on a terminal, `--output -` with stdout taken by a pipe or file
// draws the live view on stderr (the terminal), and stdout gets the result
// line alone.
func TestOutputDashDrawsTheLiveViewOnStderr(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script (util-linux) is not installed: no pty to run the live view on")
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: live
agents:
  slow:
    command: %s
    args: %s
steps:
  - {id: first, uses: acp-subagent, with: {agent: slow, prompt: one}}
`, testAgent, agentArgs("-record", rec, "-prompt-delay", "3s")))
	results := filepath.Join(dir, "stdout.jsonl")
	cmd := exec.Command(scriptBin, "-qfec", "stty cols 100 rows 20; "+acpflowBin+" run "+wf+" --workspace "+dir+" --output - >"+results, "/dev/null")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "TERM=xterm", "COLUMNS=100", "LINES=20")
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	assertAgentsGone(t, rec)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "prompting") || strings.Contains(string(out), `"run_id"`) {
		t.Errorf("the terminal (stderr) did not get the live view alone:\n%q", out)
	}
	b, _ := os.ReadFile(results)
	if lines := jsonLines(t, string(b)); len(lines) != 1 || lines[0]["status"] != "succeeded" {
		t.Errorf("stdout: %v", lines)
	}
}

// Covers: a word a flag does not take is an error that names the likely
// fix and every word it takes, rather than an empty table: runs --status,
// policy test --runs status=, agents NAME, a group's subcommand.
func TestUnknownWordsAreErrorsWithTheList(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(repoRoot(t), "cmd", "acpflow", "testdata", "policytest", "recorded.yaml")
	policiesYAML := filepath.Join(repoRoot(t), "workflows", "examples", "policies.yaml")
	request := filepath.Join(dir, "req.json")
	os.WriteFile(request, []byte(`{"kind": "permission", "tool": {"kind": "read", "title": "x"}, "options": [{"id": "a", "kind": "allow_once"}]}`), 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "--status", "faild"}, `unknown status "faild"; did you mean "failed"? (one of: running, waiting, succeeded, failed, cancelled)`},
		{[]string{"runs", "--status", "done"}, `unknown status "done" (one of: running, waiting, succeeded, failed, cancelled)`},
		{[]string{"policy", "test", policy, "--runs", "status=faild"}, `unknown status "faild"; did you mean "failed"? (one of: running, succeeded, failed, cancelled)`},
		{[]string{"policy", "eval", policiesYAML, "--step", "acts", "--request", request}, `--step: unknown step "acts"; did you mean "act"? (one of: survey, act) in `},
		{[]string{"agents", "claud"}, `acpflow agents: unknown agent "claud"; did you mean "claude"? (one of: demo, replay, claude,`},
		{[]string{"policy", "evl"}, `acpflow policy: unknown command "evl"; did you mean "eval"? (one of: eval, test)`},
		{[]string{"agent", "dmo"}, `acpflow agent: unknown command "dmo"; did you mean "demo"? (one of: demo, replay)`},
	} {
		r := acpflow(t, dir, tt.args...)
		if r.code != cli.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("acpflow %s: exit %d; want 2 and %q\nstdout:\n%s\nstderr:\n%s",
				strings.Join(tt.args, " "), r.code, tt.want, r.stdout, r.stderr)
		}
	}
	if r := acpflow(t, dir, "runs", "--status", "failed"); r.code != 0 || !strings.HasPrefix(r.stdout, "RUN ") {
		t.Errorf("runs --status failed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Covers: every command told too few or too many arguments says which one
// is missing (and where ids come from) or which is one too many, with its
// usage line, exit 2: never cobra's "accepts 1 arg(s), received 0". Every
// command of the tree is in the table, so a new one is checked too.
func TestArgumentErrorsNameTheArgument(t *testing.T) {
	dir := t.TempDir()
	// The arguments that are one too few and one too many, and what each
	// must say; "" for a case that does not apply.
	cases := map[string]struct {
		few     []string
		missing string
		many    []string
	}{
		"run":           {nil, "acpflow run: missing FILE (the workflow file to run)", []string{"a.yaml", "b.yaml"}},
		"validate":      {nil, "acpflow validate: missing FILE (a workflow or policy file to check)", nil},
		"runs":          {nil, "", []string{"x"}},
		"show":          {nil, "acpflow show: missing RUN_ID (see 'acpflow runs' for ids)", []string{"a", "b"}},
		"export":        {nil, "acpflow export: missing RUN_ID (see 'acpflow runs' for ids)", []string{"a", "b"}},
		"resume":        {nil, "acpflow resume: missing RUN_ID|BATCH_ID (see 'acpflow runs' for ids)", []string{"a", "b"}},
		"probe":         {nil, "acpflow probe: missing an agent to start (-- CMD [ARGS...]) or --sandbox", nil},
		"policy":        {nil, "", []string{"x"}},
		"policy eval":   {nil, "acpflow policy eval: missing FILE (a workflow or a bare policy file)", []string{"a", "b"}},
		"policy test":   {nil, "acpflow policy test: missing POLICY (a policy or workflow file to test)", nil},
		"agent":         {nil, "", []string{"x"}},
		"agent demo":    {nil, "", []string{"x"}},
		"agent replay":  {[]string{"f.json"}, "acpflow agent replay: missing STEP (a transcript file that acpflow export wrote, and a step id in it)", []string{"a", "b", "c"}},
		"agents":        {nil, "", []string{"a", "b"}},
		"agents verify": {}, // any number of presets; an unknown one is named (verify_e2e_test.go)
		"approvals":     {nil, "", []string{"x"}},
		"approve":       {[]string{"ap-1"}, "acpflow approve: missing ANSWER (acpflow approvals lists the pending ones)", []string{"a", "allow", "b"}},
		"schema":        {nil, "", []string{"x"}},
		"version":       {nil, "", []string{"x"}},
		"ui":            {nil, "", []string{"x"}},
		"worktrees":     {nil, "", []string{"x"}},
		"prompt":        {}, // prompt.go's own: AGENT "text" or AGENT -- COMMAND
	}
	for _, c := range allCommands(newRootCmd()) {
		path := strings.TrimPrefix(c.CommandPath(), "acpflow ")
		tc, ok := cases[path]
		if !ok {
			t.Errorf("%s is not in this test's table: say what its missing and extra arguments do", path)
			continue
		}
		words := strings.Fields(path)
		if tc.missing != "" {
			r := acpflow(t, dir, append(words, tc.few...)...)
			if r.code != cli.ExitUsage || !strings.HasPrefix(r.stderr, tc.missing+"\nusage: acpflow "+path) {
				t.Errorf("acpflow %s %s: exit %d; want 2 and %q with the usage line\nstderr:\n%s",
					path, strings.Join(tc.few, " "), r.code, tc.missing, r.stderr)
			}
		}
		if tc.many != nil {
			r := acpflow(t, dir, append(words, tc.many...)...)
			if r.code != cli.ExitUsage || !strings.HasPrefix(r.stderr, "acpflow "+path+": ") ||
				!(strings.Contains(r.stderr, "unexpected argument") || strings.Contains(r.stderr, "unknown command")) {
				t.Errorf("acpflow %s %s: exit %d; want 2 and the extra argument named\nstderr:\n%s",
					path, strings.Join(tc.many, " "), r.code, r.stderr)
			}
			if strings.Contains(r.stderr, "arg(s)") {
				t.Errorf("acpflow %s: cobra's words:\n%s", path, r.stderr)
			}
		}
	}
	// A group alone is help, as before: exit 0.
	if r := acpflow(t, dir, "policy"); r.code != 0 || !strings.Contains(r.stdout, "eval") {
		t.Errorf("policy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Covers: `acpflow agents` fits 80 columns and keeps each preset's name,
// mode, measured release and (cut) command; NAME shows one preset whole,
// --wide every column and every preset's coverage.
func TestAgentsFitsEightyColumns(t *testing.T) {
	dir := t.TempDir()
	r := acpflow(t, dir, "agents")
	if r.code != 0 {
		t.Fatalf("agents: exit %d\n%s", r.code, r.stderr)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("agents: a line of %d columns: %q", n, line)
		}
	}
	for _, p := range acpagent.Presets() {
		row := ""
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(line, p.Name+" ") {
				row = line
			}
		}
		f := strings.Fields(row)
		if len(f) < 4 || f[1] != shortMode(p.Mode) || f[2] != orDash(p.Version) || f[3] != p.Command {
			t.Errorf("agents: the row of %s is %q; want its mode %q, version %q, command %s…", p.Name, row, p.Mode, p.Version, p.Command)
		}
	}
	if !strings.Contains(r.stdout, "acpflow agents NAME") || !strings.Contains(r.stdout, "acpflow agents --wide") {
		t.Errorf("agents does not say where the rest is:\n%s", r.stdout)
	}

	// One preset whole, wrapped to 80 columns: what the table left out.
	for _, p := range acpagent.Presets() {
		r := acpflow(t, dir, "agents", p.Name)
		if r.code != 0 {
			t.Fatalf("agents %s: exit %d\n%s", p.Name, r.code, r.stderr)
		}
		flat := strings.Join(strings.Fields(r.stdout), " ")
		command := strings.Join(append([]string{p.Command}, p.Argv()...), " ")
		for _, want := range []string{p.Name + ": " + p.Description, "command: " + command, "mode: " + orDash(p.Mode),
			"env: " + orDash(strings.Join(p.Env, " ")), strings.Join(strings.Fields(p.Unasked), " ")} {
			if !strings.Contains(flat, want) {
				t.Errorf("agents %s does not say %q:\n%s", p.Name, want, r.stdout)
			}
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if n := utf8.RuneCountInString(line); n > 80 && !strings.Contains(line, command) {
				t.Errorf("agents %s: a line of %d columns: %q", p.Name, n, line)
			}
		}
	}

	r = acpflow(t, dir, "agents", "--wide")
	for _, p := range acpagent.Presets() {
		if !strings.Contains(r.stdout, "\n"+p.Name+": "+p.Description) {
			t.Errorf("agents --wide: no coverage line for %s:\n%s", p.Name, r.stdout)
		}
		for _, env := range p.Env {
			if !strings.Contains(r.stdout, env) {
				t.Errorf("agents --wide: no %s for %s", env, p.Name)
			}
		}
	}
}

// Covers: every command's --help, as the binary prints it, has Examples:.
func TestEveryHelpShowsExamples(t *testing.T) {
	dir := t.TempDir()
	for _, c := range allCommands(newRootCmd()) {
		args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "acpflow ")), "--help")
		r := acpflow(t, dir, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "\nExamples:\n  acpflow ") && !strings.Contains(r.stdout, "\nExamples:\n  #") {
			t.Errorf("acpflow %s: exit %d, no Examples:\n%s", strings.Join(args, " "), r.code, r.stdout)
		}
	}
}
