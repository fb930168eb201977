package worktree

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// plant is what an agent leaves for acpflow's git in one case of
// TestGitOnAWorktreeRunsNothingAnAgentPlanted: run is the command each
// planted program runs (it leaves a marker file behind).
type plant func(t *testing.T, r *Repo, wt Worktree, run string)

// agentRepo makes a repository of the agent's and returns its git
// directory; makeHostile then arms it.
func agentRepo(t *testing.T) string {
	evil := filepath.Join(t.TempDir(), "evil")
	git(t, filepath.Dir(evil), "init", "-q", evil)
	return filepath.Join(evil, ".git")
}

// makeHostile makes the configuration of the git directory gitDir run run
// as a filter, an fsmonitor, diff and merge drivers and every hook.
func makeHostile(t *testing.T, gitDir, run string) string {
	for _, kv := range hostileConfig(run, filepath.Join(gitDir, "hooks")) {
		git(t, gitDir, "config", kv[0], kv[1])
	}
	plantHooks(t, filepath.Join(gitDir, "hooks"), run)
	return gitDir
}

// hostileConfig is configuration whose every key names run as a program
// git starts: what acpflow's git must never read from an agent's file.
func hostileConfig(run, hooks string) [][2]string {
	return [][2]string{
		{"filter.x.clean", run + "; cat"},
		{"filter.x.smudge", run + "; cat"},
		{"filter.x.required", "true"},
		{"core.fsmonitor", run},
		{"core.hooksPath", hooks},
		{"diff.x.textconv", run + "; cat"},
		{"diff.x.command", run},
		{"diff.external", run},
		{"merge.x.driver", run},
		{"core.pager", run},
		{"gpg.program", run},
		{"commit.gpgSign", "true"},
	}
}

// plantHooks writes the hooks acpflow's commit could reach into dir.
func plantHooks(t *testing.T, dir, run string) {
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-index-change", "reference-transaction", "post-checkout", "pre-auto-gc"} {
		write(t, filepath.Join(dir, h), "#!/bin/sh\n"+run+"\n")
		os.Chmod(filepath.Join(dir, h), 0o755)
	}
}

// attributes selects the planted filter and drivers for every file.
const attributes = "* filter=x diff=x merge=x\n"

