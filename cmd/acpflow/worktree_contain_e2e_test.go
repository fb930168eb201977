package main

// Containment outlives the step (SPEC §10, issue 36), for acpflow's own
// git: at a run's end acpflow commits the worktree with the git you
// installed, outside any sandbox. Through the real binary, a test agent
// whose -try sh: script plays the agent leaves programs for that git
// wherever it can write, and none of them may run; the run's work is
// committed on the branch the result names, in the repository.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/sandbox"
)

// armScript defines arm GITDIR CONFIGFILE in sh: it makes the
// configuration file name run as a filter, an fsmonitor, diff and merge
// drivers, a pager and a signing program, and puts every hook acpflow's
// commit could reach in GITDIR/hooks, each running run.
func armScript(run string) string {
	var b strings.Builder
	b.WriteString("arm() {\n")
	for _, kv := range [][2]string{
		{"filter.x.clean", run + "; cat"}, {"filter.x.smudge", run + "; cat"}, {"filter.x.required", "true"},
		{"core.fsmonitor", run}, {"core.hooksPath", "$1/hooks"},
		{"diff.x.textconv", run + "; cat"}, {"diff.x.command", run}, {"diff.external", run},
		{"merge.x.driver", run}, {"core.pager", run}, {"gpg.program", run}, {"commit.gpgSign", "true"},
	} {
		fmt.Fprintf(&b, "  git config --file \"$2\" %s \"%s\" || exit 1\n", kv[0], kv[1])
	}
	b.WriteString("  mkdir -p \"$1/hooks\" || exit 1\n")
	b.WriteString("  for h in pre-commit commit-msg post-commit post-index-change reference-transaction post-checkout pre-auto-gc; do\n")
	fmt.Fprintf(&b, "    printf '#!/bin/sh\\n%%s\\n' '%s' > \"$1/hooks/$h\" && chmod +x \"$1/hooks/$h\" || exit 1\n", run)
	b.WriteString("  done\n}\n")
	return b.String()
}

// theWork is the agent's legitimate change, and the attributes that select
// the planted filter and drivers for every file.
const theWork = `set -e
echo "the agent's work" > work.txt
printf '* filter=x diff=x merge=x\n' > .gitattributes
`

// plantCase is one place an agent leaves its programs: the script (after
// armScript and theWork), and whether its agent runs in a sandbox.
type plantCase struct {
	name, script string
	sandboxed    bool
	// worktreeConfig: the repository enables extensions.worktreeConfig
	// (a user's choice, made before the run).
	worktreeConfig bool
}

// The places: what a sandboxed agent can write (a submodule's .git in its
// worktree), and what an agent can write whose sandbox allows it (write:
// naming them) or that has none (the worktree's .git file, which a sandbox
// keeps read-only (TestASandboxedAgentCannotRedirectItsWorktree); the
// worktree's administrative directory: its commondir file and
// config.worktree; the repository's hooks, hooksPath and fsmonitor); here
// an agent without a sandbox stands for those.
var plantCases = []plantCase{
	{name: "the worktree's .git file points at a git dir the agent built", script: `
git init -q .evil
git -C .evil -c user.name=a -c user.email=a@a commit -q --allow-empty -m evil
arm "$PWD/.evil/.git" "$PWD/.evil/.git/config"
printf 'gitdir: %s\n' "$PWD/.evil/.git" > .git
`},
	{name: "a sandboxed agent's submodule has a git dir it armed", sandboxed: true, script: `
git init -q sub
cd sub
printf '* filter=x\n' > .gitattributes
echo one > f
git add f .gitattributes
git -c user.name=a -c user.email=a@a commit -q -m sub
arm "$PWD/.git" "$PWD/.git/config"
echo two > f
cd ..
`},
	{name: "the worktree's config.worktree", worktreeConfig: true, script: `
admin=$(git rev-parse --absolute-git-dir)
arm "$admin" "$admin/config.worktree"
`},
	{name: "the worktree's commondir names a git dir the agent built", script: `
admin=$(git rev-parse --absolute-git-dir)
evil="$PWD/../$(basename "$PWD")-evil.git"
git clone -q --bare "$(git rev-parse --path-format=absolute --git-common-dir)" "$evil"
arm "$evil" "$evil/config"
echo "$evil" > "$admin/commondir"
`},
	{name: "the repository's hooks, hooksPath and fsmonitor", script: `
common=$(git rev-parse --path-format=absolute --git-common-dir)
mkdir -p "$common/hooks"
for h in pre-commit commit-msg post-commit post-index-change reference-transaction post-checkout pre-auto-gc; do
  printf '#!/bin/sh\n%s\n' "$RUN" > "$common/hooks/$h"
  chmod +x "$common/hooks/$h"
done
git config --file "$common/config" core.fsmonitor "$RUN"
git config --file "$common/config" core.hooksPath "$common/hooks"
`},
}

