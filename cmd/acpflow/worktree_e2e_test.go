package main

// isolation: worktree end to end (issue 27): the real acpflow, the real
// git, the test agent writing files in its cwd over real pipes.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
)

// gitRepo makes a repository with one commit (a README and a
// .gitignore that ignores *.log) and returns its directory.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.log\n"), 0o644)
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", ".")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
	return dir
}

// git runs git in dir and returns its stdout, failing the test on error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// lines splits git's output into lines, none for "".
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// acpflowBranches lists the repository's acpflow/ branches.
func acpflowBranches(t *testing.T, repo string) []string {
	return lines(git(t, repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/acpflow/"))
}

// linkedWorktrees lists `git worktree list --porcelain` of repo, but the
// main one: path → its lines (branch, locked...).
func linkedWorktrees(t *testing.T, repo string) map[string]string {
	out := map[string]string{}
	for i, block := range strings.Split(git(t, repo, "worktree", "list", "--porcelain"), "\n\n") {
		if i == 0 || strings.TrimSpace(block) == "" {
			continue
		}
		path, rest, _ := strings.Cut(strings.TrimPrefix(block, "worktree "), "\n")
		out[path] = rest
	}
	return out
}

// assertCheckoutUntouched proves the workspace's own checkout is as it
// was: HEAD the same, nothing changed or added.
func assertCheckoutUntouched(t *testing.T, repo, head string) {
	t.Helper()
	if got := git(t, repo, "rev-parse", "HEAD"); got != head {
		t.Errorf("the workspace's HEAD moved: %s, was %s", got, head)
	}
	if st := git(t, repo, "status", "--porcelain", "--ignored"); st != "" {
		t.Errorf("the workspace's checkout changed:\n%s", st)
	}
	if b := git(t, repo, "branch", "--show-current"); b != "main" {
		t.Errorf("the workspace's branch is %q, want main", b)
	}
}

// readResults reads an --output file.
func readResults(t *testing.T, path string) []engine.RunResult {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []engine.RunResult
	for _, l := range lines(strings.TrimSpace(string(b))) {
		var r engine.RunResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("result line %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// editWorkflow is one agent step that writes the file the input names, in
// its cwd: the run's worktree.
func editWorkflow(t *testing.T, dir, record string, extra ...string) string {
	args := append([]string{"-record", record, "-try", "write:${{ inputs.file }}", "-prompt-delay", "50ms"}, extra...)
	return writeWorkflow(t, dir, fmt.Sprintf(`name: edit
isolation: worktree
inputs:
  file: {type: string, required: true}
agents:
  a: {command: %s, args: %s}
steps:
  - {id: write, uses: acp-subagent, with: {agent: a, prompt: "write ${{ inputs.file }}"}}
outputs:
  branch: ${{ run.worktree.branch }}
`, testAgent, agentArgs(args...)))
}

func TestABatchOfTwentyOnOneRepositoryGivesEachRunABranchWithOnlyItsChange(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	record := filepath.Join(dir, "record.jsonl")
	wf := editWorkflow(t, dir, record)
	const n = 20
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "{\"file\": \"task-%02d.txt\"}\n", i)
	}
	inputs := filepath.Join(dir, "tasks.jsonl")
	os.WriteFile(inputs, []byte(in.String()), 0o644)
	out := filepath.Join(dir, "out.jsonl")

	r := acpflow(t, repo, "run", wf, "--inputs", inputs, "--concurrency", "8", "--state", state, "--output", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	results := readResults(t, out)
	if len(results) != n {
		t.Fatalf("%d results, want %d", len(results), n)
	}
	seen := map[string]bool{}
	for _, res := range results {
		file := res.Inputs["file"].(string)
		wt := res.Worktree
		if wt == nil {
			t.Fatalf("run %s: no worktree in the result", res.RunID)
		}
		if wt.Branch != "acpflow/"+res.RunID || res.Outputs["branch"] != wt.Branch {
			t.Errorf("run %s: branch %q, output %v", res.RunID, wt.Branch, res.Outputs["branch"])
		}
		if wt.FilesChanged != 1 || !slices.Equal(wt.Files, []string{file}) || wt.Commit == "" || wt.Kept != engine.KeptWorktree || wt.Base != "HEAD" || wt.BaseCommit != head {
			t.Errorf("run %s: worktree %+v, want one file %s committed on %s and kept", res.RunID, wt, file, head)
		}
		seen[wt.Branch] = true
		// The branch holds the one commit, by acpflow, of its own file.
		if got := lines(git(t, repo, "diff", "--name-only", head, wt.Branch)); !slices.Equal(got, []string{file}) {
			t.Errorf("branch %s changes %v, want only %s", wt.Branch, got, file)
		}
		if log := git(t, repo, "log", "--format=%an|%s", head+".."+wt.Branch); log != "acpflow|acpflow: edit run "+res.RunID {
			t.Errorf("branch %s log: %q", wt.Branch, log)
		}
		if c := git(t, repo, "rev-parse", wt.Branch); c != wt.Commit {
			t.Errorf("branch %s is at %s, the result says %s", wt.Branch, c, wt.Commit)
		}
		if b, err := os.ReadFile(filepath.Join(wt.Path, file)); err != nil || string(b) != "written by testagent\n" {
			t.Errorf("the worktree %s lacks the agent's file: %v", wt.Path, err)
		}
	}
	if got := acpflowBranches(t, repo); len(got) != n || len(seen) != n {
		t.Errorf("%d acpflow branches (%d in results), want %d: %v", len(got), len(seen), n, got)
	}
	wts := linkedWorktrees(t, repo)
	if len(wts) != n {
		t.Errorf("git lists %d worktrees besides the checkout, want %d", len(wts), n)
	}
	for p, rest := range wts {
		if strings.Contains(rest, "locked") {
			t.Errorf("worktree %s is locked: %s", p, rest)
		}
		if !strings.HasPrefix(p, filepath.Join(dir, "state", "worktrees")+"/") {
			t.Errorf("worktree %s is not in acpflow's directory beside the store", p)
		}
	}
	assertCheckoutUntouched(t, repo, head)
	assertAgentsGone(t, record)

	// acpflow worktrees lists them, each with its one file.
	r = acpflow(t, repo, "worktrees", "--json", "--state", state)
	var listed struct {
		Worktrees []struct {
			RunID     string   `json:"run_id"`
			Branch    string   `json:"branch"`
			Changed   []string `json:"changed"`
			RunStatus string   `json:"run_status"`
		} `json:"worktrees"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || r.code != 0 {
		t.Fatalf("worktrees --json: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if len(listed.Worktrees) != n {
		t.Errorf("worktrees lists %d, want %d", len(listed.Worktrees), n)
	}
	for _, l := range listed.Worktrees {
		if !seen[l.Branch] || len(l.Changed) != 1 || l.RunStatus != "succeeded" {
			t.Errorf("listed %+v", l)
		}
	}
	// Prune removes the worktrees, whose changes are committed; the
	// branches stay.
	if r := acpflow(t, repo, "worktrees", "--prune", "--state", state); r.code != 0 || len(linkedWorktrees(t, repo)) != 0 || len(acpflowBranches(t, repo)) != n {
		t.Errorf("prune: exit %d, %d worktrees and %d branches left, want 0 and %d\n%s", r.code, len(linkedWorktrees(t, repo)), len(acpflowBranches(t, repo)), n, r.stderr)
	}
	// show prints a run's.
	if r := acpflow(t, repo, "show", results[0].RunID, "--state", state); !strings.Contains(r.stdout, "worktree:  branch "+results[0].Worktree.Branch+" from HEAD, commit ") {
		t.Errorf("show lacks the worktree:\n%s", r.stdout)
	}
}

func TestKeepChangedRemovesTheWorktreesOfRunsThatChangedNothing(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	record := filepath.Join(dir, "record.jsonl")
	wf := editWorkflow(t, dir, record)
	// Two runs write an ignored file (nothing changes), one a real one.
	inputs := filepath.Join(dir, "tasks.jsonl")
	os.WriteFile(inputs, []byte("{\"file\": \"a.log\"}\n{\"file\": \"kept.txt\"}\n{\"file\": \"b.log\"}\n"), 0o644)
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, repo, "run", wf, "--inputs", inputs, "-c", "3", "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var kept string
	for _, res := range readResults(t, out) {
		wt := res.Worktree
		switch res.Inputs["file"] {
		case "kept.txt":
			kept = wt.Branch
			if wt.Kept != engine.KeptWorktree || wt.FilesChanged != 1 {
				t.Errorf("the run that changed a file: %+v", wt)
			}
		default:
			if wt.Kept != engine.KeptNothing || wt.FilesChanged != 0 || wt.Commit != "" {
				t.Errorf("a run that changed nothing: %+v", wt)
			}
			if _, err := os.Stat(wt.Path); !os.IsNotExist(err) {
				t.Errorf("its worktree %s is still there: %v", wt.Path, err)
			}
		}
	}
	if got := acpflowBranches(t, repo); !slices.Equal(got, []string{kept}) {
		t.Errorf("branches %v, want only %s", got, kept)
	}
	if len(linkedWorktrees(t, repo)) != 1 {
		t.Errorf("worktrees: %v", linkedWorktrees(t, repo))
	}
	assertCheckoutUntouched(t, repo, head)
	assertAgentsGone(t, record)
}

func TestEachPreflightErrorComesBeforeAnyAgentStarts(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := editWorkflow(t, dir, record)
	state := filepath.Join(dir, "state.db")
	noRepo := t.TempDir()
	dirty := gitRepo(t)
	os.WriteFile(filepath.Join(dirty, "README"), []byte("changed\n"), 0o644)
	clean := gitRepo(t)
	badBase := filepath.Join(dir, "badbase.yaml")
	src, _ := os.ReadFile(wf)
	os.WriteFile(badBase, []byte(strings.Replace(string(src), "isolation: worktree\n", "isolation: worktree\nbase: no-such-branch\n", 1)), 0o644)

	noGit := t.TempDir() // a PATH without git
	for _, c := range []struct {
		name, workspace, file string
		env                   []string
		want                  string
	}{
		{"not a repository", noRepo, wf, nil, "is not in a git repository"},
		{"dirty checkout", dirty, wf, nil, "uncommitted changes (README)"},
		{"unknown base", clean, badBase, nil, "no-such-branch"},
		{"git missing", clean, wf, []string{"PATH=" + noGit}, "git not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(acpflowBin, "run", c.file, "-i", "file=x.txt", "--state", state)
			cmd.Dir = c.workspace
			cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), c.env...)
			outb, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
			if code != 2 || !strings.Contains(string(outb), c.want) || !strings.Contains(string(outb), "isolation: worktree") {
				t.Errorf("exit %d, want 2 and %q:\n%s", code, c.want, outb)
			}
			if _, err := os.Stat(record); !os.IsNotExist(err) {
				t.Errorf("an agent started: %v", readRecords(t, record))
			}
		})
	}
	if st := git(t, dirty, "status", "--porcelain"); st != "M README" {
		t.Errorf("the dirty checkout changed: %q", st)
	}
	if b := acpflowBranches(t, clean); len(b) != 0 {
		t.Errorf("branches made: %v", b)
	}
}

func TestAForEachStepWithIsolationGivesEachElementItsOwnBranch(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: fan
agents:
  a: {command: %s, args: %s}
steps:
  - id: fix
    for-each: ${{ ["one", "two", "three"] }}
    isolation: worktree
    keep: always
    uses: acp-subagent
    with: {agent: a, prompt: "fix ${{ item }}"}
  - id: after
    needs: fix
    run: ls
`, testAgent, agentArgs("-record", record, "-try", "write:fixed.txt")))
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, repo, "run", wf, "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	res := readResults(t, out)[0]
	wts := res.Steps["fix"].Worktrees
	if len(wts) != 3 || res.Worktree != nil {
		t.Fatalf("worktrees %+v, run's %+v", wts, res.Worktree)
	}
	for i, wt := range wts {
		want := fmt.Sprintf("acpflow/%s-fix-%d", res.RunID, i)
		if wt.Branch != want || wt.Index == nil || *wt.Index != i || wt.FilesChanged != 1 || wt.Kept != engine.KeptWorktree {
			t.Errorf("element %d: %+v, want branch %s with one file", i, wt, want)
		}
		if got := lines(git(t, repo, "diff", "--name-only", head, wt.Branch)); !slices.Equal(got, []string{"fixed.txt"}) {
			t.Errorf("branch %s changes %v", wt.Branch, got)
		}
	}
	// The step after works in the workspace, which the elements left alone.
	if o, _ := res.Steps["after"].Output.(string); strings.Contains(o, "fixed.txt") {
		t.Errorf("the workspace got an element's file: %q", o)
	}
	assertCheckoutUntouched(t, repo, head)
	assertAgentsGone(t, record)
}

func TestResumeReusesTheRunsWorktreeAndSaysSoWhenItIsGone(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	record := filepath.Join(dir, "record.jsonl")
	// The second step fails until its cwd, a directory in the worktree,
	// exists.
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: twice
isolation: worktree
agents:
  a: {command: %s, args: %s}
  b: {command: %s, args: %s, cwd: later}
steps:
  - {id: first, uses: acp-subagent, with: {agent: a, prompt: "first"}}
  - {id: second, needs: first, uses: acp-subagent, with: {agent: b, prompt: "second"}}
`, testAgent, agentArgs("-record", record, "-try", "write:first.txt"), testAgent, agentArgs("-record", record, "-try", "write:second.txt")))
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, repo, "run", wf, "--state", state, "--output", out); r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	first := readResults(t, out)[0]
	wt := first.Worktree
	if wt == nil || wt.Kept != engine.KeptWorktree || !slices.Equal(wt.Files, []string{"first.txt"}) {
		t.Fatalf("the failed run's worktree: %+v", wt)
	}
	os.MkdirAll(filepath.Join(wt.Path, "later"), 0o755)
	os.WriteFile(filepath.Join(wt.Path, "later", ".keep"), nil, 0o644)
	if r := acpflow(t, repo, "resume", first.RunID, "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	res := readResults(t, out)[1]
	if res.Worktree.Path != wt.Path || res.Worktree.Branch != wt.Branch {
		t.Errorf("the resumed run works in %+v, not its worktree %+v", res.Worktree, wt)
	}
	got := lines(git(t, repo, "diff", "--name-only", head, wt.Branch))
	if !slices.Equal(got, []string{"first.txt", "later/.keep", "later/second.txt"}) || res.Worktree.FilesChanged != 3 {
		t.Errorf("the branch changes %v; the result says %+v", got, res.Worktree)
	}
	assertCheckoutUntouched(t, repo, head)

	// A run whose worktree is gone cannot be resumed where it was.
	if r := acpflow(t, repo, "run", wf, "--state", state, "--output", out); r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	again := readResults(t, out)[2]
	git(t, repo, "worktree", "remove", "--force", again.Worktree.Path)
	r := acpflow(t, repo, "resume", again.RunID, "--state", state)
	if r.code == 0 || !strings.Contains(r.stderr, "its worktree "+again.Worktree.Path+" (branch "+again.Worktree.Branch+") is gone") {
		t.Errorf("resume without the worktree: exit %d\n%s", r.code, r.stderr)
	}
	assertAgentsGone(t, record)
}

func TestAKilledBatchThenResumeAndPruneLeaveNoStrayWorktreeOrLock(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	record := filepath.Join(dir, "record.jsonl")
	wf := editWorkflow(t, dir, record, "-prompt-delay", "30s")
	const n = 12
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "{\"file\": \"task-%02d.txt\"}\n", i)
	}
	inputs := filepath.Join(dir, "tasks.jsonl")
	os.WriteFile(inputs, []byte(in.String()), 0o644)

	batch := startAcpflow(t, repo, "run", wf, "--inputs", inputs, "-c", "4", "--state", state)
	// Killed once four runs are in their agents' turns, in their worktrees.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if countPrompts(t, record) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch never got four turns going\n%s", batch.stderr.String())
		}
	}
	batch.cmd.Process.Signal(syscall.SIGKILL)
	batch.cmd.Wait()
	if len(linkedWorktrees(t, repo)) == 0 {
		t.Fatal("the killed batch left no worktree to resume")
	}
	// The resume finishes every line, each run in its own worktree, and
	// the agents answer at once this time.
	os.WriteFile(wf, []byte(strings.Replace(mustRead(t, wf), `"30s"`, `"10ms"`, 1)), 0o644)
	out := filepath.Join(dir, "out.jsonl")
	batchID := ""
	r := acpflow(t, repo, "runs", "--json", "--state", state)
	for _, l := range lines(strings.TrimSpace(r.stdout)) {
		var run struct {
			BatchID string `json:"batch_id"`
		}
		json.Unmarshal([]byte(l), &run)
		batchID = run.BatchID
	}
	if r := acpflow(t, repo, "resume", batchID, "--force", "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := acpflow(t, repo, "worktrees", "--prune", "--state", state); r.code != 0 {
		t.Fatalf("worktrees --prune: exit %d\n%s", r.code, r.stderr)
	}
	// Left: no worktree (each run committed its change), one branch per
	// line with only its own file; no lock file anywhere in the repository.
	if wts := linkedWorktrees(t, repo); len(wts) != 0 {
		t.Errorf("worktrees left: %v", wts)
	}
	byFile := map[string]string{}
	for _, branch := range acpflowBranches(t, repo) {
		files := lines(git(t, repo, "diff", "--name-only", head, branch))
		if len(files) != 1 {
			t.Errorf("branch %s changes %v", branch, files)
			continue
		}
		if byFile[files[0]] != "" {
			t.Errorf("two branches change %s", files[0])
		}
		byFile[files[0]] = branch
	}
	if len(byFile) != n {
		t.Errorf("%d branches with a file for %d lines: %v", len(byFile), n, byFile)
	}
	filepath.WalkDir(filepath.Join(repo, ".git"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".lock") {
			t.Errorf("lock left: %s", p)
		}
		return nil
	})
	// Nothing left in acpflow's directory.
	ents, _ := os.ReadDir(filepath.Join(dir, "state", "worktrees"))
	if len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("acpflow's worktree directory holds %v", names)
	}
	assertCheckoutUntouched(t, repo, head)
	assertAgentsGone(t, record)
}

func countPrompts(t *testing.T, record string) int {
	n := 0
	if _, err := os.Stat(record); err != nil {
		return 0
	}
	for _, c := range prompts(t, record) {
		n += c
	}
	return n
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPruneRemovesWorktreesOfFinishedRunsAndForgetsVanishedOnes(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	record := filepath.Join(dir, "record.jsonl")
	wf := editWorkflow(t, dir, record)
	src := mustRead(t, wf)
	os.WriteFile(wf, []byte(strings.Replace(src, "isolation: worktree\n", "isolation: worktree\nkeep: always\n", 1)), 0o644)
	inputs := filepath.Join(dir, "tasks.jsonl")
	os.WriteFile(inputs, []byte("{\"file\": \"nothing.log\"}\n{\"file\": \"vanish.txt\"}\n{\"file\": \"stays.txt\"}\n"), 0o644)
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, repo, "run", wf, "--inputs", inputs, "-c", "3", "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	by := map[string]*engine.Worktree{}
	for _, res := range readResults(t, out) {
		by[res.Inputs["file"].(string)] = res.Worktree
	}
	if len(linkedWorktrees(t, repo)) != 3 {
		t.Fatalf("keep: always kept %d worktrees, want 3", len(linkedWorktrees(t, repo)))
	}
	// One worktree's directory vanishes (the user removed it by hand).
	os.RemoveAll(by["vanish.txt"].Path)
	r := acpflow(t, repo, "worktrees", "--prune", "--state", state)
	if r.code != 0 {
		t.Fatalf("prune: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"removed " + by["nothing.log"].Branch + " ", "its run is over and changed nothing",
		"removed " + by["vanish.txt"].Branch + " ", "its directory vanished",
		"removed " + by["stays.txt"].Branch + " ", "its changes are committed on its branch, which stays",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("prune says\n%s\nwant %q", r.stdout, want)
		}
	}
	if left := linkedWorktrees(t, repo); len(left) != 0 {
		t.Errorf("left: %v", left)
	}
	// The branches with a commit stay; the empty one's goes.
	if got := acpflowBranches(t, repo); !slices.Equal(got, sorted(by["stays.txt"].Branch, by["vanish.txt"].Branch)) {
		t.Errorf("branches %v", got)
	}
	for _, f := range []string{"nothing.log", "stays.txt"} {
		if _, err := os.Stat(by[f].Path); !os.IsNotExist(err) {
			t.Errorf("the worktree's directory %s: %v", by[f].Path, err)
		}
	}
	// Listing again shows none.
	if r = acpflow(t, repo, "worktrees", "--state", state); strings.TrimSpace(r.stdout) != "no worktrees" {
		t.Errorf("worktrees:\n%s", r.stdout)
	}
	assertCheckoutUntouched(t, repo, head)
	assertAgentsGone(t, record)
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestAStepSeesTheChangesOfTheStepItNeedsInTheRunsWorktree(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: chain
isolation: worktree
agents:
  a: {command: %s, args: %s}
steps:
  - {id: write, uses: acp-subagent, with: {agent: a, prompt: "write"}}
  - {id: check, needs: write, run: "cat made.txt && pwd"}
outputs:
  seen: ${{ steps.check.output }}
  commit: ${{ run.worktree.commit }}
`, testAgent, agentArgs("-record", record, "-try", "write:made.txt")))
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, repo, "run", wf, "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	res := readResults(t, out)[0]
	if want := "written by testagent\n" + res.Worktree.Path + "\n"; res.Outputs["seen"] != want {
		t.Errorf("the shell step saw %q, want %q", res.Outputs["seen"], want)
	}
	if res.Outputs["commit"] != res.Worktree.Commit || res.Worktree.Commit == "" {
		t.Errorf("outputs.commit %v, worktree %+v", res.Outputs["commit"], res.Worktree)
	}
	if msg := git(t, repo, "log", "-1", "--format=%B", res.Worktree.Branch); !strings.Contains(msg, "Steps: write, check") {
		t.Errorf("the commit message does not name the steps:\n%s", msg)
	}
	// The event stream's run_end carries it too.
	r0 := acpflow(t, repo, "run", wf, "--json", "--state", state)
	var end struct {
		Type     string           `json:"type"`
		Worktree *engine.Worktree `json:"worktree"`
	}
	evs := lines(strings.TrimSpace(r0.stdout))
	if len(evs) == 0 || json.Unmarshal([]byte(evs[len(evs)-1]), &end) != nil || end.Type != "run_end" || end.Worktree == nil || end.Worktree.FilesChanged != 1 {
		t.Errorf("--json's last event: %+v\n%s", end, r0.stdout)
	}
	// show --json carries it as the result does.
	r := acpflow(t, repo, "show", res.RunID, "--json", "--state", state)
	var shown struct {
		Worktree *engine.Worktree `json:"worktree"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || shown.Worktree == nil || shown.Worktree.Commit != res.Worktree.Commit || shown.Worktree.FilesChanged != 1 {
		t.Errorf("show --json: %v, %+v\n%s", err, shown.Worktree, r.stdout)
	}
	assertCheckoutUntouched(t, repo, head)
	assertAgentsGone(t, record)
}

func TestSixteenRunsAddingWorktreesAtOnceDoNotRaceOnGitsLocks(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	wf := writeWorkflow(t, dir, `name: many
isolation: worktree
inputs:
  n: {type: number, required: true}
steps:
  - {id: touch, run: "echo ${{ inputs.n }} > n-${{ inputs.n }}.txt"}
`)
	const n = 32
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "{\"n\": %d}\n", i)
	}
	inputs := filepath.Join(dir, "in.jsonl")
	os.WriteFile(inputs, []byte(in.String()), 0o644)
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, repo, "run", wf, "--inputs", inputs, "-c", "16", "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, res := range readResults(t, out) {
		want := fmt.Sprintf("n-%v.txt", res.Inputs["n"])
		if got := lines(git(t, repo, "diff", "--name-only", head, res.Worktree.Branch)); !slices.Equal(got, []string{want}) {
			t.Errorf("run %s: branch changes %v, want %s", res.RunID, got, want)
		}
	}
	if b := acpflowBranches(t, repo); len(b) != n {
		t.Errorf("%d branches, want %d", len(b), n)
	}
	assertCheckoutUntouched(t, repo, head)
}

// shellWriteWorkflow is one shell step that writes the file the input
// names in the run's worktree and, when wait names a file, writes its pid
// to wait.pid and waits for that file to exist before it ends (a run
// still going).
func shellWriteWorkflow(t *testing.T, dir string) string {
	return writeWorkflow(t, dir, `name: write
isolation: worktree
inputs:
  file: {type: string, required: true}
  wait: {type: string, default: ""}
steps:
  - id: write
    run: |
      mkdir -p "$(dirname "$FILE")"
      printf 'written\n' > "$FILE"
      if [ -n "$WAIT" ]; then echo $$ > "$WAIT.pid"; while [ ! -e "$WAIT" ]; do sleep 0.05; done; fi
    env: {FILE: "${{ inputs.file }}", WAIT: "${{ inputs.wait }}"}
`)
}

// Covers SPEC §10 "Worktrees, prune": after a batch whose runs committed
// their changes, --prune removes their worktrees and keeps their branches
// with the commits; a worktree given an uncommitted file (untracked, or a
// tracked file modified) after its run is kept and named, and removed
// with --force; an ignored file is not a change; the worktree of a run
// still going is kept, --force or not, and removed once the run is over.
func TestPruneRemovesTheWorktreesOfFinishedRunsAndKeepsUncommittedWork(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	wf := shellWriteWorkflow(t, dir)
	inputs := filepath.Join(dir, "tasks.jsonl")
	files := []string{"a.txt", "untracked.txt", "modified.txt", "sub dir/ignored.txt", "plain.txt"}
	var in strings.Builder
	for _, f := range files {
		fmt.Fprintf(&in, "{\"file\": %q}\n", f)
	}
	os.WriteFile(inputs, []byte(in.String()), 0o644)
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, repo, "run", wf, "--inputs", inputs, "-c", "3", "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	by := map[string]*engine.Worktree{}
	for _, res := range readResults(t, out) {
		by[res.Inputs["file"].(string)] = res.Worktree
	}
	if len(by) != len(files) || len(linkedWorktrees(t, repo)) != len(files) {
		t.Fatalf("results %v, worktrees %v", by, linkedWorktrees(t, repo))
	}
	// After the runs: one worktree gets a new file, one an edit of a
	// tracked file, one a file .gitignore ignores.
	os.WriteFile(filepath.Join(by["untracked.txt"].Path, "notes.txt"), []byte("mine\n"), 0o644)
	os.WriteFile(filepath.Join(by["modified.txt"].Path, "README"), []byte("edited\n"), 0o644)
	os.WriteFile(filepath.Join(by["sub dir/ignored.txt"].Path, "build.log"), []byte("log\n"), 0o644)

	// A run still going, on the same repository and store.
	gate := filepath.Join(dir, "go")
	running := startAcpflow(t, repo, "run", wf, "--input", "file=running.txt", "--input", "wait="+gate, "--state", state)
	runningPath := waitForWorktreeFile(t, state, "running.txt", running)

	if r := acpflow(t, repo, "worktrees", "--force", "--state", state); r.code != 2 || !strings.Contains(r.stderr, "--force goes with --prune") {
		t.Errorf("--force alone: exit %d\n%s", r.code, r.stderr)
	}
	r := acpflow(t, repo, "worktrees", "--prune", "--state", state)
	if r.code != 0 {
		t.Fatalf("prune: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, f := range []string{"a.txt", "sub dir/ignored.txt", "plain.txt"} {
		if want := "removed " + by[f].Branch + " (run "; !strings.Contains(r.stdout, want) {
			t.Errorf("prune says\n%s\nwant %q", r.stdout, want)
		}
	}
	for _, want := range []string{
		"its changes are committed on its branch, which stays",
		"kept " + by["untracked.txt"].Branch + " at " + by["untracked.txt"].Path,
		"it holds uncommitted changes (notes.txt); commit them on its branch, or --force discards them",
		"kept " + by["modified.txt"].Branch + " at " + by["modified.txt"].Path,
		"it holds uncommitted changes (README)",
		"kept acpflow/", "at " + runningPath, "its run is still going",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("prune says\n%s\nwant %q", r.stdout, want)
		}
	}
	assertWorktreesLeft(t, repo, by["untracked.txt"].Path, by["modified.txt"].Path, runningPath)
	assertBranchesHoldTheirCommits(t, repo, head, by)
	if b, err := os.ReadFile(filepath.Join(by["untracked.txt"].Path, "notes.txt")); err != nil || string(b) != "mine\n" {
		t.Errorf("the kept worktree lost its uncommitted file: %q, %v", b, err)
	}

	// --force removes those with uncommitted changes, never the running one.
	r = acpflow(t, repo, "worktrees", "--prune", "--force", "--json", "--state", state)
	var pruned struct {
		Pruned, Kept []struct{ Branch, Path, Why string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &pruned); err != nil || r.code != 0 {
		t.Fatalf("prune --force --json: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	var gone []string
	for _, p := range pruned.Pruned {
		gone = append(gone, p.Branch)
		if !strings.Contains(p.Why, "--force removed it though it holds uncommitted changes") {
			t.Errorf("pruned %+v", p)
		}
	}
	if !slices.Equal(sorted(gone...), sorted(by["untracked.txt"].Branch, by["modified.txt"].Branch)) ||
		len(pruned.Kept) != 1 || pruned.Kept[0].Path != runningPath || !strings.Contains(pruned.Kept[0].Why, "never removed, --force or not") {
		t.Errorf("prune --force: %+v", pruned)
	}
	assertWorktreesLeft(t, repo, runningPath)
	assertBranchesHoldTheirCommits(t, repo, head, by)

	// Once the run is over, its worktree goes too; its branch stays.
	os.WriteFile(gate, nil, 0o644)
	if res := running.wait(t); res.code != 0 {
		t.Fatalf("the running run: exit %d\n%s", res.code, res.stderr)
	}
	if r := acpflow(t, repo, "worktrees", "--prune", "--state", state); r.code != 0 || !strings.Contains(r.stdout, "committed on its branch") {
		t.Errorf("prune after the run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertWorktreesLeft(t, repo)
	if b := acpflowBranches(t, repo); len(b) != len(files)+1 {
		t.Errorf("branches %v, want %d", b, len(files)+1)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "state", "worktrees")); len(ents) != 0 {
		t.Errorf("acpflow's worktree directory still holds %d entries", len(ents))
	}
	assertCheckoutUntouched(t, repo, head)
}

// waitForWorktreeFile waits until a worktree beside state holds file, and
// returns the worktree's path; it fails if s ends first.
func waitForWorktreeFile(t *testing.T, state, file string, s *started) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(filepath.Dir(state), "worktrees", "*", file)); len(m) == 1 {
			return filepath.Dir(m[0])
		}
		if s.cmd.ProcessState != nil {
			break
		}
	}
	t.Fatalf("no worktree got %s\n%s", file, s.stderr.String())
	return ""
}

// assertWorktreesLeft proves git lists exactly paths besides the checkout.
func assertWorktreesLeft(t *testing.T, repo string, paths ...string) {
	t.Helper()
	var got []string
	for p := range linkedWorktrees(t, repo) {
		got = append(got, p)
	}
	if !slices.Equal(sorted(got...), sorted(paths...)) {
		t.Errorf("worktrees left %v, want %v", got, paths)
	}
}

// assertBranchesHoldTheirCommits proves each run's branch is still at
// the commit its result names, changing only the run's file.
func assertBranchesHoldTheirCommits(t *testing.T, repo, head string, by map[string]*engine.Worktree) {
	t.Helper()
	for file, wt := range by {
		if c := git(t, repo, "rev-parse", "refs/heads/"+wt.Branch); c != wt.Commit || wt.Commit == "" {
			t.Errorf("branch %s at %s, its run committed %q", wt.Branch, c, wt.Commit)
		}
		if got := git(t, repo, "diff", "--name-only", "-z", head, wt.Branch); got != file+"\x00" {
			t.Errorf("branch %s changes %q, want %s", wt.Branch, got, file)
		}
	}
}

// Covers: the worktree of a run whose acpflow was killed holds the work
// its step wrote, never committed (the commit comes at the run's end):
// prune keeps it and says to resume; the resume commits it, and prune
// then removes the worktree and keeps the branch.
func TestPruneKeepsAnInterruptedRunsWorkAndSaysResume(t *testing.T) {
	repo := gitRepo(t)
	head := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "state.db")
	wf := shellWriteWorkflow(t, dir)
	gate := filepath.Join(dir, "go")
	run := startAcpflow(t, repo, "run", wf, "--input", "file=work.txt", "--input", "wait="+gate, "--state", state)
	path := waitForWorktreeFile(t, state, "work.txt", run)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(gate + ".pid"); err == nil && strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step never waited\n%s", run.stderr.String())
		}
	}
	run.cmd.Process.Signal(syscall.SIGKILL)
	run.cmd.Wait()
	runID := filepath.Base(path)
	branch := "acpflow/" + runID

	r := acpflow(t, repo, "worktrees", "--prune", "--state", state)
	want := "kept " + branch + " at " + path + " (run " + runID + "): it holds uncommitted changes (work.txt); acpflow resume " + runID + " finishes the run and commits them, or --force discards them"
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("prune: exit %d\n%s\nwant %q\n%s", r.code, r.stdout, want, r.stderr)
	}
	assertWorktreesLeft(t, repo, path)
	// The killed acpflow's shell step ends (if it outlived acpflow) once
	// the gate is there.
	os.WriteFile(gate, nil, 0o644)
	pid, _ := strconv.Atoi(strings.TrimSpace(mustRead(t, gate+".pid")))
	for deadline := time.Now().Add(30 * time.Second); pid > 0 && syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the orphaned shell %d did not end", pid)
		}
	}

	if r := acpflow(t, repo, "resume", runID, "--state", state); r.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := acpflow(t, repo, "worktrees", "--prune", "--state", state); r.code != 0 || !strings.Contains(r.stdout, "removed "+branch+" ") {
		t.Errorf("prune after the resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertWorktreesLeft(t, repo)
	if got := git(t, repo, "diff", "--name-only", head, branch); got != "work.txt" {
		t.Errorf("branch %s changes %q, want work.txt", branch, got)
	}
	assertCheckoutUntouched(t, repo, head)
}