// An agent leaves programs for acpflow's git wherever it can write: the
// worktree (a .git file pointing at a git directory of its own, a
// submodule's .git), the worktree's administrative directory in the
// repository (its commondir file, its config.worktree), and the
// repository's hooks. Status, Changed, Commit and Remove run none of
// them, and the commit is on the worktree's branch in the repository.
func TestGitOnAWorktreeRunsNothingAnAgentPlanted(t *testing.T) {
	cases := map[string]plant{
		"its .git file points at a git directory of its own": func(t *testing.T, r *Repo, wt Worktree, run string) {
			write(t, filepath.Join(wt.Path, ".git"), "gitdir: "+makeHostile(t, agentRepo(t), run)+"\n")
		},
		"the worktree's commondir names a git directory of its own": func(t *testing.T, r *Repo, wt Worktree, run string) {
			evil := agentRepo(t)
			// Its refs, so that a commit through it succeeds: on its branch.
			git(t, r.Root, "push", "-q", evil, wt.Branch)
			makeHostile(t, evil, run)
			write(t, filepath.Join(adminOf(t, r, wt), "commondir"), evil+"\n")
		},
		"the worktree's config.worktree, the repository reading it": func(t *testing.T, r *Repo, wt Worktree, run string) {
			git(t, r.Root, "config", "extensions.worktreeConfig", "true")
			admin := adminOf(t, r, wt)
			for _, kv := range hostileConfig(run, filepath.Join(admin, "hooks")) {
				git(t, r.Root, "config", "--file", filepath.Join(admin, "config.worktree"), kv[0], kv[1])
			}
			plantHooks(t, filepath.Join(admin, "hooks"), run)
		},
		"the repository's hooks": func(t *testing.T, r *Repo, wt Worktree, run string) {
			plantHooks(t, filepath.Join(r.Root, ".git", "hooks"), run)
		},
		"a submodule whose .git is a git directory of its own": func(t *testing.T, r *Repo, wt Worktree, run string) {
			sub := filepath.Join(wt.Path, "sub")
			evil := agentRepo(t)
			git(t, evil, "config", "core.worktree", sub)
			write(t, filepath.Join(sub, ".gitattributes"), attributes)
			write(t, filepath.Join(sub, "f"), "one\n")
			git(t, evil, "add", "f", ".gitattributes")
			git(t, evil, "commit", "-q", "-m", "sub")
			makeHostile(t, evil, run)
			write(t, filepath.Join(sub, ".git"), "gitdir: "+evil+"\n")
			// The same size: only a look at the content tells it changed.
			write(t, filepath.Join(sub, "f"), "two\n")
		},
	}
	for name, plantIt := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			tmp := t.TempDir() // where the private git directories go, and go away from
			t.Setenv("TMPDIR", tmp)
			r := newRepo(t)
			wt, err := r.Add(ctx, wtPath(r, "hostile"), "acpflow/hostile", "")
			if err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(t.TempDir(), "PWNED")
			write(t, filepath.Join(wt.Path, ".gitattributes"), attributes)
			write(t, filepath.Join(wt.Path, "work.txt"), "the agent's work\n")
			plantIt(t, r, wt, "touch "+marker)
			ran := func(when string) {
				t.Helper()
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("%s ran a program the agent planted", when)
				}
			}
			if _, err := r.Status(ctx, wt); err != nil {
				t.Errorf("Status: %v", err)
			}
			ran("Status")
			if _, err := r.Changed(ctx, wt); err != nil {
				t.Errorf("Changed: %v", err)
			}
			ran("Changed")
			c, files, err := r.Commit(ctx, wt, "m")
			ran("Commit")
			if err != nil || !slices.Contains(files, "work.txt") {
				t.Fatalf("Commit = %q, %q, %v; want work.txt committed", c, files, err)
			}
			if got := git(t, r.Root, "rev-parse", "--verify", "refs/heads/acpflow/hostile"); got != c {
				t.Errorf("the branch in the repository is at %s, Commit said %s", got, c)
			}
			if got := git(t, r.Root, "show", c+":work.txt"); got != "the agent's work" {
				t.Errorf("the commit holds work.txt = %q", got)
			}
			// As a run's end does: what the branch changes, once committed.
			if _, err := r.Changed(ctx, wt); err != nil {
				t.Errorf("Changed after the commit: %v", err)
			}
			ran("Changed after the commit")
			if err := r.Remove(ctx, wt, false); err != nil {
				t.Errorf("Remove: %v", err)
			}
			if err := r.Prune(ctx); err != nil {
				t.Errorf("Prune: %v", err)
			}
			ran("Remove and Prune")
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("left in TMPDIR: %v", left)
			}
		})
	}
}

// adminOf is the administrative directory git keeps for wt.
func adminOf(t *testing.T, r *Repo, wt Worktree) string {
	t.Helper()
	admin := adminDir(r.commonDir, wt.Path)
	if admin == "" {
		t.Fatalf("no administrative directory for %s", wt.Path)
	}
	return admin
}

// A branch an agent made a symbolic ref (to main, say) would carry
// acpflow's commit onto the branch it names: Commit refuses, saying so,
// and main does not move.
func TestCommitRefusesABranchMadeASymbolicRef(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	wt, err := r.Add(ctx, wtPath(r, "sym"), "acpflow/sym", "")
	if err != nil {
		t.Fatal(err)
	}
	main := git(t, r.Root, "rev-parse", "main")
	write(t, filepath.Join(wt.Path, "x"), "x\n")
	git(t, r.Root, "symbolic-ref", "refs/heads/acpflow/sym", "refs/heads/main")
	c, _, err := r.Commit(ctx, wt, "m")
	mustContain(t, err, "branch acpflow/sym is a symbolic ref to refs/heads/main", "nothing committed")
	if c != "" {
		t.Errorf("Commit reported %s", c)
	}
	if got := git(t, r.Root, "rev-parse", "main"); got != main {
		t.Errorf("main moved to %s", got)
	}
}

// A commit that the branch does not name afterwards is an error, never a
// reported commit.
func TestVerifyOnBranchSaysWhereTheBranchIs(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	head := git(t, r.Root, "rev-parse", "main")
	if err := r.verifyOnBranch(ctx, "main", head); err != nil {
		t.Errorf("the branch's own commit: %v", err)
	}
	other := strings.Repeat("1", len(head))
	mustContain(t, r.verifyOnBranch(ctx, "main", other), "the commit 111111111111 acpflow made is not on branch main, which names "+head[:12])
	mustContain(t, r.verifyOnBranch(ctx, "acpflow/gone", head), "not on branch acpflow/gone", "branch acpflow/gone is not in")
}