func TestGitAtARunsEndRunsNothingTheAgentPlanted(t *testing.T) {
	if r := sandbox.Probe(); !r.FS || !r.UserNS || !r.PIDNS {
		t.Skipf("this kernel cannot enforce a sandbox: %+v", r)
	}
	for _, c := range plantCases {
		t.Run(c.name, func(t *testing.T) {
			repo := gitRepo(t)
			if c.worktreeConfig {
				git(t, repo, "config", "extensions.worktreeConfig", "true")
			}
			main := git(t, repo, "rev-parse", "main")
			marker := filepath.Join(t.TempDir(), "PWNED-"+randomMark())
			run := "touch " + marker
			script := "RUN='" + run + "'\n" + armScript(run) + theWork + c.script
			res, state, record := runPlanted(t, repo, c.sandboxed, script)
			wt := res.Worktree
			noMarker := func(when string) {
				t.Helper()
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("%s ran a program the agent planted (%s exists)", when, marker)
				}
			}
			noMarker("the run's end")
			if res.Status != engine.StatusSucceeded || wt == nil || wt.Commit == "" {
				t.Fatalf("the run: %s %q, worktree %+v", res.Status, res.Error, wt)
			}
			// The reported commit is in the repository, on the reported
			// branch, and holds the agent's work (plumbing only: the
			// repository's config may hold what the agent planted).
			git(t, repo, "cat-file", "-e", wt.Commit+"^{commit}")
			if got := git(t, repo, "rev-parse", "--verify", "refs/heads/"+wt.Branch); got != wt.Commit {
				t.Errorf("branch %s is at %s, the result says %s", wt.Branch, got, wt.Commit)
			}
			if got := git(t, repo, "cat-file", "blob", wt.Commit+":work.txt"); got != "the agent's work" {
				t.Errorf("the commit's work.txt = %q", got)
			}
			if got := git(t, repo, "rev-parse", "main"); got != main {
				t.Errorf("main moved to %s", got)
			}
			assertAgentsGone(t, record)
			if r := acpflow(t, repo, "worktrees", "--state", state); r.code != 0 {
				t.Errorf("worktrees: exit %d\n%s", r.code, r.stderr)
			}
			if r := acpflow(t, repo, "worktrees", "--prune", "--force", "--state", state); r.code != 0 || !strings.Contains(r.stdout, "removed "+wt.Branch) {
				t.Errorf("worktrees --prune --force: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			noMarker("worktrees and worktrees --prune")
			if got := git(t, repo, "rev-parse", "--verify", "refs/heads/"+wt.Branch); got != wt.Commit {
				t.Errorf("after prune, branch %s is at %s, want %s", wt.Branch, got, wt.Commit)
			}
		})
	}
}

// runPlanted runs a one-step workflow with isolation: worktree in repo
// whose test agent (sandboxed or not) runs script in its worktree, and
// returns the run's result, its run store and the agent's record; the
// script must have succeeded.
func runPlanted(t *testing.T, repo string, sandboxed bool, script string) (res engine.RunResult, state, record string) {
	t.Helper()
	res, state, record, output := runPlantScript(t, repo, sandboxed, script)
	if !strings.Contains(output, "try sh:") || strings.Contains(output, ": ERR ") {
		t.Fatalf("the agent's script did not plant everything (%s):\n%s", res.Error, output)
	}
	return res, state, record
}

// runPlantScript is runPlanted without its check: the step's output is the
// script's, with an ": ERR " line where it failed.
func runPlantScript(t *testing.T, repo string, sandboxed bool, script string) (res engine.RunResult, state, record, output string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(t.TempDir(), "record.jsonl")
	state = filepath.Join(dir, "state", "state.db")
	sandboxValue := "false"
	if sandboxed { // writes its worktree, and its record
		sandboxValue = fmt.Sprintf("{write: [%q]}", filepath.Dir(record))
	}
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: plant
isolation: worktree
agents:
  a: {command: %s, args: %s, sandbox: %s}
steps:
  - {id: plant, uses: acp-subagent, with: {agent: a, prompt: "plant"}}
`, testAgent, agentArgs("-record", record, "-no-chunks", "-try", "sh:"+script), sandboxValue))
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, repo, "run", wf, "--state", state, "--output", out)
	results := readResults(t, out)
	if len(results) != 1 {
		t.Fatalf("exit %d, %d results\n%s", r.code, len(results), r.stderr)
	}
	res = results[0]
	if step := res.Steps["plant"]; step != nil {
		output, _ = step.Output.(string)
	}
	return res, state, record, output
}

// A sandboxed agent cannot point its worktree's .git file elsewhere: the
// sandbox keeps it read-only (SPEC §10), so the user's own git in the
// worktree after the run finds the repository acpflow made it from.
func TestASandboxedAgentCannotRedirectItsWorktree(t *testing.T) {
	if r := sandbox.Probe(); !r.FS || !r.UserNS || !r.PIDNS {
		t.Skipf("this kernel cannot enforce a sandbox: %+v", r)
	}
	repo := gitRepo(t)
	_, _, record, output := runPlantScript(t, repo, true, theWork+"printf 'gitdir: /nonexistent\\n' > .git\n")
	if !strings.Contains(output, "Read-only file system") {
		t.Errorf("the agent's write of its .git file did not fail read-only:\n%s", output)
	}
	assertAgentsGone(t, record)
}

// An agent that makes its branch a symbolic ref to main would have the
// run's commit land on main, and the result report it as the branch's:
// acpflow commits nothing, main does not move, and the run fails saying
// why, with no commit in its result.
func TestARunWhoseBranchIsNoLongerItsOwnFailsAndReportsNoCommit(t *testing.T) {
	repo := gitRepo(t)
	main := git(t, repo, "rev-parse", "main")
	res, _, record := runPlanted(t, repo, false, theWork+`
git symbolic-ref "$(git symbolic-ref HEAD)" refs/heads/main
`)
	if res.Status != engine.StatusFailed || !strings.Contains(res.Error, "is a symbolic ref to refs/heads/main, not the branch acpflow made; nothing committed") {
		t.Errorf("the run: %s, %q; want failed, saying the branch is a symbolic ref", res.Status, res.Error)
	}
	if res.Worktree == nil || res.Worktree.Commit != "" {
		t.Errorf("the result reports worktree %+v; want one without a commit", res.Worktree)
	}
	if got := git(t, repo, "rev-parse", "main"); got != main {
		t.Errorf("main moved to %s", got)
	}
	assertAgentsGone(t, record)
}
