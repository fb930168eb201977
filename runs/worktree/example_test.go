package worktree_test

import (
	"context"
	"fmt"
	"log"

	"github.com/acpflow/acpflow/runs/worktree"
)

// The life of one run's worktree: check before any agent starts, add, let
// the agent work in wt.Path, commit what it changed, and remove the
// worktree when the run kept nothing.
func Example() {
	ctx := context.Background()
	repo, err := worktree.Open(ctx, "/path/to/workspace")
	if err != nil {
		log.Fatal(err) // not a repository, or git missing (worktree.ErrNoGit)
	}
	branch := worktree.BranchPrefix + "r-20261205-0001"
	if _, err := repo.Preflight(ctx, "", branch); err != nil {
		log.Fatal(err) // dirty checkout, bad base, branch exists
	}
	wt, err := repo.Add(ctx, "/path/to/worktrees/r-20261205-0001", branch, "")
	if err != nil {
		log.Fatal(err)
	}
	// ... the run's steps work in wt.Path ...
	commit, files, err := repo.Commit(ctx, wt, "acpflow: fix.yaml run r-20261205-0001 (steps: fix)")
	if err != nil {
		log.Fatal(err)
	}
	if commit == "" { // nothing changed: keep: changed keeps nothing
		err = repo.Remove(ctx, wt, true)
	}
	fmt.Println(wt.Branch, commit, files, err)
}
